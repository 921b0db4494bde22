"""Control-store tables of workspaces: the fork tree, per-lake settings, admins, tombstones.

`workspace.parent_id` has no foreign key on purpose: deleting a parent sets its throwaway forks'
`parent_id` to NULL in the service (they stay isolated as orphaned forks), and SQLite would not
enforce `ON DELETE SET NULL` without a per-connection pragma. `workspace_lake` holds each fork's
settings cloned at creation, with `shared` as the fork-behaviour stamp. A `workspace_tombstone`
remembers a deleted workspace's parent so dropping that parent can still clean the deleted child's
leftover ledger rows. `workspace_incarnation` holds the incarnation of each fork id created since
incarnations exist (a fresh random id per creation) and its lifecycle state (`active`, then
`dropping` from the moment a drop starts); it is its own table so that `create_all` adds it to an
existing store (no column migration). The elementary reads every service needs (the ancestor chain,
per-lake settings, deleted children) live here too, below both `lake/` and `workspaces/`.

What a reader could get wrong: the root workspace `prod` takes its lake settings from the
configuration, never from `workspace_lake`; a fork without an incarnation row (created before
incarnations) has the legacy incarnation `""`, whose physical names are the pre-incarnation ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dpone_dagster.config import DponeConfig, LakeConfig
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE, is_throwaway_fork
from dpone_dagster.control.store import METADATA

WORKSPACE_ID = sa.String(200)

workspace = sa.Table(
    "workspace",
    METADATA,
    sa.Column("id", WORKSPACE_ID, primary_key=True),
    sa.Column("parent_id", WORKSPACE_ID, nullable=True, index=True),
    sa.Column("owner", sa.String(200), nullable=False),
    sa.Column("created_at", sa.String(32), nullable=False),
)

workspace_lake = sa.Table(
    "workspace_lake",
    METADATA,
    sa.Column("workspace_id", WORKSPACE_ID, primary_key=True),
    sa.Column("lake", sa.String(63), primary_key=True),
    sa.Column("settings", sa.Text, nullable=False),
    sa.Column("shared", sa.Boolean, nullable=False, default=False),
)

workspace_admin = sa.Table(
    "workspace_admin",
    METADATA,
    sa.Column("workspace_id", WORKSPACE_ID, primary_key=True),
    sa.Column("actor", sa.String(200), primary_key=True),
)

workspace_tombstone = sa.Table(
    "workspace_tombstone",
    METADATA,
    sa.Column("workspace_id", WORKSPACE_ID, primary_key=True),
    sa.Column("parent_id", WORKSPACE_ID, nullable=True, index=True),
    sa.Column("deleted_at", sa.String(32), nullable=False),
)

workspace_incarnation = sa.Table(
    "workspace_incarnation",
    METADATA,
    sa.Column("workspace_id", WORKSPACE_ID, primary_key=True),
    sa.Column("incarnation", sa.String(32), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("updated_at", sa.String(32), nullable=False),
)

fork_pin = sa.Table(
    "fork_pin",
    METADATA,
    sa.Column("workspace_id", WORKSPACE_ID, primary_key=True),
    sa.Column("lake", sa.String(63), primary_key=True),
    sa.Column("owner_workspace_id", WORKSPACE_ID, primary_key=True),
    sa.Column("snapshot_id", sa.BigInteger, nullable=False),
    sa.Column("pinned_at", sa.String(32), nullable=False),
)
"""A pinned fork reads ancestor `owner_workspace_id`'s lake at `snapshot_id` (see `lake/resolution/pins.py`);
a fork-mode lake without rows reads its ancestors live. Rows go with the workspace (drop, re-create)."""

workspace_usage = sa.Table(
    "workspace_usage",
    METADATA,
    sa.Column("workspace_id", WORKSPACE_ID, primary_key=True),
    sa.Column("last_used_at", sa.String(32), nullable=False),
    sa.Column("ttl_seconds", sa.Integer, nullable=True),
)
"""When a fork was last used (resolved, run, or its status read; written at most once a minute, see
`touch_last_used`) and its own idle TTL (NULL: the configured default). Read by the TTL janitor
(`workspaces/janitor.py`); its own table so `create_all` adds it to an existing store."""

ACTIVE, DROPPING, DROPPED = "active", "dropping", "dropped"
LEGACY_INCARNATION = ""
MAX_CHAIN_DEPTH = 20
SYSTEM_OWNER = "system"


@dataclass(frozen=True)
class Workspace:
    id: str
    parent_id: str | None
    owner: str
    created_at: str
    incarnation: str = LEGACY_INCARNATION
    state: str = ACTIVE

    @property
    def is_root(self) -> bool:
        return self.id == ROOT_WORKSPACE

    @property
    def is_throwaway(self) -> bool:
        return is_throwaway_fork(self.id)


@dataclass(frozen=True)
class LakeSettings:
    """A workspace's view of one lake: its settings and whether it shares its parent's lake."""

    settings: LakeConfig
    shared: bool = False


ROOT = Workspace(ROOT_WORKSPACE, None, SYSTEM_OWNER, "")


def workspace_of(row) -> Workspace:
    incarnation = getattr(row, "incarnation", None) or LEGACY_INCARNATION
    return Workspace(
        row.id, row.parent_id, row.owner, row.created_at, incarnation, getattr(row, "state", None) or ACTIVE
    )


def ancestor_chain(conn: Connection, workspace_id: str) -> list[Workspace]:
    """[workspace, parent, grandparent, ...] with incarnations; empty when it does not exist."""
    rows = [workspace_of(r) for r in conn.execute(_chain_query(), {"workspace_id": workspace_id})]
    if not rows and workspace_id == ROOT_WORKSPACE:
        return [ROOT]
    return rows


@lru_cache(maxsize=1)
def _chain_query() -> sa.Select:
    """Built once per process (every fork resolution runs it; building it cost more than running it)."""
    chain = (
        sa.select(
            workspace.c.id,
            workspace.c.parent_id,
            workspace.c.owner,
            workspace.c.created_at,
            sa.literal(0).label("depth"),
        )
        .where(workspace.c.id == sa.bindparam("workspace_id"))
        .cte("chain", recursive=True)
    )
    parent = workspace.alias("parent")
    chain = chain.union_all(
        sa.select(parent.c.id, parent.c.parent_id, parent.c.owner, parent.c.created_at, chain.c.depth + 1).where(
            parent.c.id == chain.c.parent_id, chain.c.depth < MAX_CHAIN_DEPTH
        )
    )
    inc = workspace_incarnation
    return (
        sa.select(chain, inc.c.incarnation, inc.c.state)
        .select_from(chain.outerjoin(inc, inc.c.workspace_id == chain.c.id))
        .order_by(chain.c.depth)
    )


def lake_settings(
    conn: Connection, workspace_ids: Sequence[str], config: DponeConfig, lake: str | None = None
) -> dict[str, dict[str, LakeSettings]]:
    """Per workspace, per lake name: its settings. `prod` (and any lake a fork lacks) come from config."""
    query = sa.select(workspace_lake).where(workspace_lake.c.workspace_id.in_(list(workspace_ids)))
    if lake is not None:
        query = query.where(workspace_lake.c.lake == lake)
    stored: dict[str, dict[str, LakeSettings]] = {ws: {} for ws in workspace_ids}
    for row in conn.execute(query):
        if row.workspace_id == ROOT_WORKSPACE:
            continue
        stored[row.workspace_id][row.lake] = LakeSettings(
            LakeConfig.model_validate_json(row.settings), bool(row.shared)
        )
    configured = {candidate.name: candidate for candidate in config.all_lakes if lake is None or candidate.name == lake}
    for ws in workspace_ids:
        for name, settings in configured.items():
            stored[ws].setdefault(name, LakeSettings(settings))
    return stored


def deleted_children(conn: Connection, workspace_id: str) -> list[str]:
    query = sa.select(workspace_tombstone.c.workspace_id).where(workspace_tombstone.c.parent_id == workspace_id)
    return sorted(r[0] for r in conn.execute(query))


def incarnation_state(conn: Connection, workspace_id: str) -> tuple[str, str] | None:
    """(incarnation, state) of a fork id, or None when it never had an incarnation row."""
    inc = workspace_incarnation
    row = conn.execute(sa.select(inc.c.incarnation, inc.c.state).where(inc.c.workspace_id == workspace_id)).first()
    return None if row is None else (row.incarnation, row.state)


def set_incarnation(conn: Connection, workspace_id: str, incarnation: str, state: str, now: str) -> None:
    inc = workspace_incarnation
    where = inc.c.workspace_id == workspace_id
    values = {"incarnation": incarnation, "state": state, "updated_at": now}
    if conn.execute(inc.update().where(where).values(**values)).rowcount == 0:
        conn.execute(inc.insert().values(workspace_id=workspace_id, **values))


def set_incarnation_state(conn: Connection, workspace_id: str, incarnation: str, state: str, now: str) -> int:
    """Move one incarnation to `state`; 0 when that incarnation is not the id's current one."""
    inc = workspace_incarnation
    where = sa.and_(inc.c.workspace_id == workspace_id, inc.c.incarnation == incarnation)
    return conn.execute(inc.update().where(where).values(state=state, updated_at=now)).rowcount


def is_current_incarnation(conn: Connection, workspace_id: str, incarnation: str) -> bool:
    """True while `incarnation` is the id's current, active one (a read: the attach-time check)."""
    if incarnation == LEGACY_INCARNATION:
        return conn.execute(sa.select(workspace.c.id).where(workspace.c.id == workspace_id)).first() is not None
    return incarnation_state(conn, workspace_id) == (incarnation, ACTIVE)


def touch_active_incarnation(conn: Connection, workspace_id: str, incarnation: str, now: str) -> bool:
    """The registration fence: True only while `incarnation` is the id's current, active one.

    An UPDATE (not a SELECT) so the row is locked until the caller's transaction ends: a drop that
    moves the incarnation to `dropping` waits for it, and its cleanup then sees the ledger row.
    A legacy incarnation (no row) stays unfenced as before, but only while the workspace exists.
    """
    inc = workspace_incarnation
    if incarnation == LEGACY_INCARNATION:
        exists = conn.execute(sa.select(workspace.c.id).where(workspace.c.id == workspace_id)).first()
        return exists is not None
    where = sa.and_(inc.c.workspace_id == workspace_id, inc.c.incarnation == incarnation, inc.c.state == ACTIVE)
    return conn.execute(inc.update().where(where).values(updated_at=now)).rowcount == 1


TOUCH_INTERVAL_SECONDS = 60
"""A workspace's `last_used_at` is written at most once per this many seconds (per process, and in
the store: a touch only updates a row older than that)."""


def set_usage(conn: Connection, workspace_id: str, now: str, ttl_seconds: int | None) -> None:
    """(Re)start a fork's idle clock at `now` with its own TTL (None: the configured default)."""
    conn.execute(workspace_usage.delete().where(workspace_usage.c.workspace_id == workspace_id))
    conn.execute(workspace_usage.insert().values(workspace_id=workspace_id, last_used_at=now, ttl_seconds=ttl_seconds))


def touch_usage(conn: Connection, workspace_id: str, now: str, stale_before: str) -> str | None:
    """Move `last_used_at` to `now` when it is older than `stale_before` (ISO strings compare in
    order: both are UTC `isoformat()`); a fork without a row gets one while it exists. Returns the
    row's `last_used_at` afterwards (`now` when written), None when the workspace does not exist."""
    usage = workspace_usage
    where = sa.and_(usage.c.workspace_id == workspace_id, usage.c.last_used_at < stale_before)
    if conn.execute(usage.update().where(where).values(last_used_at=now)).rowcount:
        return now
    row = conn.execute(sa.select(usage.c.last_used_at).where(usage.c.workspace_id == workspace_id)).first()
    if row is not None:
        return row.last_used_at
    if conn.execute(sa.select(workspace.c.id).where(workspace.c.id == workspace_id)).first() is None:
        return None
    conn.execute(usage.insert().values(workspace_id=workspace_id, last_used_at=now, ttl_seconds=None))
    return now
    if conn.execute(sa.select(usage.c.workspace_id).where(usage.c.workspace_id == workspace_id)).first():
        return False
    if conn.execute(sa.select(workspace.c.id).where(workspace.c.id == workspace_id)).first() is None:
        return False
    conn.execute(usage.insert().values(workspace_id=workspace_id, last_used_at=now, ttl_seconds=None))
    return True
