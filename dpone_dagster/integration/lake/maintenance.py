"""Dagster objects of the fork lifecycle's housekeeping: lake maintenance and the TTL janitor.

- `lake_maintenance_job` + `lake_maintenance_schedule` (daily, stopped by default): run
  `dpone_dagster.lake.lifecycle.maintenance.maintain` on one root lake (run config: `lake`, `dry_run`,
  `retention`, `file_grace`). The report (expired snapshots, snapshots a pin held back, deleted
  files) is the op's output metadata.
- `fork_janitor_job` + `fork_janitor_sensor` (hourly, stopped by default): the sensor evaluates the
  janitor's dry run and requests one janitor run when some throwaway fork is idle past its TTL
  (run key: the forks it would drop and their last use, so one idle state asks once); the job
  drops them through the normal guarded, retried cleanup (`workspaces/janitor.py`).

What a reader could get wrong: both act only in the root's deployment. A fork's deployment defines
them too (one code location for every workspace), but the maintenance service refuses to run
anywhere but as the root's writer (`lake.maintain_not_root`), the janitor refuses to drop from a
fork's process (`workspace.janitor_not_root`), and the sensor skips there without evaluating
anything. Default status is STOPPED everywhere: an operator turns them on in prod.
"""

# No `from __future__ import annotations`: Dagster reads the op's config annotation at runtime.
import hashlib
import json

from dagster import (
    Config,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    Failure,
    JobDefinition,
    MetadataValue,
    OpExecutionContext,
    RunRequest,
    ScheduleDefinition,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    job,
    op,
    sensor,
)

from dpone_dagster.config import load_config, parse_duration
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
from dpone_dagster.errors import DponeError
from dpone_dagster.integration.binding import bind_run, deployment_workspace, workspace_tags

JANITOR_INTERVAL_SECONDS = 3600


class LakeMaintenanceConfig(Config):
    lake: str = "main"
    dry_run: bool = False
    retention: str = "7d"
    file_grace: str = "1d"


@op
def maintain_lake_op(context: OpExecutionContext, config: LakeMaintenanceConfig) -> None:
    from dpone_dagster.lake.lifecycle.maintenance import maintain

    try:
        bind_run(context.instance, context.run)
        report = maintain(
            config.lake,
            config=load_config(),
            dry_run=config.dry_run,
            snapshot_retention=parse_duration(config.retention),
            file_grace=parse_duration(config.file_grace),
        )
    except DponeError as exc:
        raise Failure(description=str(exc), metadata={"code": exc.code}) from None
    for note in report.notes:
        context.log.info(note)
    context.add_output_metadata(
        {
            "lake": report.lake,
            "dry_run": report.dry_run,
            "expired_snapshots": MetadataValue.json(report.expired_snapshots),
            "oldest_pin": report.oldest_pin if report.oldest_pin is not None else -1,
            "held_by_pin": MetadataValue.json(report.held_by_pin),
            "old_files_deleted": len(report.old_files),
            "orphaned_files_deleted": len(report.orphaned_files),
        }
    )


def build_lake_maintenance_job() -> JobDefinition:
    @job(
        name="lake_maintenance_job",
        description="DuckLake maintenance of a root lake: expire snapshots (never past the oldest "
        "fork pin), delete old and orphaned files (never a fork file).",
        tags=workspace_tags(),
    )
    def lake_maintenance_job() -> None:
        maintain_lake_op()

    return lake_maintenance_job


def build_lake_maintenance_schedule(maintenance_job: JobDefinition) -> ScheduleDefinition:
    return ScheduleDefinition(
        name="lake_maintenance_schedule",
        job=maintenance_job,
        cron_schedule="30 3 * * *",
        default_status=DefaultScheduleStatus.STOPPED,
        description="Daily DuckLake maintenance of the root's `main` lake (turn on in prod).",
    )


@op
def fork_janitor_op(context: OpExecutionContext) -> None:
    from dpone_dagster.workspaces.janitor import Janitor
    from dpone_dagster.workspaces.service import Workspaces

    try:
        bind_run(context.instance, context.run)
        report = Janitor(Workspaces(load_config())).run()
    except DponeError as exc:
        raise Failure(description=str(exc), metadata={"code": exc.code}) from None
    for verdict in report.verdicts:
        context.log.info(f"{'drop' if verdict.drop else 'keep'} {verdict.workspace_id}: {verdict.reason}")
    if report.failed or report.left_for_retry:
        raise Failure(
            description="some idle forks were not dropped completely",
            metadata={
                "dropped": MetadataValue.json(report.dropped),
                "failed": MetadataValue.json([f"{ws} {code}" for ws, code in report.failed]),
                "left_for_retry": MetadataValue.json(
                    [f"{ws} {lake} {code}" for ws, lake, code in report.left_for_retry]
                ),
            },
        )


def build_fork_janitor_job() -> JobDefinition:
    @job(
        name="fork_janitor_job",
        description="Drop throwaway forks idle longer than their TTL (never dev workspaces or prod).",
        tags=workspace_tags(),
    )
    def fork_janitor_job() -> None:
        fork_janitor_op()

    return fork_janitor_job


def evaluate_janitor(context: SensorEvaluationContext | None = None):
    """One sensor tick: a RunRequest when the dry run would drop something, else a SkipReason."""
    from dpone_dagster.workspaces.janitor import Janitor
    from dpone_dagster.workspaces.service import Workspaces

    workspace = deployment_workspace()
    if workspace != ROOT_WORKSPACE:
        return SkipReason(f"the janitor runs in the {ROOT_WORKSPACE!r} deployment, not in {workspace!r}'s")
    plan = Janitor(Workspaces(load_config())).plan()
    doomed = [v for v in plan.verdicts if v.drop]
    if not doomed:
        return SkipReason(f"no throwaway fork is idle past its TTL ({len(plan.verdicts)} checked)")
    key = json.dumps(sorted((v.workspace_id, v.last_used_at) for v in doomed))
    return RunRequest(
        run_key=hashlib.sha256(key.encode()).hexdigest()[:16],
        tags={"dpone/janitor": ",".join(v.workspace_id for v in doomed)[:200]},
    )


def build_fork_janitor_sensor(janitor_job: JobDefinition) -> SensorDefinition:
    @sensor(
        name="fork_janitor_sensor",
        job=janitor_job,
        minimum_interval_seconds=JANITOR_INTERVAL_SECONDS,
        default_status=DefaultSensorStatus.STOPPED,
        description="Requests a janitor run when a throwaway fork is idle past its TTL (prod only).",
    )
    def fork_janitor_sensor(context: SensorEvaluationContext):
        return evaluate_janitor(context)

    return fork_janitor_sensor
