"""`promote_fork_job`: the parent deployment publishes a fork's tables (`lake/lifecycle/promote.py`).

Run config names the fork, its tables and the diff id the user reviewed (the `diff_against_parent`
check's metadata in the fork's UI, or `dpone fork diff`). The job acts for its deployment's
workspace, which must be the fork's parent: from any other deployment, a fork's own included, it
fails with `fork.promotion_not_parent` before anything is attached for writing. On success it
records one `AssetMaterialization` per promoted table (key `<lake>/<schema>/<table>`) with the
provenance: fork, diff id, fork snapshot and the parent snapshot the copy committed as.

What a reader could get wrong: the run config never chooses the workspace written. `fork` only
names which child to read; the written workspace is the deployment's, and a run tagged for another
workspace is refused by `bind_run` like every run of this code location.
"""

# No `from __future__ import annotations`: Dagster reads the op's config annotation at runtime.
from dagster import AssetMaterialization, Config, Failure, JobDefinition, OpExecutionContext, job, op

from dpone_dagster.config import load_config
from dpone_dagster.errors import DponeError
from dpone_dagster.integration.binding import bind_run, workspace_tags
from dpone_dagster.lake.resolution.plan import TableName


class PromoteForkConfig(Config):
    fork: str
    tables: list[str]
    diff_id: str
    lake: str = "main"


@op(out={})
def promote_fork_tables_op(context: OpExecutionContext, config: PromoteForkConfig):
    try:
        bind_run(context.instance, context.run)
        from dpone_dagster.lake.lifecycle.promote import promote

        result = promote(config.fork, config.tables, config.diff_id, lake=config.lake, config=load_config())
    except DponeError as exc:
        raise Failure(description=str(exc), metadata={"code": exc.code}) from None
    for table in result.tables:
        name = TableName.parse(table.table)
        yield AssetMaterialization(
            asset_key=[result.lake, name.schema, name.table],
            description=f"promoted from fork {result.fork}",
            metadata={
                "workspace": result.parent,
                "promoted_from": result.fork,
                "diff_id": result.diff_id,
                "fork_snapshot_id": table.fork_snapshot if table.fork_snapshot is not None else -1,
                "snapshot_id": result.snapshot_id,
                "dagster/row_count": table.rows,
                "fork_state": "own",
            },
        )
    context.log.info(f"promoted {len(result.tables)} table(s) from {result.fork} at snapshot {result.snapshot_id}")


def build_promote_fork_job() -> JobDefinition:
    """The promotion job, tagged with the deployment's workspace as the code location loads."""

    @job(
        name="promote_fork_job",
        description="Publish a child fork's tables into this deployment's workspace (needs the reviewed diff id).",
        tags=workspace_tags(),
    )
    def promote_fork_job() -> None:
        promote_fork_tables_op()

    return promote_fork_job
