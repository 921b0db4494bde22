"""Recording one table a run built: its columns, snapshot and provenance, read on a session of the lake.

Both recorders call `record_built_table`: the Dagster dbt asset once dbt exited
(`integration/lake/resources.DuckLakeResource.record_materialization`) and a dbt run started from a
terminal, at the dbt process's exit (`lake/dbt_recording.py`). Tracking is what lets forks defer to
a table and what `dpone fork diff` / `promote` read as "the fork built it".

What a reader could get wrong:
- `conn` must have the workspace's resolution applied for `lake`, with the table among its targets
  (so the name is the workspace's own table, never a defer view), and `alias` is that lake's alias.
- the snapshot recorded is the lake's latest at recording time and `built_from` the ancestors'
  snapshots this *recording* session reads; dbt has exited by then and nothing else writes a fork's
  namespace in between (only its own runs do).
"""

from __future__ import annotations

from dataclasses import dataclass

from dpone_dagster.config import DponeConfig
from dpone_dagster.lake.guard.statement import quote_ident
from dpone_dagster.lake.resolution.pins import fork_session_snapshots
from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.lake.state.tracking import Status, record_materialization


@dataclass(frozen=True)
class BuiltTable:
    """What was recorded: the lake snapshot (None for a failed build) and, in a fork, the
    ancestor id -> snapshot the session read (None outside forks and for a failed build)."""

    snapshot_id: int | None
    built_from: dict[str, int] | None


def record_built_table(
    conn,
    *,
    workspace: str,
    lake: str,
    alias: str,
    table: TableName,
    status: Status,
    config: DponeConfig,
    partition: str | None = None,
    partition_by: str | None = None,
    physical: TableName | None = None,
) -> BuiltTable:
    """Track one build of `table` (`physical`: the table actually written when it differs, a fork's
    `<table>__fork` partition companion); columns and snapshot are read from `conn` on success."""
    written = physical or table
    columns: list[tuple[str, str]] = []
    snapshot_id = None
    built_from = None
    if status == "materialized":
        columns = [
            (name, data_type)
            for name, data_type in conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_catalog = ? AND table_schema = ? AND table_name = ? ORDER BY ordinal_position",
                [alias, written.schema, written.table],
            ).fetchall()
        ]
        snapshot_id = conn.execute(f"SELECT max(snapshot_id) FROM {quote_ident(alias)}.snapshots()").fetchone()[0]
        built_from = fork_session_snapshots(conn, workspace, lake, config)
    record_materialization(
        workspace,
        lake,
        table.schema,
        table.table,
        status=status,
        snapshot_id=snapshot_id,
        columns=columns,
        partition=partition,
        partition_by=partition_by,
        config=config,
        built_from=built_from,
    )
    return BuiltTable(None if snapshot_id is None else int(snapshot_id), built_from)
