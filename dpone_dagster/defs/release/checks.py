"""Checks on the release stages: two blocking authority checks and the dormancy check.

- `policy_matches_pinned_digest` (blocking): the stored policy bytes hash to the digest pinned in
  the protected target (`verify_policy`).
- `grant_verified` (blocking): the grant verifies under the pinned policy (`verify_grant`): k-of-n
  signatures, environment, window, clock, revocation epoch, rollback, source repository and commit.
  Membership and budgets depend on the compiled source, so here the grant is checked against its
  own membership; `development_release` verifies the grant again, completely, against the compiled
  source before anything is composed.
- `tasks_denied_before_credentials` (on `installed_release`): the standard runtime admission, run
  for every native, ordinary and pre-hook task of the active installed release, denies all of them,
  and the runtime access ledger shows zero credential resolutions (zero port uses at all).

What a reader could get wrong: a failed blocking check stops every downstream stage of the run, and
the run fails; the check's description carries the stable refusal code.
"""

import dagster as dg
from dagster import AssetCheckExecutionContext

from dpone_dagster.authority.verification import ReconstructedSource, verify_grant, verify_policy
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.grant import DevelopmentGrant
from dpone_dagster.defs.release.assets import development_grant, development_policy, installed_release, release_state
from dpone_dagster.defs.release.refusals import failure_metadata
from dpone_dagster.defs.release.resources import release_pipeline
from dpone_dagster.deployment.active import installed_admission_view, load_active_release
from dpone_dagster.deployment.runtime import AccessLedger, deployment_launcher
from dpone_dagster.deployment.tasks import dormant_tasks
from dpone_dagster.errors import DponeError
from dpone_dagster.release.admission import ExecutionDeniedError
from dpone_dagster.release.state import ReleaseState


def _refused(error: DponeError) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=False, severity=dg.AssetCheckSeverity.ERROR, description=str(error), metadata=failure_metadata(error)
    )


@dg.asset_check(
    asset=development_policy,
    blocking=True,
    required_resource_keys={"authority_platform"},
    description="The stored policy is byte-for-byte the policy pinned (by digest) in the protected target.",
)
def policy_matches_pinned_digest(context: AssetCheckExecutionContext, development_policy: bytes) -> dg.AssetCheckResult:
    try:
        policy = verify_policy(development_policy, context.resources.authority_platform.pinned_policy_digest())
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
    asset=development_grant,
    blocking=True,
    required_resource_keys={"authority_platform", "release_source"},
    description="The grant verifies under the pinned policy: k-of-n signatures, environment, window, "
    "revocation epoch, rollback protection, source repository and commit.",
)
def grant_verified(context: AssetCheckExecutionContext, development_grant: tuple[bytes, bytes]) -> dg.AssetCheckResult:
    authority = context.resources.authority_platform
    grant_bytes, signature_bytes = development_grant
    try:
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
    asset=installed_release,
    required_resource_keys={"authority_platform", "target_admission", "release_registry", "release_cache", "release_source"},
    description="Standard runtime admission denies every native, ordinary and pre-hook task of the active "
    "installed release before any credential, source access or writer (zero uses in the access ledger).",
)
def tasks_denied_before_credentials(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
    pipeline, _ = release_pipeline(context.resources)
    settings = context.resources.authority_platform.settings
    ledger = AccessLedger(settings.access_ledger)
    try:
        installed = load_active_release(pipeline.cache)
    except DponeError as error:
        return _refused(error)
    if installed is None:
        return dg.AssetCheckResult(passed=False, description="no release is active in the cache")
    view = installed_admission_view(installed)
    tasks = dormant_tasks(installed.bundle)
    reasons: dict[str, int] = {}
    admitted: list[str] = []
    for task in tasks:
        launcher = deployment_launcher(
            ledger=ledger,
            run_id=context.run.run_id,
            installed=installed,
            task=task.runtime_task,
            clock=pipeline.clock,
            epochs=context.resources.authority_platform.protected,
        )
        try:
            launcher.launch(view, task.runtime_task)
            admitted.append(task.label)
        except ExecutionDeniedError as denied:
            reasons[denied.denial.reason.value] = reasons.get(denied.denial.reason.value, 0) + 1
    port_uses = ledger.entries(run_id=context.run.run_id)
    credential_resolutions = sum(1 for entry in port_uses if entry["port"] == "credentials")
    if not admitted and pipeline.states is not None:
        first = sorted(reasons)[0] if reasons else "none"
        pipeline.states.advance(installed.bundle.release_id, ReleaseState.DENIED, reason=first, tasks=len(tasks))
    by_kind: dict[str, int] = {}
    for task in tasks:
        by_kind[task.kind.value] = by_kind.get(task.kind.value, 0) + 1
    return dg.AssetCheckResult(
        passed=not admitted and not port_uses and bool(tasks),
        description=(
            f"{len(tasks)} task(s) denied before any credential, source or writer"
            if not admitted and not port_uses
            else f"{len(admitted)} task(s) admitted, {len(port_uses)} runtime port use(s)"
        ),
        metadata={
            "release_id": installed.bundle.release_id,
            "tasks": len(tasks),
            **{f"{kind}_tasks": count for kind, count in sorted(by_kind.items())},
            **{f"denied: {reason}": count for reason, count in sorted(reasons.items())},
            "admitted": len(admitted),
            "credential_resolutions": credential_resolutions,
            "runtime_port_uses": len(port_uses),
            "authority_expires_at": installed.record.authority_expires_at,
            "state": release_state(pipeline, installed.bundle.release_id),
        },
    )


RELEASE_CHECKS = (policy_matches_pinned_digest, grant_verified, tasks_denied_before_credentials)
