"""Pinned or live defer, and the provenance ("built from") of fork-materialized tables.

A fork reads its ancestors *live* by default: each defer view reads whatever the owner has now. A
*pinned* fork (`dpone fork create --pin`, or `defer: pinned` on the lake in dpone.yaml) reads each
ancestor at the DuckLake snapshot it had when the fork was created: resolution attaches that
ancestor READ_ONLY with `SNAPSHOT_VERSION <pin>` (see `fork_plan.ancestor_options`), so the defer
views keep their SQL and steady-state runs make no fork snapshot. `repin` moves the pins to the
ancestors' current snapshots. Pins live in the control store (`fork_pin`), one row per (fork, lake,
ancestor); a fork-mode lake without rows is live.

Every managed materialize in a fork records, for that table, the snapshot of each ancestor it could
read (`fork_built_from`): the pin, or the ancestor's snapshot in the session that recorded it.
Staleness (`lake/state/staleness.py`) and promotion compare against `built_from`.

What a reader could get wrong: a pin does not keep data alive by itself. DuckLake's
`ducklake_expire_snapshots` on the ancestor would expire the pinned snapshot like any other, and
`cleanup_old_files` would then delete files the pinned fork reads; lake maintenance must stop at
`oldest_pinned_snapshot` (pins of forks being dropped or dropped do not count). A live fork's
`built_from` is read after the build, in the recording session: an owner commit that lands while
the build runs is attributed to the build (see docs/forks.md, "Lifecycle").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from dpone_dagster.config import DponeConfig, load_config
from dpone_dagster.control.lake_tables import fork_built_from
from dpone_dagster.control.store import open_store
from dpone_dagster.control.workspace_tables import ACTIVE, fork_pin, workspace, workspace_incarnation
from dpone_dagster.errors import LakeError
from dpone_dagster.lake.guard.statement import quote_ident
from dpone_dagster.lake.ports import Clock, utc_now
from dpone_dagster.lake.resolution.ancestors import AncestorReads, ancestor_reads
from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.lake.state.tracking import read_pins, workspace_lake_view

PINNED, LIVE = "pinned", "live"

StoreLike = Engine | Connection | DponeConfig | str


class PinUnavailableError(LakeError):
    code = "lake.pin_unavailable"


class NotAForkLakeError(LakeError):
    code = "lake.pin_not_a_fork"


def _engine(store: StoreLike) -> Engine | Connection:
    if isinstance(store, DponeConfig):
        return open_store(store.control_store)
    if isinstance(store, str):
        return open_store(store)
    return store


def _read(store: StoreLike, query):
    target = _engine(store)
    if isinstance(target, Connection):
        return list(target.execute(query))
    with target.connect() as conn:
        return list(conn.execute(query))


def oldest_pinned_snapshot(engine_or_store: StoreLike, owner_workspace_id: str, lake: str) -> int | None:
    """The oldest snapshot of `owner_workspace_id`'s `lake` that a live pinned fork reads, or None.

    Lake maintenance must not expire this snapshot or any newer one. Only pins of existing forks
    whose current incarnation is active count (a fork being dropped or dropped reads nothing);
    a fork from before incarnations (no incarnation row) counts while it exists."""
    inc = workspace_incarnation
    query = (
        sa.select(sa.func.min(fork_pin.c.snapshot_id))
        .select_from(
            fork_pin.join(workspace, workspace.c.id == fork_pin.c.workspace_id).outerjoin(
                inc, inc.c.workspace_id == fork_pin.c.workspace_id
            )
        )
        .where(
            fork_pin.c.owner_workspace_id == owner_workspace_id,
            fork_pin.c.lake == lake,
            sa.or_(inc.c.state.is_(None), inc.c.state == ACTIVE),
        )
    )
    rows = _read(engine_or_store, query)
    value = rows[0][0] if rows else None
    return None if value is None else int(value)


def pins(engine_or_store: StoreLike, workspace_id: str, lake: str) -> dict[str, int]:
    """Ancestor id -> pinned snapshot of one fork's lake; empty when it reads live."""
    target = _engine(engine_or_store)
    if isinstance(target, Connection):
        return read_pins(target, workspace_id, lake)
    with target.connect() as conn:
        return read_pins(conn, workspace_id, lake)


def built_from(engine_or_store: StoreLike, workspace_id: str, lake: str, table: str | TableName) -> dict[str, int]:
    """Per ancestor (owner workspace id): the snapshot of it that `table`'s latest build in fork
    `workspace_id` could read. Empty when the table was never built there (or outside fork mode)."""
    name = table if isinstance(table, TableName) else TableName.parse(table)
    b = fork_built_from
    query = sa.select(b.c.owner_workspace_id, b.c.snapshot_id).where(
        b.c.workspace_id == workspace_id,
        b.c.lake == lake,
        b.c.schema_name == name.schema,
        b.c.table_name == name.table,
    )
    return {owner: int(snapshot) for owner, snapshot in _read(engine_or_store, query)}


def all_built_from(engine_or_store: StoreLike, workspace_id: str, lake: str) -> dict[TableName, dict[str, int]]:
    """`built_from` of every table of one fork's lake, in one query."""
    b = fork_built_from
    query = sa.select(b.c.schema_name, b.c.table_name, b.c.owner_workspace_id, b.c.snapshot_id).where(
        b.c.workspace_id == workspace_id, b.c.lake == lake
    )
    out: dict[TableName, dict[str, int]] = {}
    for schema, table, owner, snapshot in _read(engine_or_store, query):
        out.setdefault(TableName(schema, table), {})[owner] = int(snapshot)
    return out


def fork_session_snapshots(conn, workspace_id: str, lake: str, config: DponeConfig) -> dict[str, int] | None:
    """What a materialize in this session could read of each ancestor (its `built_from`); None
    outside fork mode. `conn` has the fork's resolution applied."""
    reads = ancestor_reads(workspace_id, lake, config)
    if not reads.members:
        return None
    return session_snapshots(conn, reads.members)


def session_snapshots(conn, members: Mapping[str, str]) -> dict[str, int]:
    """Per chain member: the snapshot its serving alias reads in this session (a pinned attach
    answers its pin). Members whose alias is not attached here are left out."""
    attached = {row[0] for row in conn.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
    read: dict[str, int] = {}
    out: dict[str, int] = {}
    for member, alias in sorted(members.items()):
        if alias not in attached:
            continue
        if alias not in read:
            row = conn.execute(f"SELECT id FROM {quote_ident(alias)}.current_snapshot()").fetchone()
            read[alias] = int(row[0])
        out[member] = read[alias]
    return out


@dataclass(frozen=True)
class AncestorSnapshots:
    """Per chain member: its current snapshot (members whose catalog could not be read: `problems`)."""

    snapshots: dict[str, int]
    times: dict[str, list[tuple[int, object]]]
    problems: tuple[str, ...] = ()


def read_ancestors(workspace_id: str, lake: str, config: DponeConfig, *, pinned: bool = False) -> AncestorSnapshots:
    """Attach the fork's ancestors READ_ONLY in a fresh session (live by default) and read each one's
    current snapshot and its snapshot list `(id, time)`. Opens catalogs; registers nothing."""
    from dpone_dagster.lake.duck import connect

    reads: AncestorReads = ancestor_reads(workspace_id, lake, config, pinned=pinned)
    if not reads.attaches:
        return AncestorSnapshots({}, {}, reads.warnings)
    rendered = " ".join(s.render() for a in reads.attaches for s in a.statements)
    extensions = ["ducklake"]
    if "'ducklake:postgres:" in rendered:
        extensions.append("postgres_scanner")
    if "(TYPE s3" in rendered:
        extensions.append("httpfs")
    problems = list(reads.warnings)
    by_alias: dict[str, tuple[int, list]] = {}
    conn = connect(extensions=tuple(extensions))
    try:
        for attach in reads.attaches:
            try:
                for statement in attach.statements:
                    conn.execute(statement.render(redact=False))
                current = conn.execute(f"SELECT id FROM {quote_ident(attach.alias)}.current_snapshot()").fetchone()[0]
                times = conn.execute(
                    f"SELECT snapshot_id, snapshot_time FROM {quote_ident(attach.alias)}.snapshots() ORDER BY 1"
                ).fetchall()
            except Exception as exc:
                problems.append(
                    f"ancestor {attach.workspace_id!r} of lake {lake!r} could not be read ({type(exc).__name__})"
                )
                continue
            by_alias[attach.alias] = (int(current), [(int(i), t) for i, t in times])
    finally:
        conn.close()
    snapshots = {m: by_alias[a][0] for m, a in reads.members.items() if a in by_alias}
    times = {m: by_alias[a][1] for m, a in reads.members.items() if a in by_alias}
    return AncestorSnapshots(snapshots, times, tuple(problems))


def pin_lake(
    workspace_id: str, lake: str, config: DponeConfig | None = None, *, clock: Clock = utc_now
) -> dict[str, int]:
    """Pin (or re-pin) one fork lake at its ancestors' current snapshots; returns the new pins.

    Refused (`lake.pin_unavailable`, pins unchanged) when any ancestor cannot be read: a fork that
    asked for a pin never silently reads live."""
    config = config or load_config()
    view = workspace_lake_view(workspace_id, lake, config)
    if not view.fork_mode:
        raise NotAForkLakeError(f"lake {lake!r} of workspace {workspace_id!r} is not a fork lake; nothing to pin")
    found = read_ancestors(workspace_id, lake, config, pinned=False)
    wanted = [m for m in view.chain_ids[1:]]
    unread = [m for m in wanted if m not in found.snapshots]
    if unread or found.problems:
        detail = "; ".join(found.problems) or f"no snapshot read for {', '.join(unread)}"
        raise PinUnavailableError(
            f"lake {lake!r} of fork {workspace_id!r} cannot be pinned: {detail}; its pins are unchanged"
        )
    now = clock().isoformat()
    with open_store(config.control_store).begin() as conn:
        conn.execute(fork_pin.delete().where(fork_pin.c.workspace_id == workspace_id, fork_pin.c.lake == lake))
        for owner in wanted:
            conn.execute(
                fork_pin.insert().values(
                    workspace_id=workspace_id,
                    lake=lake,
                    owner_workspace_id=owner,
                    snapshot_id=found.snapshots[owner],
                    pinned_at=now,
                )
            )
    return {m: found.snapshots[m] for m in wanted}
