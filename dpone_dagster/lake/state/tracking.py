"""Tracking of managed materializations, and the per-table `fork_state` computed from it.

Every managed materialize records (workspace, lake, schema, table, partition, status, snapshot id,
captured column schema). Fork resolution reads these rows for the whole ancestor chain in one query
to decide which tables a fork defers, and to which ancestor (only the rows of the tables a job reads
when it names a read set, see `lake/resolution/reads.py`).

What a reader could get wrong: only tracked tables defer. A table an ancestor wrote with raw SQL
(no record) or whose every recorded partition last *failed* is not owned by that ancestor, so it
reads as absent in the fork; a defer view over a missing table would fail every unrelated job.
A fork's own row of any status stops deferral of that table (after the view→table transition the
view is gone, whatever the outcome of the run). A table its owner no longer has (dropped or renamed
out of band, found when a fork tried to create its view) is marked `missing` on the owner's rows:
descendants read it as `missing` (no view, a warning) until the owner materializes it again.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dpone_dagster.config import DponeConfig, load_config
from dpone_dagster.contracts.workspace_ids import check_workspace_id
from dpone_dagster.control.lake_tables import fork_built_from, materialized_asset_schema, materialized_partition
from dpone_dagster.control.store import open_store
from dpone_dagster.control.workspace_tables import (
    ACTIVE,
    DROPPING,
    LakeSettings,
    Workspace,
    ancestor_chain,
    fork_pin,
    incarnation_state,
    lake_settings,
)
from dpone_dagster.errors import LakeError, WorkspaceError
from dpone_dagster.lake.ports import Clock, utc_now
from dpone_dagster.lake.resolution.naming import fork_metadata_schema
from dpone_dagster.lake.resolution.owners import ChainTracking, TrackedTable, nearest_owners
from dpone_dagster.lake.resolution.partitions import (
    OwnPartitions,
    PartitionTrackingError,
    partition_column,
    partition_config,
)
from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.lake.state.registry import ForkDroppingError

Status = Literal["materialized", "failed"]
STATUSES: tuple[str, ...] = ("materialized", "failed")
MISSING = "missing"

ForkStateName = Literal["deferred", "fork_materialized", "absent", "missing", "own"]
Columns = Mapping[str, str] | Sequence[tuple[str, str]]


class TrackingError(LakeError):
    code = "lake.tracking_invalid"


class UnknownWorkspaceError(WorkspaceError):
    code = "workspace.unknown"


@dataclass(frozen=True)
class ForkState:
    """`state` of one table in one workspace; `owner` is the ancestor a deferred table reads."""

    state: ForkStateName
    owner: str | None = None

    def as_metadata(self) -> dict[str, str]:
        out = {"fork_state": self.state}
        if self.owner is not None:
            out["fork_owner"] = self.owner
        return out


def _normalize_columns(columns: Columns) -> list[list[str]]:
    pairs = columns.items() if isinstance(columns, Mapping) else columns
    out = []
    for pair in pairs:
        name, type_ = pair
        if not isinstance(name, str) or not isinstance(type_, str) or not name:
            raise TrackingError("columns are (name, type) pairs of non-empty strings")
        out.append([name, type_])
    return out


@lru_cache(maxsize=2)
def _tracking_query(filtered: bool) -> sa.Select:
    """The chain's tracking query, built once per process (bound parameters: ids, lake, and with
    `filtered` tables and schemas), so a resolution pays no statement construction."""
    p, s = materialized_partition, materialized_asset_schema
    same_table = sa.and_(
        s.c.workspace_id == p.c.workspace_id,
        s.c.lake == p.c.lake,
        s.c.schema_name == p.c.schema_name,
        s.c.table_name == p.c.table_name,
    )
    materialized = sa.func.max(sa.case((p.c.status == "materialized", 1), else_=0))
    missing = sa.func.max(sa.case((p.c.status == MISSING, 1), else_=0))
    query = (
        sa.select(p.c.workspace_id, p.c.schema_name, p.c.table_name, materialized, s.c.columns, missing)
        .select_from(p.outerjoin(s, same_table))
        .where(p.c.workspace_id.in_(sa.bindparam("ids", expanding=True)), p.c.lake == sa.bindparam("lake"))
        .group_by(p.c.workspace_id, p.c.schema_name, p.c.table_name, s.c.columns)
    )
    if filtered:
        query = query.where(
            p.c.table_name.in_(sa.bindparam("tables", expanding=True)),
            p.c.schema_name.in_(sa.bindparam("schemas", expanding=True)),
        )
    return query


MAX_FILTERED_TABLES = 2000
"""A `tables` filter longer than this reads the whole chain instead (one bound parameter per name)."""


def read_chain_tracking(
    conn: Connection, workspace_ids: Sequence[str], lake: str, tables: Collection[TableName] | None = None
) -> ChainTracking:
    """One query, whatever the number of tables, partitions or workspaces: a table is owned when
    any of its partitions last materialized; its captured schema rides along.

    `tables` (None: every table) restricts the rows to those names, filtered in SQL, so a job that
    names what it reads costs rows in proportion to that, not to what the chain owns; an empty
    collection reads nothing (no query)."""
    if tables is not None and not tables:
        return ChainTracking()
    wanted = None if tables is None or len(tables) > MAX_FILTERED_TABLES else frozenset(tables)
    params: dict[str, object] = {"ids": list(workspace_ids), "lake": lake}
    if wanted is not None:  # (schema, table) pairs: both columns filtered in SQL, the pair below
        params.update(tables=sorted({t.table for t in wanted}), schemas=sorted({t.schema for t in wanted}))
    query = _tracking_query(wanted is not None)
    result = ChainTracking()
    for ws, schema, table, owned, columns, gone in conn.execute(query, params):
        if wanted is not None and TableName(schema, table) not in wanted:
            continue
        entry = TrackedTable(bool(owned) and not gone, columns, bool(gone))
        result.tables.setdefault(ws, {})[TableName(schema, table)] = entry
    return result


def forget_workspace(conn: Connection, workspace_id: str) -> None:
    """Delete a workspace's tracking (with its pins and provenance), so a fork recreated under the
    same id starts empty and a dropped fork's pins no longer hold back maintenance."""
    for table in (materialized_partition, materialized_asset_schema, fork_pin, fork_built_from):
        conn.execute(table.delete().where(table.c.workspace_id == workspace_id))


def state_in_chain(chain_ids: Sequence[str], tracking: ChainTracking, name: TableName, *, fork_mode: bool) -> ForkState:
    if not fork_mode:
        return ForkState("own")
    mine = tracking.of(chain_ids[0]).get(name)
    if mine is not None:
        return ForkState("fork_materialized" if mine.materialized else "absent")
    owner = nearest_owners(chain_ids, tracking).get(name)
    if owner is None:
        return ForkState("absent")
    return ForkState("missing" if owner[1].missing else "deferred", chain_ids[owner[0]])


def mark_missing(config: DponeConfig, lake: str, owners: Sequence[tuple[str, TableName]]) -> None:
    """Record that each (owner workspace, table) is gone from the owner's lake: every partition row
    of it becomes `missing` until the owner's next managed materialize overwrites the status."""
    p = materialized_partition
    with open_store(config.control_store).begin() as conn:
        for workspace_id, name in owners:
            where = sa.and_(
                p.c.workspace_id == workspace_id,
                p.c.lake == lake,
                p.c.schema_name == name.schema,
                p.c.table_name == name.table,
                p.c.status == "materialized",
            )
            conn.execute(p.update().where(where).values(status=MISSING))


def record_materialization(
    workspace_id: str,
    lake: str,
    schema: str,
    table: str,
    *,
    status: Status,
    snapshot_id: int | None,
    columns: Columns,
    partition: str | None = None,
    partition_by: str | None = None,
    config: DponeConfig | None = None,
    clock: Clock = utc_now,
    built_from: Mapping[str, int] | None = None,
) -> None:
    """Upsert the latest status of one (partition of a) table; capture its columns on success.
    `built_from` (a fork's materialize: ancestor id -> the snapshot of it the build could read, see
    `lake/resolution/pins.py`) replaces the table's provenance in the same transaction.
    `partition_by` names the partition column (recorded with the partition: per-partition defer)."""
    check_workspace_id(workspace_id)
    if status not in STATUSES:
        raise TrackingError(f"status must be one of {', '.join(STATUSES)}")
    if not schema or not table:
        raise TrackingError("schema and table must be non-empty")
    cols = _normalize_columns(columns)
    config = config or load_config()
    now = clock().isoformat()
    key = {
        "workspace_id": workspace_id,
        "lake": lake,
        "schema_name": schema,
        "table_name": table,
    }
    p, s = materialized_partition, materialized_asset_schema
    with open_store(config.control_store).begin() as conn:
        where = sa.and_(*(p.c[k] == v for k, v in key.items()), p.c.partition_key == (partition or ""))
        values = {"status": status, "snapshot_id": snapshot_id, "updated_at": now}
        if partition:
            values["config"] = partition_config(partition_by)
        if conn.execute(p.update().where(where).values(**values)).rowcount == 0:
            conn.execute(p.insert().values(**key, partition_key=partition or "", **values))
        if status == "materialized" and cols:
            where = sa.and_(*(s.c[k] == v for k, v in key.items()))
            values = {"columns": json.dumps(cols), "snapshot_id": snapshot_id, "updated_at": now}
            if conn.execute(s.update().where(where).values(**values)).rowcount == 0:
                conn.execute(s.insert().values(**key, **values))
        if status == "materialized" and built_from is not None:
            b = fork_built_from
            conn.execute(b.delete().where(*(b.c[k] == v for k, v in key.items())))
            for owner, read in sorted(built_from.items()):
                conn.execute(b.insert().values(**key, owner_workspace_id=owner, snapshot_id=int(read), built_at=now))


@dataclass(frozen=True)
class WorkspaceLakeView:
    """One workspace's ancestor chain (with incarnations), each member's settings for one lake,
    and their tracking.

    `chain_ids`, `incarnation` and `forked` are worked out when the view is read, so the fork
    builder reads fields only and never calls back into this module (tests/lake/test_lake_path.py)."""

    chain: tuple[Workspace, ...]
    settings: dict[str, LakeSettings]
    tracking: ChainTracking
    pins: dict[str, int] = field(default_factory=dict)
    """Ancestor id -> the snapshot this workspace reads it at (`fork_pin`); empty: live defer."""
    partitions: dict[TableName, OwnPartitions] = field(default_factory=dict)
    """Tables this workspace materialized by partition (see `lake/resolution/partitions.py`)."""
    chain_ids: list[str] = field(init=False)
    incarnation: str = field(init=False)
    forked: tuple[bool, ...] = field(init=False)
    """Per chain member: does its copy of the lake live in a fork namespace (see `is_fork_at`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "chain_ids", [w.id for w in self.chain])
        object.__setattr__(self, "incarnation", self.chain[0].incarnation)
        last = len(self.chain) - 1
        forked = tuple(
            (index < last or member.is_throwaway) and not self.settings[member.id].shared
            for index, member in enumerate(self.chain)
        )
        object.__setattr__(self, "forked", forked)

    def is_fork_at(self, index: int) -> bool:
        """A member with ancestors, or a throwaway fork id (orphaned forks stay isolated), unless
        its lake is shared with its parent."""
        return self.forked[index]

    @property
    def fork_mode(self) -> bool:
        return self.forked[0]


def workspace_lake_view(
    workspace_id: str, lake: str, config: DponeConfig, tables: Collection[TableName] | None = None
) -> WorkspaceLakeView:
    """The chain, settings, tracking, pins and own partitions in one connection (five queries,
    whatever the depth).

    `tables` (None: every table) limits `tracking` to those names plus the tables this workspace
    built by partition (their union views always need their owners): a fork job's read set makes
    the rows read grow with what the job reads, never with what the chain owns. Code that asks
    about tables outside `tables` must not use such a view (it would read them as absent).
    A workspace whose incarnation is being dropped is refused (`workspace.dropping`)."""
    check_workspace_id(workspace_id)
    config.lake(lake)
    with open_store(config.control_store).connect() as conn:
        chain = ancestor_chain(conn, workspace_id)
        if not chain:
            state = incarnation_state(conn, workspace_id)
            if state is not None and state[1] == DROPPING:
                raise ForkDroppingError(f"workspace {workspace_id!r} is being dropped")
            raise UnknownWorkspaceError(f"workspace {workspace_id!r} does not exist")
        if chain[0].state != ACTIVE:
            raise ForkDroppingError(f"workspace {workspace_id!r} is being dropped; it takes no new runs")
        ids = [w.id for w in chain]
        settings = lake_settings(conn, ids, config, lake)
        partitions = read_partitions(conn, workspace_id, lake)
        wanted = None if tables is None else {*tables, *partitions}
        tracking = read_chain_tracking(conn, ids, lake, wanted)
        pins = read_pins(conn, workspace_id, lake)
    return WorkspaceLakeView(tuple(chain), {ws: settings[ws][lake] for ws in ids}, tracking, pins, partitions)


def read_partitions(conn: Connection, workspace_id: str, lake: str) -> dict[TableName, OwnPartitions]:
    """One query: every table `workspace_id` materialized by partition (with a declared column), and
    the keys whose latest status is `materialized`. A table whose partition rows name two different
    columns is refused (`lake.partition_tracking_invalid`) rather than guessed."""
    p = materialized_partition
    query = sa.select(p.c.schema_name, p.c.table_name, p.c.partition_key, p.c.status, p.c.config).where(
        p.c.workspace_id == workspace_id, p.c.lake == lake, p.c.partition_key != ""
    )
    columns: dict[TableName, set[str]] = {}
    keys: dict[TableName, set[str]] = {}
    for schema, table, key, status, config in conn.execute(query):
        column = partition_column(config)
        if column is None:
            continue
        name = TableName(schema, table)
        columns.setdefault(name, set()).add(column)
        keys.setdefault(name, set())
        if status == "materialized":
            keys[name].add(key)
    out: dict[TableName, OwnPartitions] = {}
    for name, names in sorted(columns.items()):
        if len(names) != 1:
            raise PartitionTrackingError(
                f"the partitions of {name} in workspace {workspace_id!r} name different partition "
                f"columns ({', '.join(sorted(names))}); rebuild the table with one column"
            )
        out[name] = OwnPartitions(next(iter(names)), frozenset(keys[name]))
    return out


def read_pins(conn: Connection, workspace_id: str, lake: str) -> dict[str, int]:
    """The `fork_pin` rows of one workspace's lake: ancestor id -> pinned snapshot."""
    query = sa.select(fork_pin.c.owner_workspace_id, fork_pin.c.snapshot_id).where(
        fork_pin.c.workspace_id == workspace_id, fork_pin.c.lake == lake
    )
    return {owner: int(snapshot) for owner, snapshot in conn.execute(query)}


def fork_namespace(workspace_id: str, lake: str, config: DponeConfig | None = None) -> str:
    """The metadata schema / catalog-file stem of `lake` in fork `workspace_id`'s current
    incarnation, or `(root)` where the lake is not forked (root, shared)."""
    view = workspace_lake_view(workspace_id, lake, config or load_config())
    return fork_metadata_schema(workspace_id, lake, view.incarnation) if view.fork_mode else "(root)"


def fork_state(workspace_id: str, lake: str, schema: str, table: str, config: DponeConfig | None = None) -> ForkState:
    """`own` outside forks; in a fork `fork_materialized`, `deferred` (with owner) or `absent`."""
    config = config or load_config()
    view = workspace_lake_view(workspace_id, lake, config)
    return state_in_chain(view.chain_ids, view.tracking, TableName(schema, table), fork_mode=view.fork_mode)
