"""`drop_fork_job`: delete a fork and clean its DuckLake namespaces, or retry a partial cleanup.

Run config names the fork and the acting user; the same permission gate as `dpone fork drop`
applies. The op fails (and can simply be re-run) while any ledger row is left, listing each
leftover's lake, phase and error code — never a path or a credential.
"""

# No `from __future__ import annotations`: Dagster reads the op's config annotation at runtime.
from dagster import Config, Failure, OpExecutionContext, job, op

from dpone_dagster.config import load_config
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
