"""PostgreSQL roles that make a fork *unable* to write its ancestors' DuckLake catalogs.

Per fork and PostgreSQL lake, dpone provisions (with the lake's admin credential, never the fork's):
- a **writer** role (LOGIN) that owns the fork's metadata schema and nothing else: the fork's own
  target attach connects as it;
- a **reader** role (LOGIN) that is a member of one NOLOGIN **read group** per metadata schema of the
  chain (the ancestors' and the fork's own); each group has USAGE on its schema, SELECT on its
  tables, and default privileges so tables DuckLake creates later (inlined data) stay readable.
  Every ancestor attach connects as the reader, so a DuckLake maintenance call, a `CHECKPOINT` or
  a raw INSERT into an ancestor's metadata tables is refused by PostgreSQL itself.
Passwords are generated, stored *sealed* in the control-store table `lake_catalog_role` (under a
key the store does not hold: `control/role_passwords.py`) and unsealed at the moment an attach
statement is rendered (`StoredRolePassword`), into a DuckDB secret rather than the ATTACH text.
Dropping a fork fences, then drops, its roles (`lake/lifecycle/role_retirement.py`).

What a reader could get wrong: `RoleCatalogLocation.target` names the *reader* for every member of a
fork's chain (so the chain still shares one `database_key` and one inspection connection, made as
the reader), while `uri_parts()` — the ATTACH — names `attach_role`, which is the writer only for
the fork's own namespace. Provisioning needs the lake owner's privileges (see docs/forks.md,
"Read-only ancestors on PostgreSQL and S3"); the fork's process needs only the stored passwords.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

import sqlalchemy as sa

from dpone_dagster.config import DponeConfig, LakeConfig, resolve_secret
from dpone_dagster.control.role_passwords import is_sealed, role_key, seal, store_sealed, stored_passwords, unseal
from dpone_dagster.control.role_tables import lake_catalog_role as role_table
from dpone_dagster.control.store import open_store
from dpone_dagster.errors import ConfigError, LakeError
from dpone_dagster.lake.guard.statement import REDACTED, CredentialResolver, Secret, sql_string
from dpone_dagster.lake.ports import Namespace
from dpone_dagster.lake.resolution.attach import CatalogLocation
from dpone_dagster.lake.resolution.naming import is_fork_schema


class PhysicalLake(Protocol):
    """What roles need of `fork_plan.PhysicalLake` (a frozen dataclass; fork_plan imports this
    module, so the type is described here rather than imported)."""

    workspace_id: str
    settings: LakeConfig
    namespace: Namespace


log = logging.getLogger(__name__)

POSTGRES_DEFAULT_SCHEMA = "public"
WRITER, READER, GROUP = "writer", "reader", "group"
_LETTER = {WRITER: "w", READER: "r", GROUP: "g"}


class ForkRolesMissingError(LakeError):
    code = "lake.fork_roles_missing"


class RoleProvisioningError(LakeError):
    code = "lake.role_provisioning_failed"


def role_name(kind: str, catalog_identity: str, schema: str) -> str:
    """`dpone_<w|r|g>_<16 hex>`: stable per (catalog database, metadata schema), < 63 chars."""
    digest = hashlib.sha256(f"{catalog_identity}\0{schema}".encode()).hexdigest()[:16]
    return f"dpone_{_LETTER[kind]}_{digest}"


@dataclass(frozen=True)
class StoredRolePassword(Secret):
    """A fork role's password as a SQL string (inside the DuckDB secret of the attach), read from
    the control store and decrypted when rendered. `env_name` holds the role name (there is no
    environment variable behind it)."""

    store_url: str = ""

    def render(self, *, redact: bool, credentials: CredentialResolver) -> str:
        return sql_string(REDACTED if redact else read_password(self.store_url, self.env_name))


@dataclass(frozen=True)
class RoleCatalogLocation(CatalogLocation):
    """A PostgreSQL catalog reached as a dpone role. No owner credential reference (`password_env`
    is always None); `target` names the chain's reader, the ATTACH names `attach_role`."""

    base_target: str = ""
    attach_role: str = ""
    store_url: str = ""

    reader: str = ""

    def uri_parts(self) -> tuple[str | Secret, ...]:
        return (sql_string(f"ducklake:postgres:{self.base_target} user={self.attach_role}"),)

    def password_part(self) -> Secret | None:
        return StoredRolePassword(self.attach_role, False, self.store_url)

    def connect_password(self, credentials: CredentialResolver) -> str | None:
        """The reader's stored password, for a direct connection to `target` (catalog inspection)."""
        return read_password(self.store_url, self.reader)


def read_password(store_url: str, role: str) -> str:
    """The role's password, unsealed (a row from before sealing is sealed in place on the way)."""
    with open_store(store_url).connect() as conn:
        value = conn.execute(sa.select(role_table.c.password).where(role_table.c.role_name == role)).scalar()
    if not value:
        raise ForkRolesMissingError("a fork catalog role has no stored password; re-provision the fork")
    key = role_key(create=not is_sealed(value))
    if not is_sealed(value):
        store_sealed(store_url, {role: value}, key, only_if=value)
    return unseal(value, key)


def admin_location(settings: LakeConfig, base: CatalogLocation) -> CatalogLocation:
    """Where provisioning connects: the lake's catalog as `catalog_admin_user` (default: the
    catalog's own user) with `catalog_admin_password_env` (default: `catalog_password_env`)."""
    target = base.target + (f" user={settings.catalog_admin_user}" if settings.catalog_admin_user else "")
    return CatalogLocation("postgres", target, settings.catalog_admin_password_env or base.password_env)


def connect_admin(location: CatalogLocation):
    """A direct connection to a lake catalog with its admin credential (autocommit)."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    extra: dict[str, object] = {"connect_timeout": 5}
    if location.password_env:
        extra["password"] = resolve_secret(location.password_env)
    try:
        return psycopg.connect(make_conninfo(location.target, **extra), autocommit=True)
    except psycopg.Error:
        raise RoleProvisioningError("the lake's PostgreSQL catalog cannot be reached as its admin role") from None


def role_exists(conn, query: str, *args) -> bool:
    return conn.execute(query, args).fetchone() is not None


def _ensure_role(conn, name: str, password: str | None) -> None:
    from psycopg import sql

    login = sql.SQL("LOGIN PASSWORD {}").format(sql.Literal(password)) if password else sql.SQL("NOLOGIN")
    verb = "ALTER" if role_exists(conn, "SELECT 1 FROM pg_roles WHERE rolname = %s", name) else "CREATE"
    conn.execute(sql.SQL(verb + " ROLE {} {}").format(sql.Identifier(name), login))
    # the admin must be a member to drop what the role owns and to set its default privileges
    conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(name)))


def _grant_read(conn, schema: str, group: str) -> None:
    """`group` may read DuckLake's tables of `schema` now, and every table its current owners create
    there later (DuckLake adds inlined-data tables; default privileges cannot filter by name, so
    keep other tables of those owners out of a lake's metadata schema)."""
    from psycopg import sql

    ident, grp = sql.Identifier(schema), sql.Identifier(group)
    conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident, grp))
    # DuckLake's tables only: a schema may hold other tables (a control store sharing it, say)
    for (table,) in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename LIKE 'ducklake%%'", (schema,)
    ).fetchall():
        conn.execute(sql.SQL("GRANT SELECT ON {}.{} TO {}").format(ident, sql.Identifier(table), grp))
    owners = {
        row[0]
        for row in conn.execute(
            "SELECT tableowner FROM pg_tables WHERE schemaname = %s UNION "
            "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = %s",
            (schema, schema),
        )
    } - {"pg_database_owner"}
    for owner in sorted(owners):
        conn.execute(
            sql.SQL("ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA {} GRANT SELECT ON TABLES TO {}").format(
                sql.Identifier(owner), ident, grp
            )
        )


def _own_schema(conn, schema: str, writer: str) -> None:
    from psycopg import sql

    if not role_exists(conn, "SELECT 1 FROM pg_namespace WHERE nspname = %s", schema):
        conn.execute(
            sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(sql.Identifier(schema), sql.Identifier(writer))
        )
        return
    conn.execute(sql.SQL("ALTER SCHEMA {} OWNER TO {}").format(sql.Identifier(schema), sql.Identifier(writer)))
    for (table,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall():
        conn.execute(
            sql.SQL("ALTER TABLE {}.{} OWNER TO {}").format(
                sql.Identifier(schema), sql.Identifier(table), sql.Identifier(writer)
            )
        )


@dataclass(frozen=True)
class ForkRoles:
    writer: str
    reader: str
    group: str
    identity: str


def fork_roles(base: CatalogLocation, schema: str) -> ForkRoles:
    identity = base.identity
    return ForkRoles(*(role_name(kind, identity, schema) for kind in (WRITER, READER, GROUP)), identity)


def _mark_ready(store_url: str, roles: Sequence[str]) -> None:
    with open_store(store_url).begin() as conn:
        conn.execute(role_table.update().where(role_table.c.role_name.in_(list(roles))).values(ready=True))


def _record(store_url: str, rows: list[dict]) -> None:
    """Write ledger rows *before* creating the roles, so a crash leaves something to drop."""
    engine = open_store(store_url)
    with engine.begin() as conn:
        known = {
            r[0]
            for r in conn.execute(
                sa.select(role_table.c.role_name).where(role_table.c.role_name.in_([r["role_name"] for r in rows]))
            )
        }
        for row in rows:
            if row["role_name"] not in known:
                conn.execute(role_table.insert().values(**row))


def _new_password() -> str:
    return secrets.token_urlsafe(24)


def provision(me: PhysicalLake, ancestors: Sequence[PhysicalLake], config: DponeConfig) -> ForkRoles:
    """Create (or repair) the fork's writer, reader and read groups; idempotent."""
    base = me.namespace.catalog
    schema = me.namespace.schema or ""
    if base.kind != "postgres" or not is_fork_schema(schema):
        raise RoleProvisioningError("fork roles exist only for a fork namespace in a PostgreSQL catalog")
    roles = fork_roles(base, schema)
    admin = admin_location(me.settings, base)
    store = config.control_store
    now = datetime.now(UTC).isoformat()
    admin_json = json.dumps({"target": admin.target, "password_env": admin.password_env}, sort_keys=True)
    key = role_key(config.state_path, create=True)
    known = stored_passwords(store, [roles.writer, roles.reader])
    fresh = {role: _new_password() for role in (roles.writer, roles.reader) if not known.get(role)}
    common = dict(
        catalog=roles.identity,
        workspace_id=me.workspace_id,
        lake=me.settings.name,
        metadata_schema=schema,
        admin=admin_json,
        created_at=now,
    )
    _record(
        store,
        [
            dict(common, role_name=role, kind=kind, password=seal(fresh.get(role) or known[role], key))
            for role, kind in ((roles.writer, WRITER), (roles.reader, READER))
        ]
        + [dict(common, role_name=roles.group, kind=GROUP, password=None)],
    )
    # a row whose password this key cannot open gets the new one (ALTER ROLE below sets it)
    store_sealed(store, {role: fresh[role] for role in fresh if role in known}, key)
    passwords = stored_passwords(store, [roles.writer, roles.reader])
    try:
        conn = connect_admin(admin)
    except ConfigError:
        raise ForkRolesMissingError(
            f"the fork's catalog roles of lake {me.settings.name!r} are not provisioned and the lake's admin "
            "credential is not available to this process; create the fork with `dpone fork create` "
            "where the admin credential is configured"
        ) from None
    from psycopg import Error as PgError
    from psycopg import sql

    try:
        with conn:
            _ensure_role(conn, roles.writer, passwords[roles.writer])
            _ensure_role(conn, roles.reader, passwords[roles.reader])
            _ensure_role(conn, roles.group, None)
            _own_schema(conn, schema, roles.writer)
            _grant_read(conn, schema, roles.group)
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(roles.group), sql.Identifier(roles.reader)))
            for ancestor in ancestors:
                if ancestor.namespace.catalog.identity != roles.identity:
                    continue
                theirs = ancestor.namespace.schema or POSTGRES_DEFAULT_SCHEMA
                if not role_exists(conn, "SELECT 1 FROM pg_namespace WHERE nspname = %s", theirs):
                    continue
                group = role_name(GROUP, roles.identity, theirs)
                owner = ancestor.workspace_id if is_fork_schema(theirs) else ""  # "": never dropped
                _record(
                    store,
                    [
                        dict(
                            common,
                            role_name=group,
                            kind=GROUP,
                            password=None,
                            workspace_id=owner,
                            metadata_schema=theirs,
                        )
                    ],
                )
                _ensure_role(conn, group, None)
                _grant_read(conn, theirs, group)
                conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), sql.Identifier(roles.reader)))
    except PgError as exc:
        raise RoleProvisioningError(
            f"provisioning the fork's catalog roles was refused by PostgreSQL ({type(exc).__name__}); "
            "the admin role needs CREATEROLE and ownership of (or membership in the owner of) the "
            "lake's metadata schema"
        ) from None
    _mark_ready(store, [roles.writer, roles.reader])
    return roles


def confine(
    me: PhysicalLake, ancestors: Sequence[PhysicalLake], config: DponeConfig
) -> tuple[PhysicalLake, list[PhysicalLake], list[str]]:
    """The fork's own lake reached as its writer and the ancestors as its reader (PostgreSQL only).

    Roles are provisioned here when the fork has none yet (needs the admin credential). An ancestor
    in another catalog database cannot be read by these roles: it is left out, with a warning.
    """
    base = me.namespace.catalog
    if base.kind != "postgres" or isinstance(base, RoleCatalogLocation):
        return me, list(ancestors), []
    roles = fork_roles(base, me.namespace.schema or "")
    stored = stored_passwords(config.control_store, [roles.writer, roles.reader], ready_only=True)
    if not (stored.get(roles.writer) and stored.get(roles.reader)):
        roles = provision(me, ancestors, config)

    def location(role: str) -> RoleCatalogLocation:
        return RoleCatalogLocation(
            "postgres",
            f"{base.target} user={roles.reader}",
            None,
            base_target=base.target,
            attach_role=role,
            store_url=config.control_store,
            reader=roles.reader,
        )

    mine = replace(me, namespace=Namespace(location(roles.writer), me.namespace.schema))
    reader = location(roles.reader)
    kept, warnings = [], []
    for ancestor in ancestors:
        if ancestor.namespace.catalog.identity == roles.identity:
            kept.append(replace(ancestor, namespace=Namespace(reader, ancestor.namespace.schema)))
        else:
            warnings.append(
                f"ancestor {ancestor.workspace_id!r} keeps lake {me.settings.name!r} in another catalog "
                "database, which the fork's read-only role cannot reach; its tables are not deferred"
            )
    return mine, kept, warnings


def has_roles(conn, workspace_ids: Sequence[str]) -> bool:
    """True while some role provisioned for one of `workspace_ids` has not been dropped."""
    query = sa.select(role_table.c.role_name).where(role_table.c.workspace_id.in_(list(workspace_ids)))
    return conn.execute(query.limit(1)).first() is not None
