"""Reads and writes of the workspace tables (SQLAlchemy Core, one connection passed in).

The root workspace `prod` is always present: it is materialized as a row on first use, and its lake
settings are the configuration's, never rows of `workspace_lake`. What a reader could get wrong:
`ancestor_chain` returns the workspace itself first, then its parent, and so on, in ONE query (a
recursive CTE capped at `MAX_CHAIN_DEPTH`), so callers never walk the tree one round trip at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dpone_dagster.config import DponeConfig, LakeConfig
from dpone_dagster.control.workspace_tables import (
    workspace,
    workspace_admin,
    workspace_lake,
    workspace_tombstone,
)
from dpone_dagster.workspaces.ids import ROOT_WORKSPACE, is_throwaway_fork

MAX_CHAIN_DEPTH = 20
SYSTEM_OWNER = "system"


@dataclass(frozen=True)
class Workspace:
    id: str
    parent_id: str | None
    owner: str
    created_at: str

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


def _workspace(row) -> Workspace:
    return Workspace(row.id, row.parent_id, row.owner, row.created_at)


def ensure_root(conn: Connection, created_at: str) -> None:
    if conn.execute(sa.select(workspace.c.id).where(workspace.c.id == ROOT_WORKSPACE)).first() is None:
        conn.execute(
            workspace.insert().values(
                id=ROOT_WORKSPACE, parent_id=None, owner=SYSTEM_OWNER, created_at=created_at
            )
        )


def get_workspace(conn: Connection, workspace_id: str) -> Workspace | None:
    row = conn.execute(sa.select(workspace).where(workspace.c.id == workspace_id)).first()
    if row is None and workspace_id == ROOT_WORKSPACE:
        return Workspace(ROOT_WORKSPACE, None, SYSTEM_OWNER, "")
    return _workspace(row) if row is not None else None


def list_workspaces(conn: Connection) -> list[Workspace]:
    rows = [_workspace(r) for r in conn.execute(sa.select(workspace).order_by(workspace.c.id))]
    if not any(w.is_root for w in rows):
        rows.insert(0, Workspace(ROOT_WORKSPACE, None, SYSTEM_OWNER, ""))
    return rows


def ancestor_chain(conn: Connection, workspace_id: str) -> list[Workspace]:
    """[workspace, parent, grandparent, ...]; empty when the workspace does not exist."""
    chain = (
        sa.select(
            workspace.c.id,
            workspace.c.parent_id,
            workspace.c.owner,
            workspace.c.created_at,
            sa.literal(0).label("depth"),
        )
        .where(workspace.c.id == workspace_id)
        .cte("chain", recursive=True)
    )
    parent = workspace.alias("parent")
    chain = chain.union_all(
        sa.select(
            parent.c.id, parent.c.parent_id, parent.c.owner, parent.c.created_at, chain.c.depth + 1
        ).where(parent.c.id == chain.c.parent_id, chain.c.depth < MAX_CHAIN_DEPTH)
    )
    rows = [_workspace(r) for r in conn.execute(sa.select(chain).order_by(chain.c.depth))]
    if not rows and workspace_id == ROOT_WORKSPACE:
        return [Workspace(ROOT_WORKSPACE, None, SYSTEM_OWNER, "")]
    return rows


def children(conn: Connection, workspace_id: str) -> list[Workspace]:
    query = sa.select(workspace).where(workspace.c.parent_id == workspace_id).order_by(workspace.c.id)
    return [_workspace(r) for r in conn.execute(query)]


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
    configured = {l.name: l for l in config.all_lakes if lake is None or l.name == lake}
    for ws in workspace_ids:
        for name, settings in configured.items():
            stored[ws].setdefault(name, LakeSettings(settings))
    return stored


def insert_workspace(
    conn: Connection,
    ws: Workspace,
    lakes: Iterable[tuple[LakeConfig, bool]],
) -> None:
    conn.execute(
        workspace.insert().values(
            id=ws.id, parent_id=ws.parent_id, owner=ws.owner, created_at=ws.created_at
        )
    )
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
    """Delete the row and its settings, orphan its children, and leave a tombstone."""
    conn.execute(workspace.update().where(workspace.c.parent_id == ws.id).values(parent_id=None))
    conn.execute(workspace_lake.delete().where(workspace_lake.c.workspace_id == ws.id))
    conn.execute(workspace_admin.delete().where(workspace_admin.c.workspace_id == ws.id))
    conn.execute(workspace.delete().where(workspace.c.id == ws.id))
    conn.execute(workspace_tombstone.delete().where(workspace_tombstone.c.workspace_id == ws.id))
    conn.execute(
        workspace_tombstone.insert().values(
            workspace_id=ws.id, parent_id=ws.parent_id, deleted_at=deleted_at
        )
    )


def deleted_children(conn: Connection, workspace_id: str) -> list[str]:
    query = sa.select(workspace_tombstone.c.workspace_id).where(
        workspace_tombstone.c.parent_id == workspace_id
    )
    return sorted(r[0] for r in conn.execute(query))


def grant_admin(conn: Connection, workspace_id: str, actor: str) -> None:
    query = sa.select(workspace_admin.c.actor).where(
        workspace_admin.c.workspace_id == workspace_id, workspace_admin.c.actor == actor
    )
    if conn.execute(query).first() is None:
        conn.execute(workspace_admin.insert().values(workspace_id=workspace_id, actor=actor))
