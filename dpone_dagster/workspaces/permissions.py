"""Who may drop a fork (or change its lakes), and who may grant admin.

An admin of a workspace is an actor granted admin on it, on any of its ancestors, or on the root:
admins of `prod` are admins everywhere, including forks orphaned by a dropped parent (whose chain no
longer reaches `prod`), so every workspace can always be dropped and granted on by someone. A fork
may be dropped by its owner or an admin; a standing dev workspace attached to a parent also needs an
admin of that parent, because dropping it takes a shared environment away from everyone working in
it. While `prod` has no admin at all, anyone may grant the first one (bootstrap).

What a reader could get wrong: this is accident prevention, not a security boundary — the control
store is local state that anyone with its credentials can edit.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
from dpone_dagster.control.workspace_tables import Workspace, ancestor_chain, workspace_admin
from dpone_dagster.errors import WorkspaceError


class PermissionDeniedError(WorkspaceError):
    code = "workspace.permission_denied"


def is_admin_of(conn: Connection, workspace_id: str, actor: str) -> bool:
    scope = {w.id for w in ancestor_chain(conn, workspace_id)} | {workspace_id, ROOT_WORKSPACE}
    query = sa.select(workspace_admin.c.actor).where(
        workspace_admin.c.workspace_id.in_(sorted(scope)), workspace_admin.c.actor == actor
    )
    return conn.execute(query).first() is not None


def require_may_drop(conn: Connection, ws: Workspace, actor: str) -> None:
    if not actor:
        raise PermissionDeniedError("an actor is required")
    if actor != ws.owner and not is_admin_of(conn, ws.id, actor):
        raise PermissionDeniedError(f"only the owner of {ws.id!r} or an admin may drop it or change its lakes")
    if not ws.is_throwaway and ws.parent_id is not None and not is_admin_of(conn, ws.parent_id, actor):
        raise PermissionDeniedError(
            f"{ws.id!r} is a standing dev workspace attached to {ws.parent_id!r}; "
            f"an admin of {ws.parent_id!r} must drop it"
        )


def require_may_grant(conn: Connection, workspace_id: str, actor: str) -> None:
    if is_admin_of(conn, workspace_id, actor):
        return
    no_root_admin = (
        conn.execute(sa.select(workspace_admin.c.actor).where(workspace_admin.c.workspace_id == ROOT_WORKSPACE)).first()
        is None
    )
    if workspace_id == ROOT_WORKSPACE and no_root_admin:
        return
    raise PermissionDeniedError(f"only an admin of {workspace_id!r} may grant admin on it")
