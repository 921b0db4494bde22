"""Operator jobs of the release location: `release_recover_job`, `release_repair_audit_job`,
`release_rollback_job`, `release_gc_job`.

Each job is one op calling `dpone_dagster.release.delivery.operations.ReleaseOperations` as the one
composition (`dpone_dagster.release.services.compose_release_services`) builds it over the run's release
resources (the composition `dpone release recover|repair-audit|rollback|gc` uses too),
with one run-config field, `dry_run` (default false). Output metadata names what the run did
(`action`), the release and deployment, the receipt kind and digest, and for gc what was (or would
be) removed. A refusal fails the step with `[code] message`, like every release stage.

What a reader could get wrong: `dry_run` is the only thing a launchpad user can set. Authority still
comes from the authority location and the protected target through the resources, which take no run
configuration; a dry run verifies no grant and writes nothing.
"""

from __future__ import annotations

import dagster as dg

from dpone_dagster.defs.release.refusals import refusals_as_failures
from dpone_dagster.defs.release.resources import release_services
from dpone_dagster.integration.binding import IN_PROCESS_EXECUTOR, workspace_tags
from dpone_dagster.release.delivery.operations import OperationOutcome

PIPELINE = {"authority_platform", "target_admission", "release_registry", "release_cache", "release_source"}


def outcome_metadata(outcome: OperationOutcome) -> dict[str, dg.RawMetadataValue]:
    metadata: dict[str, dg.RawMetadataValue] = {}
    for key, value in outcome.as_dict().items():
        if key == "removed":
            for kind, keys in value.items():
                metadata[f"{kind} ({'would remove' if outcome.dry_run else 'removed'})"] = len(keys)
                if keys:
                    metadata[f"{kind}: first"] = ", ".join(keys[:5])
        else:
            metadata[key] = value
    return metadata


DRY_RUN = {"dry_run": dg.Field(bool, default_value=False, description="List or plan only; write nothing.")}


OPERATIONS = {
    "recover": (
        "recover",
        "Complete an activation that stopped after preparation (pointer + audit entry) under a "
        "`pointer_recovery` receipt; after it, release_job can run again.",
    ),
    "repair_audit": (
        "repair_audit",
        "Append the audit entry the active deployment lacks under an `audit_repair` receipt.",
    ),
    "rollback": ("rollback", "Make the previous immutable deployment active again under a `rollback` receipt."),
    "gc": (
        "gc",
        "Remove unreferenced registry blobs and abandoned cache staging under a cleanup receipt; refused while a "
        "publication or installation holds its registry lease.",
    ),
}


def _operation_job(name: str, method: str, description: str) -> dg.JobDefinition:
    @dg.op(
        name=f"release_{name}",
        required_resource_keys=PIPELINE,
        description=description,
        out=dg.Out(dict),
        config_schema=DRY_RUN,
    )
    def operation(context) -> dict:
        with refusals_as_failures():
            outcome = getattr(release_services(context.resources).operations, method)(
                dry_run=context.op_config["dry_run"]
            )
        context.log.info(
            f"release {name}: {outcome.action}" + (" (dry run: nothing written)" if outcome.dry_run else "")
        )
        context.add_output_metadata(outcome_metadata(outcome))
        return outcome.as_dict()

    @dg.job(
        name=f"release_{name}_job",
        description=description,
        tags={"dpone/release-operation": name, **workspace_tags()},
        executor_def=IN_PROCESS_EXECUTOR,
    )
    def job() -> None:
        operation()

    return job


OPERATION_JOBS = tuple(_operation_job(name, method, text) for name, (method, text) in OPERATIONS.items())
