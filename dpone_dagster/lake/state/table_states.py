"""`lake_table_states`: the `fork_state` and snapshot id of every table of one workspace's lake, at once.

What the Dagster surface shows (tags at definitions load, the observation job, the fork sensor) is
computed here in one batched pass over the control store: the chain and its tracking (as fork
resolution reads them) plus one query for the chain's tracking rows with their snapshot ids and
update times. The catalog is never opened, so the cost does not grow with catalog round trips per
table, and a fork whose catalog is down still reports.

What a reader could get wrong: `snapshot_id` is the snapshot recorded by the last successful
managed materialize of the table that is actually read — the fork's own for `fork_materialized`,
the owning ancestor's for `deferred`. A deferred read is live, so the owner may have moved on
since; `ancestor_fingerprint` changes whenever any ancestor's tracking does, which is what the fork
sensor keys on. The states agree with `tracking.state_in_chain` table by table (tested), but are
computed for all tables in one pass instead of one chain walk per table.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa

from dpone_dagster.config import DponeConfig, load_config
from dpone_dagster.control.lake_tables import materialized_partition
from dpone_dagster.control.store import open_store
from dpone_dagster.lake.resolution.naming import fork_metadata_schema
from dpone_dagster.lake.resolution.owners import nearest_owners
from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.lake.state.tracking import ForkState, workspace_lake_view

ROOT_NAMESPACE = "(root)"


@dataclass(frozen=True)
class TrackingRow:
    """One `materialized_partition` row of a chain member."""

    workspace_id: str
    table: TableName
    partition: str
    status: str
    snapshot_id: int | None
    updated_at: str


@dataclass(frozen=True)
class TableState:
    table: TableName
    state: ForkState
    snapshot_id: int | None = None


@dataclass(frozen=True)
class LakeTableStates:
    """Every tracked table's state in `workspace_id`'s view of `lake`; untracked tables read as absent."""

    workspace_id: str
    lake: str
    chain: tuple[str, ...]
    fork_mode: bool
    tables: dict[TableName, TableState]
    ancestor_rows: tuple[TrackingRow, ...]
    incarnation: str = ""

    @property
    def namespace(self) -> str:
        return (
            fork_metadata_schema(self.workspace_id, self.lake, self.incarnation) if self.fork_mode else ROOT_NAMESPACE
        )

    def of(self, table: TableName) -> TableState:
        found = self.tables.get(table)
        if found is not None:
            return found
        return TableState(table, ForkState("absent" if self.fork_mode else "own"))

    def metadata(self, table: TableName) -> dict[str, object]:
        """The same keys a managed materialization carries: workspace, lake, table, namespace, state."""
        found = self.of(table)
        out: dict[str, object] = {
            "workspace": self.workspace_id,
            "lake": self.lake,
            "table": str(table),
            "namespace": self.namespace,
            **found.state.as_metadata(),
        }
        if found.snapshot_id is not None:
            out["snapshot_id"] = found.snapshot_id
        return out

    def counts(self, tables: Iterable[TableName]) -> dict[str, int]:
        out: dict[str, int] = {}
        for table in tables:
            state = self.of(table).state.state
            out[state] = out.get(state, 0) + 1
        return dict(sorted(out.items()))

    @property
    def ancestor_fingerprint(self) -> str:
        """SHA-256 over every ancestor tracking row: changes with any ancestor (re)materialize."""
        rows = sorted(
            (r.workspace_id, r.table.schema, r.table.table, r.partition, r.status, r.snapshot_id, r.updated_at)
            for r in self.ancestor_rows
        )
        return hashlib.sha256(json.dumps([self.lake, list(self.chain), rows]).encode()).hexdigest()

    @property
    def latest_ancestor_update(self) -> str | None:
        return max((r.updated_at for r in self.ancestor_rows), default=None)


def _chain_rows(config: DponeConfig, chain: list[str], lake: str) -> list[TrackingRow]:
    p = materialized_partition
    query = sa.select(
        p.c.workspace_id,
        p.c.schema_name,
        p.c.table_name,
        p.c.partition_key,
        p.c.status,
        p.c.snapshot_id,
        p.c.updated_at,
    ).where(p.c.workspace_id.in_(chain), p.c.lake == lake)
    with open_store(config.control_store).connect() as conn:
        return [
            TrackingRow(ws, TableName(schema, table), partition, status, None if snap is None else int(snap), updated)
            for ws, schema, table, partition, status, snap, updated in conn.execute(query)
        ]


def _latest_snapshots(rows: Iterable[TrackingRow]) -> dict[tuple[str, TableName], int]:
    out: dict[tuple[str, TableName], int] = {}
    for row in rows:
        if row.status == "materialized" and row.snapshot_id is not None:
            key = (row.workspace_id, row.table)
            out[key] = max(out.get(key, row.snapshot_id), row.snapshot_id)
    return out


def lake_table_states(workspace_id: str, lake: str = "main", config: DponeConfig | None = None) -> LakeTableStates:
    """States of every table tracked anywhere in `workspace_id`'s chain, for one lake."""
    config = config or load_config()
    view = workspace_lake_view(workspace_id, lake, config)
    chain = view.chain_ids
    rows = _chain_rows(config, chain, lake)
    snapshots = _latest_snapshots(rows)
    mine = view.tracking.of(workspace_id)
    owners = nearest_owners(chain, view.tracking)
    tables: dict[TableName, TableState] = {}
    for name in sorted({n for ws in chain for n in view.tracking.of(ws)}):
        if not view.fork_mode:
            state = ForkState("own")
            reader = next((ws for ws in chain if (ws, name) in snapshots), None)
        elif name in mine:
            state = ForkState("fork_materialized" if mine[name].materialized else "absent")
            reader = workspace_id
        elif name in owners:
            reader = chain[owners[name][0]]
            state = ForkState("missing" if owners[name][1].missing else "deferred", reader)
        else:
            state, reader = ForkState("absent"), None
        snapshot = None if reader is None or state.state in ("absent", "missing") else snapshots.get((reader, name))
        tables[name] = TableState(name, state, snapshot)
    ancestors = set(chain[1:])
    return LakeTableStates(
        workspace_id=workspace_id,
        lake=lake,
        chain=tuple(chain),
        fork_mode=view.fork_mode,
        tables=tables,
        ancestor_rows=tuple(r for r in rows if r.workspace_id in ancestors),
        incarnation=view.incarnation,
    )
