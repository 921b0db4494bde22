"""Reads and writes of the workspace tables (SQLAlchemy Core, one connection passed in).

The root workspace `prod` is always present: it is materialized as a row on first use, and its lake
settings are the configuration's, never rows of `workspace_lake`. What a reader could get wrong:
`ancestor_chain` returns the workspace itself first, then its parent, and so on, in ONE query (a
recursive CTE capped at `MAX_CHAIN_DEPTH`), so callers never walk the tree one round trip at a time;
it and the other elementary reads live in `control/workspace_tables.py` (the lake services read
them too) and are re-exported here. Each creation of a fork id writes a fresh incarnation.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dpone_dagster.config import LakeConfig
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
from dpone_dagster.control.workspace_tables import (
    ACTIVE,
    DROPPED,
    DROPPING,
    MAX_CHAIN_DEPTH,
    ROOT,
    SYSTEM_OWNER,
    LakeSettings,
    Workspace,
    ancestor_chain,
    deleted_children,
    incarnation_state,
    lake_settings,
    set_incarnation,
    set_incarnation_state,
    workspace,
    workspace_admin,
    workspace_incarnation,
    workspace_lake,
    workspace_of,
    workspace_tombstone,
)

__all__ = [
    "ACTIVE",
    "DROPPED",
    "DROPPING",
    "MAX_CHAIN_DEPTH",
    "SYSTEM_OWNER",
    "LakeSettings",
    "Workspace",
    "ancestor_chain",
    "deleted_children",
    "incarnation_state",
    "lake_settings",
    "set_incarnation_state",
]


def new_incarnation() -> str:
    """A fresh incarnation id: 16 random hex digits (never reused, never derived from the id)."""
    return secrets.token_hex(8)


def ensure_root(conn: Connection, created_at: str) -> None:
    if conn.execute(sa.select(workspace.c.id).where(workspace.c.id == ROOT_WORKSPACE)).first() is None:
        conn.execute(
            workspace.insert().values(id=ROOT_WORKSPACE, parent_id=None, owner=SYSTEM_OWNER, created_at=created_at)
        )


def _with_incarnation():
    inc = workspace_incarnation
    return sa.select(workspace, inc.c.incarnation, inc.c.state).select_from(
        workspace.outerjoin(inc, inc.c.workspace_id == workspace.c.id)
    )


def get_workspace(conn: Connection, workspace_id: str) -> Workspace | None:
    row = conn.execute(_with_incarnation().where(workspace.c.id == workspace_id)).first()
    if row is None and workspace_id == ROOT_WORKSPACE:
        return ROOT
    return workspace_of(row) if row is not None else None


def list_workspaces(conn: Connection) -> list[Workspace]:
    rows = [workspace_of(r) for r in conn.execute(_with_incarnation().order_by(workspace.c.id))]
    if not any(w.is_root for w in rows):
        rows.insert(0, ROOT)
    return rows


def children(conn: Connection, workspace_id: str) -> list[Workspace]:
    query = _with_incarnation().where(workspace.c.parent_id == workspace_id).order_by(workspace.c.id)
    return [workspace_of(r) for r in conn.execute(query)]


def insert_workspace(
    conn: Connection,
    ws: Workspace,
    lakes: Iterable[tuple[LakeConfig, bool]],
) -> None:
    """Insert the row, its lake settings and its (new) incarnation, active."""
    conn.execute(workspace.insert().values(id=ws.id, parent_id=ws.parent_id, owner=ws.owner, created_at=ws.created_at))
    rows = [
        {
            "workspace_id": ws.id,
            "lake": settings.name,
            "settings": settings.model_dump_json(),
            "shared": shared,
        }
        for settings, shared in lakes
    ]
    if rows:
        conn.execute(workspace_lake.insert(), rows)
    conn.execute(workspace_tombstone.delete().where(workspace_tombstone.c.workspace_id == ws.id))
    if ws.incarnation:
        set_incarnation(conn, ws.id, ws.incarnation, ACTIVE, ws.created_at)


def set_shared(conn: Connection, workspace_id: str, settings: LakeConfig, shared: bool) -> None:
    key = (workspace_lake.c.workspace_id == workspace_id) & (workspace_lake.c.lake == settings.name)
    if conn.execute(sa.select(workspace_lake.c.lake).where(key)).first() is None:
        conn.execute(
            workspace_lake.insert().values(
                workspace_id=workspace_id,
                lake=settings.name,
                settings=settings.model_dump_json(),
                shared=shared,
            )
        )
    else:
        conn.execute(workspace_lake.update().where(key).values(shared=shared))


def delete_workspace(conn: Connection, ws: Workspace, deleted_at: str) -> None:
    """Delete the row and its settings, orphan its children, and leave a tombstone.

    The incarnation row stays (state `dropping`, set by the caller) so a process still holding
    the old incarnation is refused registration, and the next creation replaces it."""
    conn.execute(workspace.update().where(workspace.c.parent_id == ws.id).values(parent_id=None))
    conn.execute(workspace_lake.delete().where(workspace_lake.c.workspace_id == ws.id))
    conn.execute(workspace_admin.delete().where(workspace_admin.c.workspace_id == ws.id))
    conn.execute(workspace.delete().where(workspace.c.id == ws.id))
    conn.execute(workspace_tombstone.delete().where(workspace_tombstone.c.workspace_id == ws.id))
    conn.execute(workspace_tombstone.insert().values(workspace_id=ws.id, parent_id=ws.parent_id, deleted_at=deleted_at))


def grant_admin(conn: Connection, workspace_id: str, actor: str) -> None:
    query = sa.select(workspace_admin.c.actor).where(
        workspace_admin.c.workspace_id == workspace_id, workspace_admin.c.actor == actor
    )
    if conn.execute(query).first() is None:
        conn.execute(workspace_admin.insert().values(workspace_id=workspace_id, actor=actor))
