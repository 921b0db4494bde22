"""Jobs of the lake domain: dropping a fork, and observing the fork state of every DuckLake asset.

- `drop_fork_job`: delete a fork and clean its DuckLake namespaces, or retry a partial cleanup.
  Run config names the fork and the acting user; the same permission gate as `dpone fork drop`
  applies. The op fails (and can simply be re-run) while any ledger row is left, listing each
  leftover's lake, phase and error code — never a path or a credential.
- `fork_state_observation_job`: one `AssetObservation` per DuckLake table asset with workspace,
  namespace, `fork_state` (and the owning ancestor of a deferred table) and snapshot id, from one
  batched control-store read per lake. It writes nothing and can run at any time, in any workspace
  (in `prod` every table is `own`).

What a reader could get wrong: the observation job reports the `ducklake` resource's workspace,
which is the code location's (`DPONE_WORKSPACE`), not a run-config choice.
"""

# No `from __future__ import annotations`: Dagster reads the op's config annotation at runtime.
from dagster import Config, Failure, JobDefinition, OpExecutionContext, job, op

from dpone_dagster.config import load_config
from dpone_dagster.defs.lake.observations import AssetKeys, ducklake_asset_keys, fork_state_observations
from dpone_dagster.defs.lake.resources import DuckLakeResource
from dpone_dagster.errors import DponeError
from dpone_dagster.workspaces.service import Workspaces


class DropForkConfig(Config):
    workspace_id: str
    actor: str


@op
def drop_fork_namespaces_op(context: OpExecutionContext, config: DropForkConfig) -> None:
    try:
        result = Workspaces(load_config()).drop(config.workspace_id, actor=config.actor)
    except DponeError as exc:
        raise Failure(description=str(exc), metadata={"code": exc.code}) from None
    for ws, lake, schema in result.cleanup.cleaned:
        context.log.info(f"cleaned {ws} lake {lake} namespace {schema}")
    for orphan in result.orphaned:
        context.log.info(f"orphaned fork {orphan} stays isolated")
    if result.cleanup.leftovers:
        raise Failure(
            description=f"{len(result.cleanup.leftovers)} namespace(s) left for retry",
            metadata={
                "leftovers": [
                    f"{r.workspace_id} {r.lake} {r.phase} {r.code}" for r in result.cleanup.leftovers
                ]
            },
        )


@job(description="Drop a fork and its DuckLake namespaces (re-run to retry a partial cleanup).")
def drop_fork_job() -> None:
    drop_fork_namespaces_op()


def build_fork_state_observation_job(asset_keys: AssetKeys = ducklake_asset_keys) -> JobDefinition:
    """The observation job over the assets `asset_keys()` names (default: the dbt tables)."""

    @op(name="observe_fork_state", out={})
    def observe_fork_state(context: OpExecutionContext, ducklake: DuckLakeResource):
        report = fork_state_observations(ducklake, list(asset_keys()))
        yield from report.observations
        summary = ", ".join(f"{n} {state}" for state, n in report.counts().items()) or "no DuckLake assets"
        context.log.info(f"workspace {ducklake.workspace_id}: {summary}")

    @job(
        name="fork_state_observation_job",
        description="Observe every DuckLake asset's fork state (deferred / fork_materialized / absent / own).",
    )
    def fork_state_observation_job() -> None:
        observe_fork_state()

    return fork_state_observation_job


fork_state_observation_job = build_fork_state_observation_job()
