"""The six release stages as assets, group `release`, in lineage order.

development_policy → development_grant → (native_workspace, ordinary_flows) → development_release
→ published_release → installed_release

Each asset is one call into the release pipeline service (`dpone_dagster.release.pipeline`) with the
run's resources; metadata reports what a user wants to see (identities, digests, counts, bytes,
receipt ids). `action` is what *this run* did (`composed`; `published` / `already_published`;
`activated` / `already_active`); the release's latest state across all runs is shown separately
and labelled as such. The grant stage shows the grant's expiry and, in the embedded default, the
renewal of an expired synthetic grant as its own logged step. A refusal fails the step with `[stable.code] message`.

What a reader could get wrong: no stage trusts authority handed down by an earlier stage. Every
stage that needs authority (compose, publish, install) re-verifies the original grant bytes from
the authority location against the pinned policy (cheap, and rollback-safe for the same grant) and
obtains its own operation receipt; values passed between stages are source-derived data
(compilation, capture, release bytes) that the services re-verify themselves. Those values are held
in the run's memory (`stage_values`), never pickled into DAGSTER_HOME, and every stage carries the
op tags `STAGE_TAGS`: any run with a release stage executes in process and is tagged
`dpone/release`, however it was launched. The policy, grant and install stages return no value.
"""

import dagster as dg
from dagster import AssetExecutionContext

from dpone_dagster.authority.verification import ReconstructedSource
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.bounds import parse_timestamp
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.flows import OrdinaryCapture
from dpone_dagster.contracts.grant import DevelopmentGrant
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.policy import DevelopmentPolicy
from dpone_dagster.contracts.receipts import DevelopmentAuthorityReceipt
from dpone_dagster.defs.release.gate import install_stage_gate, install_synthetic_runtime
from dpone_dagster.defs.release.refusals import refusals_as_failures
from dpone_dagster.defs.release.resources import release_pipeline
from dpone_dagster.defs.release.stage_values import IO_MANAGER_KEY, StagedRelease
from dpone_dagster.integration.binding import IN_PROCESS_TAG
from dpone_dagster.release.build.bundle import ReleaseBundle, open_bundle
from dpone_dagster.release.build.native import NativeCompilation
from dpone_dagster.release.pipeline import ReleasePipeline

GROUP = "release"
# What each stage's asset is, as the badge on its graph node says it.
STAGE_KINDS = {
    "development_policy": {"policy"},
    "development_grant": {"grant"},
    "ordinary_flows": {"flows"},
    "development_release": {"release"},
    "published_release": {"registry"},
    "installed_release": {"cache"},
}
AUTHORITY = {"authority_platform"}
PIPELINE = {"authority_platform", "target_admission", "release_registry", "release_cache", "release_source"}
STAGE_TAGS = {IN_PROCESS_TAG: "true", "dpone/release": "true"}
"""Op tags of every release stage and check: the run executes in process and carries `dpone/release`."""


@dg.asset(
    group_name=GROUP,
    op_tags=STAGE_TAGS,
    kinds=STAGE_KINDS["development_policy"],
    required_resource_keys=AUTHORITY,
    description="The development policy as stored in the authority location, with the digest pinned in the "
    "protected target. The blocking check `policy_matches_pinned_digest` decides whether it is the pinned one.",
)
def development_policy(context: AssetExecutionContext) -> dg.MaterializeResult:
    authority = context.resources.authority_platform
    with refusals_as_failures():
        created = authority.prepare()
        pinned = authority.pinned_policy_digest()
        stored = authority.policy()
    return dg.MaterializeResult(
        metadata={
            "pinned_policy_digest": pinned,
            "stored_policy_digest": _digest_or_note(DevelopmentPolicy.KIND, stored),
            "policy_bytes": len(stored),
            "synthetic": authority.settings.synthetic,
            "synthetic_authority_written": created,
        }
    )


@dg.asset(
    group_name=GROUP,
    op_tags=STAGE_TAGS,
    kinds=STAGE_KINDS["development_grant"],
    deps=[development_policy],
    required_resource_keys=AUTHORITY,
    description="The signed development grant and its detached signatures, as stored. The blocking check "
    "`grant_verified` verifies the threshold signatures, window, epoch, rollback and source commit.",
)
def development_grant(context: AssetExecutionContext) -> dg.MaterializeResult:
    authority = context.resources.authority_platform
    with refusals_as_failures():
        renewal = authority.renew_expired_grant()
        documents = authority.documents()
        signatures = authority.signatures(documents.signatures)
    if renewal is not None:
        context.log.warning(renewal.line())
    metadata: dict[str, dg.RawMetadataValue] = {
        "grant_digest": _digest_or_note(DevelopmentGrant.KIND, documents.grant),
        "grant_bytes": len(documents.grant),
        "signatures": len(signatures.signatures),
        "signer_key_ids": ", ".join(sorted({s.key_id[:19] for s in signatures.signatures})),
    }
    grant = _parsed_grant(documents.grant)
    if grant is not None:
        metadata.update(
            {
                "environment": grant.environment,
                "sequence": grant.sequence,
                "source_commit": grant.source_commit,
                "not_before": grant.not_before,
                "expires_at": grant.expires_at,
                "expired": authority.clock.now() >= parse_timestamp(grant.expires_at),
                "hours_until_expiry": round(
                    (parse_timestamp(grant.expires_at) - authority.clock.now()).total_seconds() / 3600, 1
                ),
                "revocation_epoch": grant.revocation_epoch,
                "native_workloads": len(grant.native_membership),
                "ordinary_workloads": len(grant.ordinary_membership),
                "execution_subjects_metadata_only": len(grant.execution_subjects),
            }
        )
    metadata["synthetic_renewal"] = (
        f"renewed: sequence {renewal.previous_sequence} expired at {renewal.previous_expires_at}"
        if renewal is not None
        else "none"
    )
    return dg.MaterializeResult(metadata=metadata)


@dg.asset(
    group_name=GROUP,
    op_tags=STAGE_TAGS,
    kinds={"dbt"},
    deps=[development_grant],
    required_resource_keys=PIPELINE,
    io_manager_key=IO_MANAGER_KEY,
    description="Every publishing dbt project of the source, compiled sealed and offline; dbt decides membership.",
)
def native_workspace(context: AssetExecutionContext) -> NativeCompilation | None:
    pipeline, _ = release_pipeline(context.resources)
    with refusals_as_failures(), context.resources.release_source.open() as tree:
        native = pipeline.compile_native(tree)
    if native is None:
        context.add_output_metadata({"projects": 0, "native_workloads": 0})
        return None
    context.add_output_metadata(
        {
            "projects": ", ".join(project.name for project in native.projects),
            "native_workloads": len(native.membership),
            "source_bytes": native.source_bytes,
            "source_snapshot_digest": native.source_snapshot_digest,
            "dbt_version": native.dbt_version,
            "selection_fingerprints": ", ".join(p.selection_fingerprint for p in native.projects),
        }
    )
    return native


@dg.asset(
    group_name=GROUP,
    op_tags=STAGE_TAGS,
    kinds=STAGE_KINDS["ordinary_flows"],
    deps=[development_grant],
    required_resource_keys=PIPELINE,
    io_manager_key=IO_MANAGER_KEY,
    description="Every ordinary flow workload (selector, SQL, pre-hooks, resources, connection aliases), "
    "rebuilt from source and compared with its committed pack.",
)
def ordinary_flows(context: AssetExecutionContext) -> OrdinaryCapture | None:
    pipeline, _ = release_pipeline(context.resources)
    with refusals_as_failures(), context.resources.release_source.open() as tree:
        ordinary = pipeline.capture_ordinary(tree)
    if ordinary is None:
        context.add_output_metadata({"ordinary_workloads": 0})
        return None
    workloads = ordinary.workloads
    context.add_output_metadata(
        {
            "ordinary_workloads": len(workloads),
            "selectors": ", ".join(w.selector for w in workloads),
            "pre_hooks": sum(len(w.hook_order) for w in workloads),
            "connection_aliases": ", ".join(sorted({c.alias for w in workloads for c in w.connections})) or "(none)",
            "peak_cpu_limit_millicores": max(w.resources.limits.cpu_millicores for w in workloads),
            "peak_memory_limit_bytes": max(w.resources.limits.memory_bytes for w in workloads),
            "source_snapshot_digest": ordinary.source_snapshot_digest,
        }
    )
    return ordinary


@dg.asset(
    group_name=GROUP,
    op_tags=STAGE_TAGS,
    kinds=STAGE_KINDS["development_release"],
    required_resource_keys=PIPELINE,
    io_manager_key=IO_MANAGER_KEY,
    description="One immutable development parent (`dpone.release-set.v3`, profile "
    "`development_workspace_delivery_v1`): the grant re-verified against the compiled source, "
    "then composed, staged, reread and verified.",
)
def development_release(
    context: AssetExecutionContext, native_workspace: NativeCompilation | None, ordinary_flows: OrdinaryCapture | None
) -> StagedRelease:
    pipeline, _ = release_pipeline(context.resources)
    with refusals_as_failures():
        source = pipeline.reconstruct(context.resources.release_source.identity(), native_workspace, ordinary_flows)
        authority = verified_authority(context, pipeline, source)
        with context.resources.release_source.open() as tree:
            bundle = pipeline.compose(
                authority=authority, source=tree, native=native_workspace, ordinary=ordinary_flows
            )
            archive_sha256 = tree.archive_sha256
    context.add_output_metadata(
        {
            "release_id": bundle.release_id,
            "source_archive_sha256": archive_sha256 or "(checkout: no archive)",
            "native_workloads": len(bundle.native_membership),
            "ordinary_workloads": len(bundle.ordinary_membership),
            "source_bytes": bundle.source_bytes,
            "release_bytes": bundle.total_bytes,
            "members": len(bundle.members),
            "policy_digest": bundle.parent.policy_digest,
            "grant_digest": bundle.parent.grant_digest,
            "integrity_subject": bundle.parent.integrity_subject,
            "delivery_status": bundle.parent.delivery_status,
            "action": "composed",
            "release_state (latest, any run)": release_state(pipeline, bundle.release_id),
        }
    )
    return StagedRelease(release_id=bundle.release_id, members=dict(bundle.members), source=source)


@dg.asset(
    group_name=GROUP,
    op_tags=STAGE_TAGS,
    kinds=STAGE_KINDS["published_release"],
    required_resource_keys=PIPELINE,
    io_manager_key=IO_MANAGER_KEY,
    description="The release published to the immutable registry under a publication receipt "
    "(content-addressed blobs, commit object written last). An identical retry writes zero bytes.",
)
def published_release(context: AssetExecutionContext, development_release: StagedRelease) -> StagedRelease:
    pipeline, issuer = release_pipeline(context.resources)
    with refusals_as_failures():
        authority, bundle = reverified(context, pipeline, development_release)
        receipt = issuer.issue_publication(authority, pipeline.projection(bundle, authority))
        result = pipeline.publish(bundle, authority=authority, receipt=receipt)
    context.add_output_metadata(
        {
            "release_id": result.release_id,
            "registry": context.resources.release_registry.location_label,
            "commit_key": result.commit_key,
            "bytes_written": result.bytes_written,
            "objects_written": result.objects_written,
            "already_published": result.already_published,
            "publication_receipt": receipt.document_digest(),
            "action": "already_published" if result.already_published else "published",
            "release_state (latest, any run)": release_state(pipeline, result.release_id),
        }
    )
    return development_release


@dg.asset(
    group_name=GROUP,
    op_tags=STAGE_TAGS,
    kinds=STAGE_KINDS["installed_release"],
    required_resource_keys=PIPELINE,
    description="The published release installed into the local cache (materialization receipt) and "
    "activated (activation receipt). Its tasks stay dormant: see the `tasks_denied_before_credentials` check.",
)
def installed_release(context: AssetExecutionContext, published_release: StagedRelease) -> dg.MaterializeResult:
    pipeline, issuer = release_pipeline(context.resources)
    with refusals_as_failures():
        authority, bundle = reverified(context, pipeline, published_release)
        gate = install_stage_gate(context.resources, pipeline, bundle, authority, run_id=context.run.run_id)
        projection = pipeline.projection(bundle, authority)
        materialization = issuer.issue_materialization(authority, projection)
        activation = issuer.issue_activation(authority, projection, purpose="activate")
        result = pipeline.install(
            bundle.release_id, authority=authority, materialization=materialization, activation=activation
        )
        synthetic_runtime = install_synthetic_runtime(context.resources)
    return dg.MaterializeResult(
        metadata={
            **gate.report_metadata(),
            **synthetic_runtime,
            "release_id": result.release_id,
            "deployment_id": result.deployment_id,
            "activated": result.changed,
            "previous_release_id": result.previous_release_id or "(none)",
            "audit_sequence": result.audit_sequence,
            "authority_expires_at": authority.expires_at,
            "materialization_receipt": materialization.document_digest(),
            "activation_receipt": activation.document_digest(),
            "action": "activated" if result.changed else "already_active",
            "release_state (latest, any run)": release_state(pipeline, result.release_id),
        }
    )


def verified_authority(
    context: AssetExecutionContext, pipeline: ReleasePipeline, source: ReconstructedSource
) -> DevelopmentAuthorityReceipt:
    """Verify the original grant bytes from the authority location against `source`, now."""
    authority = context.resources.authority_platform
    documents = authority.documents()
    return pipeline.verify_authority(documents.grant, authority.signatures(documents.signatures), source)


def reverified(
    context: AssetExecutionContext, pipeline: ReleasePipeline, staged: StagedRelease
) -> tuple[DevelopmentAuthorityReceipt, ReleaseBundle]:
    """Fresh authority for `staged`'s source, and its bytes verified again as the release they claim to be."""
    authority = verified_authority(context, pipeline, staged.source)
    return authority, open_bundle(staged.members, expected_release_id=staged.release_id)


def release_state(pipeline: ReleasePipeline, release_id: str) -> str:
    state = pipeline.states.current(release_id) if pipeline.states is not None else None
    return state.value if state is not None else "(not recorded)"


def _digest_or_note(kind: str, data: bytes) -> str:
    try:
        return digest(kind, data)
    except CodedError as error:
        return f"(unreadable: {error.code}; verification refuses it)"


def _parsed_grant(data: bytes) -> DevelopmentGrant | None:
    try:
        return parse_document(DevelopmentGrant, data)
    except CodedError:
        return None


RELEASE_ASSETS = (
    development_policy,
    development_grant,
    native_workspace,
    ordinary_flows,
    development_release,
    published_release,
    installed_release,
)
