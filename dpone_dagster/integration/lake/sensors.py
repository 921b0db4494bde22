"""`fork_state_sensor`: in a fork, report the fork state of every DuckLake asset after an ancestor materializes.

Each tick reads, per lake, the fork's states and its ancestors' tracking rows in one batched pass.
When the ancestors' rows differ from what the cursor saw (a table materialized, re-materialized or
failed anywhere up the chain, or an ancestor forgotten), the tick emits one `AssetObservation` per
DuckLake asset (workspace, namespace, fork_state, owner, snapshot id), so a table that just became
deferred shows it. Otherwise it skips with a reason a user can read: "not a fork", or "no ancestor
materialized since …". The cursor is a fingerprint of those rows plus the newest update time.
Every tick is a "skipped" tick in the UI (it requests no run); a reporting tick's reason says what it
observed ("observed the fork state of 11 DuckLake assets … (8 deferred, 1 fork_materialized, …)").

Every skip reason ends with the fork's staleness (`lake/state/staleness.py`, control store only): how many
deferred tables changed in their owner since the fork's pin or build, and how many fork-built tables
have an upstream that changed since.

What a reader could get wrong: the sensor never launches a run and never opens a catalog. A fork's
*own* materializations do not trigger it (their materialization metadata already says
`fork_materialized`). It runs by default only when the code location loads for a workspace other
than `prod`; in `prod` it is defined but stopped, and would only skip.
"""

from __future__ import annotations

import json

from dagster import DefaultSensorStatus, SensorDefinition, SensorEvaluationContext, SensorResult, SkipReason, sensor

from dpone_dagster.config import load_config
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
from dpone_dagster.integration.lake.observations import AssetKeys, fork_state_observations, location_asset_keys
from dpone_dagster.integration.lake.resources import DuckLakeResource

MINIMUM_INTERVAL_SECONDS = 60


def sensor_cursor(fingerprint: str, latest: str | None) -> str:
    return json.dumps({"ancestors": fingerprint, "latest": latest}, sort_keys=True)


def _read_cursor(cursor: str | None) -> dict:
    try:
        loaded = json.loads(cursor) if cursor else {}
    except json.JSONDecodeError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def evaluate_fork_state(
    context: SensorEvaluationContext, ducklake: DuckLakeResource, asset_keys: AssetKeys | None = None
):
    """`asset_keys` None: the `ducklake` assets of the code location the sensor runs in."""
    keys = asset_keys() if asset_keys is not None else location_asset_keys(context)
    report = fork_state_observations(ducklake, list(keys))
    workspace = ducklake.workspace_id
    forks = report.fork_lakes
    if not forks:
        return SkipReason(
            f"workspace {workspace!r} is not a fork of any DuckLake asset's lake: every table is its own, "
            "nothing is deferred"
        )
    fingerprint = "|".join(lake.ancestor_fingerprint for lake in forks)
    latest = max((t for t in (lake.latest_ancestor_update for lake in forks) if t), default=None)
    cursor = sensor_cursor(fingerprint, latest)
    seen = _read_cursor(context.cursor)
    stale = staleness_note(workspace, [lake.lake for lake in forks])
    if seen.get("ancestors") == fingerprint:
        since = seen.get("latest")
        return SensorResult(
            skip_reason=(
                f"no ancestor materialized since {since} (workspace {workspace!r})"
                if since
                else f"no ancestor of workspace {workspace!r} has materialized a tracked table yet"
            )
            + stale,
            cursor=cursor,
        )
    counts = ", ".join(f"{n} {state}" for state, n in report.counts().items())
    since = f"since {seen['latest']}" if seen.get("latest") else "since the sensor last reported"
    return SensorResult(
        asset_events=report.observations,
        skip_reason=(
            f"observed the fork state of {len(report.observations)} DuckLake assets of workspace "
            f"{workspace!r} ({counts}): an ancestor materialized {since}"
            if context.cursor
            else f"observed the fork state of {len(report.observations)} DuckLake assets of workspace "
            f"{workspace!r} ({counts}) for the first time"
        )
        + stale,
        cursor=cursor,
    )


def staleness_note(workspace: str, lakes: list[str]) -> str:
    """`; staleness: …` for a skip reason, from the control store only (no catalog is opened)."""
    from dpone_dagster.lake.state.staleness import lake_staleness

    reports = [lake_staleness(workspace, lake, catalog=False) for lake in lakes]
    deferred = sum(len(r.stale_deferred) for r in reports)
    built = sum(len(r.stale_built) for r in reports)
    return (
        f"; staleness: {deferred} deferred table(s) changed in their owner since the fork's pin or build, "
        f"{built} fork-built table(s) with an upstream changed since"
    )


def build_fork_state_sensor(asset_keys: AssetKeys | None = None, *, workspace: str | None = None) -> SensorDefinition:
    """`workspace` (default: the configured one) only decides whether the sensor runs by default."""
    workspace = workspace or load_config().workspace

    @sensor(
        name="fork_state_sensor",
        minimum_interval_seconds=MINIMUM_INTERVAL_SECONDS,
        default_status=DefaultSensorStatus.STOPPED if workspace == ROOT_WORKSPACE else DefaultSensorStatus.RUNNING,
        description="In a fork: after an ancestor materializes, observe which DuckLake assets are deferred "
        "and which are materialized in the fork. Every tick is 'skipped' (it never requests a run) and "
        "says why: what it observed (counts per state), no ancestor materialized since <time>, or the "
        "workspace is not a fork.",
    )
    def fork_state_sensor(context: SensorEvaluationContext, ducklake: DuckLakeResource):
        return evaluate_fork_state(context, ducklake, asset_keys)

    return fork_state_sensor
