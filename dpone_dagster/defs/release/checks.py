"""Checks on the release stages: two blocking authority checks, the blocking rollout gate, and dormancy.

- `policy_matches_pinned_digest` (blocking): the stored policy bytes hash to the digest pinned in
  the protected target (`verify_policy`).
- `grant_verified` (blocking): the grant verifies under the pinned policy (`verify_grant`): k-of-n
  signatures, environment, window, clock, revocation epoch, rollback, source repository and commit.
  Membership and budgets depend on the compiled source, so here the grant is checked against its
  own membership; `development_release` verifies the grant again, completely, against the compiled
  source before anything is composed.
- `rollout_gate` (blocking, on `published_release`, so before installation and activation): the
  release bytes fetched back from the registry, every native, ordinary and pre-hook task launched
  through the standard runtime against probe ports (`dpone_dagster.release.runtime.gate`). It fails if any
  task is admitted or any port is touched; its metadata counts admitted/denied per kind, and it
  writes the acceptance report. Denials are persisted (`runtime_denials`, origin `rollout_gate`).
- `tasks_denied_before_credentials` (on `installed_release`, after activation): the same evaluation
  over the *active* release; its denials move the release state Installed → Denied.

The two authority checks read the stored bytes from the authority location themselves (the stages
hand them no value); every check carries the release stages' op tags (`STAGE_TAGS`).

What a reader could get wrong: a failed blocking check stops every downstream stage of the run, and
the run fails; the check's description carries the stable refusal code. `installed_release`
evaluates the gate once more itself and refuses (`release.rollout_blocked`) before it installs, so
materializing the install stage alone cannot skip the gate.
"""

import dagster as dg
from dagster import AssetCheckExecutionContext

from dpone_dagster.authority.verification import ReconstructedSource, verify_grant, verify_policy
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.grant import DevelopmentGrant
from dpone_dagster.defs.release.assets import (
    STAGE_TAGS,
    StagedRelease,
    development_grant,
    development_policy,
    installed_release,
    published_release,
    release_state,
    reverified,
)
from dpone_dagster.defs.release.gate import active_gate, evaluate_gate
from dpone_dagster.defs.release.refusals import failure_metadata
from dpone_dagster.defs.release.resources import release_pipeline
from dpone_dagster.errors import DponeError


def _refused(error: DponeError) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=False, severity=dg.AssetCheckSeverity.ERROR, description=str(error), metadata=failure_metadata(error)
    )


GATE_RESOURCES = {"authority_platform", "target_admission", "release_registry", "release_cache", "release_source"}
"""What the rollout gate and the post-install gate reverify and probe with."""


@dg.asset_check(
    op_tags=STAGE_TAGS,
    asset=development_policy,
    blocking=True,
    required_resource_keys={"authority_platform"},
    description="The stored policy is byte-for-byte the policy pinned (by digest) in the protected target.",
)
def policy_matches_pinned_digest(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
    authority = context.resources.authority_platform
    try:
        policy = verify_policy(authority.policy(), authority.pinned_policy_digest())
    except DponeError as error:
        return _refused(error)
    return dg.AssetCheckResult(
        passed=True,
        metadata={
            "policy_id": policy.policy_id,
            "policy_digest": policy.document_digest(),
            "threshold": f"{policy.threshold} of {len(policy.signers)}",
            "environments": ", ".join(policy.environments),
            "source_repository": policy.source_repository,
            "max_grant_validity_seconds": policy.max_grant_validity_seconds,
            "max_workloads": policy.limits.max_workloads,
            "max_source_bytes": policy.limits.max_source_bytes,
        },
    )


@dg.asset_check(
    op_tags=STAGE_TAGS,
    asset=development_grant,
    blocking=True,
    required_resource_keys={"authority_platform", "release_source"},
    description="The grant verifies under the pinned policy: k-of-n signatures, environment, window, "
    "revocation epoch, rollback protection, source repository and commit.",
)
def grant_verified(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
    authority = context.resources.authority_platform
    try:
        documents = authority.documents()
        grant_bytes, signature_bytes = documents.grant, documents.signatures
        grant = parse_document(DevelopmentGrant, grant_bytes)
        identity = context.resources.release_source.identity()
        receipt = verify_grant(
            grant_bytes,
            authority.signatures(signature_bytes),
            pinned_policy_digest=authority.pinned_policy_digest(),
            source=ReconstructedSource(
                repository=identity.repository,
                commit=identity.commit,
                native_membership=list(grant.native_membership),
                ordinary_membership=list(grant.ordinary_membership),
                source_bytes=0,
                peak_cpu_millicores=0,
                peak_memory_bytes=0,
            ),
            ports=authority.ports(),
        )
    except DponeError as error:
        return _refused(error)
    return dg.AssetCheckResult(
        passed=True,
        metadata={
            "grant_digest": receipt.grant_digest,
            "policy_id": receipt.policy_id,
            "signers_counted": len(receipt.signer_key_ids),
            "environment": receipt.environment,
            "source_commit": receipt.source_commit,
            "sequence": receipt.sequence,
            "revocation_epoch": receipt.revocation_epoch,
            "expires_at": receipt.expires_at,
            "verified_at": receipt.verified_at,
            "authority_receipt": receipt.document_digest(),
            "membership_and_budget": "verified against the compiled source in development_release",
        },
    )


@dg.asset_check(
    op_tags=STAGE_TAGS,
    asset=published_release,
    blocking=True,
    required_resource_keys=GATE_RESOURCES,
    description="Rollout gate, before installation and activation: standard runtime admission of every native, "
    "ordinary and pre-hook task of the published release denies all of them before any credential, source or "
    "writer (probe ports count every use). Blocks the install stage otherwise; writes the acceptance report.",
)
def rollout_gate(context: AssetCheckExecutionContext, published_release: StagedRelease) -> dg.AssetCheckResult:
    pipeline, _ = release_pipeline(context.resources)
    try:
        authority, _ = reverified(context, pipeline, published_release)
        bundle = pipeline.registry.fetch(published_release.release_id)
        gate = evaluate_gate(
            context.resources, pipeline, bundle, authority, run_id=context.run.run_id, origin="rollout_gate"
        )
    except DponeError as error:
        return _refused(error)
    return dg.AssetCheckResult(
        passed=gate.result.passed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=gate.result.summary(),
        metadata={**gate.result.metadata(), **gate.report_metadata()},
    )


@dg.asset_check(
    op_tags=STAGE_TAGS,
    asset=installed_release,
    required_resource_keys=GATE_RESOURCES,
    description="After activation: standard runtime admission denies every native, ordinary and pre-hook task of "
    "the active installed release before any credential, source access or writer; the denials are recorded and "
    "move the release to Denied.",
)
def tasks_denied_before_credentials(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
    pipeline, _ = release_pipeline(context.resources)
    try:
        installed, result = active_gate(context.resources, pipeline, run_id=context.run.run_id)
    except DponeError as error:
        return _refused(error)
    if installed is None:
        return dg.AssetCheckResult(passed=False, description="no release is active in the cache")
    return dg.AssetCheckResult(
        passed=result.passed,
        description=result.summary(),
        metadata={**result.metadata(), "state": release_state(pipeline, installed.bundle.release_id)},
    )


RELEASE_CHECKS = (policy_matches_pinned_digest, grant_verified, rollout_gate, tasks_denied_before_credentials)
