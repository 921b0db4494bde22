"""Retiring a fork's PostgreSQL roles when the fork is dropped: fence first, drop after.

`fence_roles` runs before any of the fork's schemas is dropped: its writer and reader become
NOLOGIN and their sessions are terminated, so a connection that outlives the drop can neither
commit nor reconnect. `drop_roles` then drops the fork schemas and every role provisioned for the
fork (see `lake/lifecycle/roles.py`); a role's control-store row goes only once PostgreSQL confirms, so a
retried drop finishes the job.

What a reader could get wrong: fencing cannot stop S3 uploads a statement already in flight makes
(DuckLake writes data files before it commits); those are covered by the cleanup's tombstones
(`lake/lifecycle/cleanup.py`), not here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from dpone_dagster.config import DponeConfig
from dpone_dagster.control.role_tables import lake_catalog_role as role_table
from dpone_dagster.control.store import open_store
from dpone_dagster.errors import ConfigError, LakeError
from dpone_dagster.lake.lifecycle.roles import GROUP, READER, WRITER, RoleProvisioningError, connect_admin, role_exists
from dpone_dagster.lake.resolution.attach import CatalogLocation
from dpone_dagster.lake.resolution.naming import is_fork_schema

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RoleLeftover:
    workspace_id: str
    lake: str
    role: str
    code: str


def fence_roles(workspace_ids: Sequence[str], config: DponeConfig) -> list[RoleLeftover]:
    """Before a drop touches a schema: make the forks' writer and reader roles NOLOGIN and end their
    sessions, so a connection outliving the drop can neither commit nor reconnect. Roles already
    gone are skipped; what cannot be fenced is returned (and the drop reports it for a retry)."""
    from psycopg import Error as PgError
    from psycopg import sql

    ids = [w for w in workspace_ids if w]
    with open_store(config.control_store).connect() as conn:
        rows = conn.execute(
            sa.select(role_table).where(role_table.c.workspace_id.in_(ids), role_table.c.kind.in_([WRITER, READER]))
        ).all()
    by_admin: dict[str, list] = {}
    for row in rows:
        by_admin.setdefault(row.admin, []).append(row)
    leftovers: list[RoleLeftover] = []
    for admin_json, members in by_admin.items():
        admin = json.loads(admin_json)
        try:
            with connect_admin(CatalogLocation("postgres", admin["target"], admin["password_env"])) as pg:
                names = [r.role_name for r in members]
                for (name,) in pg.execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)", (names,)).fetchall():
                    pg.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(sql.Identifier(name)))
                pg.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE usename = ANY(%s) AND pid <> pg_backend_pid()",
                    (names,),
                )
        except (LakeError, ConfigError, PgError) as exc:
            code = getattr(exc, "code", "lake.role_fence_failed")
            log.warning("fencing fork roles stopped: %s (%s)", code, type(exc).__name__)
            leftovers += [RoleLeftover(r.workspace_id, r.lake, r.role_name, code) for r in members]
    return leftovers


def drop_roles(workspace_ids: Sequence[str], config: DponeConfig) -> list[RoleLeftover]:
    """Drop the fork schemas and roles provisioned for `workspace_ids`; rows go once PostgreSQL
    confirms. Returns what is left for the next attempt."""
    from psycopg import Error as PgError
    from psycopg import sql

    ids = [w for w in workspace_ids if w]
    engine = open_store(config.control_store)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(role_table).where(role_table.c.workspace_id.in_(ids))).all()
    by_schema: dict[tuple[str, str, str], list] = {}
    for row in rows:
        by_schema.setdefault((row.admin, row.catalog, row.metadata_schema), []).append(row)
    leftovers: list[RoleLeftover] = []
    order = {WRITER: 0, READER: 1, GROUP: 2}
    for (admin_json, _, schema), members in by_schema.items():
        admin = json.loads(admin_json)
        try:
            if not is_fork_schema(schema):
                raise RoleProvisioningError("refusing to drop a schema that is not a fork namespace")
            with connect_admin(CatalogLocation("postgres", admin["target"], admin["password_env"])) as pg:
                pg.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
                for row in sorted(members, key=lambda r: order[r.kind]):
                    if role_exists(pg, "SELECT 1 FROM pg_roles WHERE rolname = %s", row.role_name):
                        pg.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(row.role_name)))
                        pg.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(row.role_name)))
                    with engine.begin() as conn:
                        conn.execute(role_table.delete().where(role_table.c.role_name == row.role_name))
        except (LakeError, ConfigError, PgError) as exc:
            code = getattr(exc, "code", "lake.role_drop_failed")
            log.warning("dropping fork roles of schema %s stopped: %s (%s)", schema, code, type(exc).__name__)
            leftovers += [RoleLeftover(r.workspace_id, r.lake, r.role_name, code) for r in members]
    return leftovers
