"""Jobs of the lake domain: creating and dropping a fork, and observing the fork state of every DuckLake asset.

- `create_fork_job`: the fork dialog of the UI. Its launchpad config is the dialog: `fork_id`,
  `owner`, `shared_lakes` (every other lake is isolated; shared lakes are the root's), `pin` (read
  each ancestor at its snapshot now) and `ttl` (e.g. `3d`; empty: `forks.ttl`). The parent is the
  deployment's own workspace, never a config choice. Bad input fails the run with one coded line
  (`workspace.invalid_id`, `workspace.exists`, `workspace.unknown_lake`, `config.invalid_duration`,
  ...); a created fork's materialization-free run metadata says how to open its UI
  (`dpone dev --workspace <fork>`).

- `drop_fork_job`: delete a fork and clean its DuckLake namespaces, or retry a partial cleanup.
  Run config names the fork and the acting user; the same permission gate as `dpone fork drop`
  applies. The op fails (and can simply be re-run) while any ledger row is left, listing each
  leftover's lake, phase and error code — never a path or a credential. The fork must be the
  deployment's own workspace or descend from it (a `prod` deployment may drop any fork, orphans
  included); anything else — a fork's parent, a sibling — is refused with
  `workspace.not_this_deployment` before anything is deleted.
- `fork_state_observation_job`: one `AssetObservation` per DuckLake table asset with workspace,
  namespace, `fork_state` (and the owning ancestor of a deferred table) and snapshot id, from one
  batched control-store read per lake. It writes nothing and can run at any time, in any workspace
  (in `prod` every table is `own`).

Both jobs carry the `dpone/workspace` job tag of the deployment, read when the code location loads
(`build_*` is called once per workspace by `integration.lake.definitions.fork_lake_definitions`).

What a reader could get wrong: the observation job reports the `ducklake` resource's workspace,
which is the code location's (`DPONE_WORKSPACE`), not a run-config choice. The drop job's
`workspace_id` is run config, but it only names which of the deployment's own forks to drop; it
never changes the workspace anything is attached or written as.
"""

# No `from __future__ import annotations`: Dagster reads the op's config annotation at runtime.
from typing import TYPE_CHECKING

from dagster import (
    Config,
    Failure,
    JobDefinition,
    MetadataValue,
    Nothing,
    OpExecutionContext,
    Out,
    Output,
    job,
    op,
)
from pydantic import Field

from dpone_dagster.config import load_config, parse_duration
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
from dpone_dagster.errors import DponeError
from dpone_dagster.integration.binding import (
    WorkspaceNotThisDeploymentError,
    bind_run,
    deployment_workspace,
    workspace_tags,
)
from dpone_dagster.integration.lake.observations import AssetKeys, fork_state_observations, location_asset_keys
from dpone_dagster.integration.lake.resources import DuckLakeResource

if TYPE_CHECKING:  # the lake services load when a run uses them, never when a location loads
    from dpone_dagster.workspaces.service import Workspaces

_MAX_CHAIN = 64


class DropForkConfig(Config):
    workspace_id: str
    actor: str


class CreateForkConfig(Config):
    """The fork dialog: what a user fills in the launchpad to create a fork of this deployment's workspace."""

    fork_id: str = Field(description="the new fork's id (git-branch-safe, e.g. wm-alice-orders)")
    owner: str = Field(description="who owns the fork (may drop it, share its lakes, grant on it)")
    shared_lakes: list[str] = Field(
        default=[], description="lakes the fork shares with the root (prod); every other lake is isolated"
    )
    pin: bool = Field(default=False, description="read each ancestor at its snapshot now instead of live")
    ttl: str = Field(default="", description="idle time before the TTL janitor drops it, e.g. 3d (empty: forks.ttl)")


def coded_failure(exc: DponeError) -> Failure:
    """A by-design refusal as one coded line in the UI (`[code] message`), its code in the metadata."""
    return Failure(description=str(exc), metadata={"code": exc.code})


def open_fork_ui_command(fork_id: str) -> str:
    return f"dpone dev --workspace {fork_id}"


@op(out=Out(Nothing))
def create_fork_op(context: OpExecutionContext, config: CreateForkConfig):
    try:
        bind_run(context.instance, context.run)
        parent = deployment_workspace()
        from dpone_dagster.workspaces.service import Workspaces

        created = Workspaces(load_config()).create_fork(
            config.fork_id,
            parent,
            owner=config.owner,
            shared_lakes=config.shared_lakes,
            shared_with=ROOT_WORKSPACE if config.shared_lakes and parent != ROOT_WORKSPACE else None,
            ttl=parse_duration(config.ttl) if config.ttl.strip() else None,
            pin=config.pin,
        )
    except DponeError as exc:
        raise coded_failure(exc) from None
    shared = ", ".join(config.shared_lakes) or "none (every lake isolated)"
    context.log.info(f"created fork {created.id} of {created.parent_id}; shared lakes: {shared}")
    yield Output(
        None,
        metadata={
            "fork": created.id,
            "parent": created.parent_id,
            "owner": created.owner,
            "shared_lakes": shared,
            "pinned": config.pin,
            "open_ui": MetadataValue.md(f"`{open_fork_ui_command(created.id)}`"),
        },
    )


def build_create_fork_job() -> JobDefinition:
    """The fork dialog as a job of the deployment's workspace, tagged as the code location loads."""

    @job(
        name="create_fork_job",
        description="Create a fork of this deployment's workspace (the launchpad config is the fork dialog); "
        "the run says how to open the fork's UI.",
        tags=workspace_tags(),
    )
    def create_fork_job() -> None:
        create_fork_op()

    return create_fork_job


def require_droppable_here(workspaces: "Workspaces", workspace_id: str) -> None:
    """Refuse to drop a workspace that is neither the deployment's own nor one of its descendants."""
    deployment = deployment_workspace()
    if deployment == ROOT_WORKSPACE or workspace_id == deployment:
        return
    parents = {w.id: w.parent_id for w in workspaces.list()}
    current: str | None = workspace_id
    for _ in range(_MAX_CHAIN):
        current = parents.get(current) if current is not None else None
        if current is None:
            break
        if current == deployment:
            return
    raise WorkspaceNotThisDeploymentError(
        f"this deployment acts for workspace {deployment!r}; {workspace_id!r} is not {deployment!r} "
        f"and does not descend from it. Drop it from its own deployment, prod's, or `dpone fork drop`"
    )


@op
def drop_fork_namespaces_op(context: OpExecutionContext, config: DropForkConfig) -> None:
    try:
        bind_run(context.instance, context.run)
        from dpone_dagster.workspaces.service import Workspaces

        workspaces = Workspaces(load_config())
        require_droppable_here(workspaces, config.workspace_id)
        result = workspaces.drop(config.workspace_id, actor=config.actor)
    except DponeError as exc:
        raise coded_failure(exc) from None
    for ws, lake, schema in result.cleanup.cleaned:
        context.log.info(f"cleaned {ws} lake {lake} namespace {schema}")
    for orphan in result.orphaned:
        context.log.info(f"orphaned fork {orphan} stays isolated")
    if result.cleanup.leftovers:
        raise Failure(
            description=f"{len(result.cleanup.leftovers)} namespace(s) left for retry",
            metadata={"leftovers": [f"{r.workspace_id} {r.lake} {r.phase} {r.code}" for r in result.cleanup.leftovers]},
        )


def build_drop_fork_job() -> JobDefinition:
    """The drop job, tagged with the deployment's workspace as the code location loads."""

    @job(
        name="drop_fork_job",
        description="Drop a fork and its DuckLake namespaces (re-run to retry a partial cleanup).",
        tags=workspace_tags(),
    )
    def drop_fork_job() -> None:
        drop_fork_namespaces_op()

    return drop_fork_job


def build_fork_state_observation_job(asset_keys: AssetKeys | None = None) -> JobDefinition:
    """The observation job over the assets `asset_keys()` names (default: the code location's `ducklake` assets)."""

    @op(name="observe_fork_state", out={})
    def observe_fork_state(context: OpExecutionContext, ducklake: DuckLakeResource):
        keys = asset_keys() if asset_keys is not None else location_asset_keys(context)
        report = fork_state_observations(ducklake, list(keys))
        yield from report.observations
        summary = ", ".join(f"{n} {state}" for state, n in report.counts().items()) or "no DuckLake assets"
        context.log.info(f"workspace {ducklake.workspace_id}: {summary}")

    @job(
        name="fork_state_observation_job",
        description="Observe every DuckLake asset's fork state (deferred / fork_materialized / absent / own).",
        tags=workspace_tags(),
    )
    def fork_state_observation_job() -> None:
        observe_fork_state()

    return fork_state_observation_job
