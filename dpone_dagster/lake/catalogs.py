"""Catalog adapters: PostgreSQL (psycopg) and DuckDB-file catalogs, behind `CatalogPort`.

Used by fork resolution (which ancestor namespaces exist, which views are live in the fork) and by
cleanup (drop a fork namespace). Both refuse to drop anything whose name is not a fork schema.

What a reader could get wrong: a DuckDB-file catalog can be attached only once per process and is
locked by a writing process, so `inspect` opens no file at all: ancestors' files are checked for
existence, and the fork's live views are left unanswered (`live_views=None`) because the session
that applies the plan reads them from the fork catalog it has just attached. Only `live_views()`,
for a plan inspected without being applied, opens the fork's own file, read-only, and closes it; a
fork file already attached elsewhere in this process is reported as busy, not guessed at.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dpone_dagster.config import resolve_secret
from dpone_dagster.errors import LakeError
from dpone_dagster.lake.guard.statement import CredentialResolver
from dpone_dagster.lake.ports import CatalogFacts, CatalogPort, LiveViewTriples, Namespace
from dpone_dagster.lake.resolution.naming import is_fork_schema
from dpone_dagster.lake.resolution.plan import LIVE_VIEWS_SQL

POSTGRES_DEFAULT_SCHEMA = "public"
CONNECT_TIMEOUT_S = 5


class CatalogUnreachableError(LakeError):
    code = "lake.catalog_unreachable"


class CatalogBusyError(LakeError):
    code = "lake.catalog_busy"


class UnsafeNamespaceError(LakeError):
    code = "lake.unsafe_namespace"


def require_fork_namespace(name: str) -> str:
    if not is_fork_schema(name):
        raise UnsafeNamespaceError("refusing to drop a namespace that is not a fork namespace")
    return name


@dataclass
class PostgresCatalog:
    credentials: CredentialResolver = resolve_secret

    def _connect(self, namespace: Namespace):
        import psycopg
        from psycopg.conninfo import make_conninfo

        extra = {"connect_timeout": CONNECT_TIMEOUT_S}
        # the location decides: an owner credential from its env var, or a fork role's stored one
        password = namespace.catalog.connect_password(self.credentials)
        if password is not None:
            extra["password"] = password
        try:
            return psycopg.connect(make_conninfo(namespace.catalog.target, **extra), autocommit=True)
        except psycopg.Error:
            raise CatalogUnreachableError("a PostgreSQL lake catalog cannot be reached") from None

    def inspect(self, namespaces: Sequence[Namespace], views_of: Namespace | None) -> CatalogFacts:
        from psycopg import sql

        by_schema = {ns.schema or POSTGRES_DEFAULT_SCHEMA: ns for ns in namespaces}
        if views_of is not None:
            by_schema.setdefault(views_of.schema or POSTGRES_DEFAULT_SCHEMA, views_of)
        with self._connect(next(iter(by_schema.values()))) as conn:
            found = {
                row[0]
                for row in conn.execute(
                    "SELECT table_schema FROM information_schema.tables "
                    "WHERE table_name = 'ducklake_metadata' AND table_schema = ANY(%s)",
                    (list(by_schema),),
                )
            }
            views: LiveViewTriples = frozenset()
            view_schema = (views_of.schema or POSTGRES_DEFAULT_SCHEMA) if views_of else None
            if view_schema in found:
                query = sql.SQL(LIVE_VIEWS_SQL).format(ns=sql.Identifier(view_schema))
                views = frozenset((s, v, q) for s, v, q in conn.execute(query))
        return CatalogFacts(frozenset(by_schema[s] for s in found), views)

    def live_views(self, namespace: Namespace) -> LiveViewTriples:
        return self.inspect([], namespace).live_views or frozenset()

    def drop_namespace(self, namespace: Namespace) -> None:
        from psycopg import sql

        schema = require_fork_namespace(namespace.schema or "")
        with self._connect(namespace) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@dataclass
class DuckDBFileCatalog:
    """`namespace.catalog.target` is the catalog file; a fork's file is named by its schema."""

    def inspect(self, namespaces: Sequence[Namespace], views_of: Namespace | None) -> CatalogFacts:
        present = frozenset(ns for ns in namespaces if Path(ns.catalog.target).is_file())
        return CatalogFacts(present, None if views_of is not None else frozenset())

    def live_views(self, namespace: Namespace) -> LiveViewTriples:
        from dpone_dagster.lake.duck import connect

        path = Path(namespace.catalog.target)
        if not path.is_file():
            return frozenset()
        try:
            conn = connect(path, read_only=True, extensions=())
        except Exception as exc:
            raise CatalogBusyError(
                "the fork's DuckDB catalog file is in use (attached elsewhere in this process, or "
                f"locked by a writing process: {type(exc).__name__}); close that connection and retry"
            ) from None
        try:
            rows = conn.execute(LIVE_VIEWS_SQL.format(ns="main")).fetchall()
            return frozenset((s, v, q) for s, v, q in rows)
        finally:
            conn.close()

    def drop_namespace(self, namespace: Namespace) -> None:
        """Delete the fork's catalog file, unless a live connection (in this process or another)
        still has it attached: then `CatalogBusyError`, so the ledger row stays and covers what
        that connection goes on writing."""
        path = Path(namespace.catalog.target)
        require_fork_namespace(path.name.removesuffix(".ducklake"))
        if path.suffix != ".ducklake":
            raise UnsafeNamespaceError("a fork catalog file must end in .ducklake")
        if path.is_file():
            _refuse_attached(path)
        for candidate in (path, path.with_name(path.name + ".wal")):
            candidate.unlink(missing_ok=True)
        if path.parent.name == path.stem:  # a catalog folder of its own (lake/resolution/fork_catalog.py)
            shutil.rmtree(path.parent, ignore_errors=True)


def _refuse_attached(path: Path) -> None:
    """Open the file read-write for a moment: DuckDB refuses while any connection holds it."""
    from dpone_dagster.lake.duck import connect

    try:
        connect(path, extensions=()).close()
    except Exception as exc:
        raise CatalogBusyError(
            "the fork's DuckDB catalog file is still attached by a running connection "
            f"({type(exc).__name__}); it is dropped by the next cleanup once that connection ends"
        ) from None


@dataclass
class FileOnlyCatalog:
    """SQLite / MySQL root catalogs: present is assumed; the READ_ONLY attach itself decides."""

    def inspect(self, namespaces: Sequence[Namespace], views_of: Namespace | None) -> CatalogFacts:
        return CatalogFacts(frozenset(namespaces))

    def live_views(self, namespace: Namespace) -> LiveViewTriples:
        return frozenset()

    def drop_namespace(self, namespace: Namespace) -> None:
        raise UnsafeNamespaceError("forks never create namespaces in SQLite or MySQL catalogs")


class CountingCatalog:
    """Wraps a `CatalogPort` and counts its round trips (benchmarks and cost tests read `calls`)."""

    def __init__(self, inner: CatalogPort) -> None:
        self.inner, self.calls = inner, 0

    def inspect(self, namespaces: Sequence[Namespace], views_of: Namespace | None) -> CatalogFacts:
        self.calls += 1
        return self.inner.inspect(namespaces, views_of)

    def live_views(self, namespace: Namespace) -> LiveViewTriples:
        self.calls += 1
        return self.inner.live_views(namespace)

    def drop_namespace(self, namespace: Namespace) -> None:
        self.calls += 1
        self.inner.drop_namespace(namespace)


@dataclass
class CatalogAdapters:
    """Picks the adapter for a catalog kind; tests replace one with a failing or counting fake."""

    postgres: CatalogPort = field(default_factory=PostgresCatalog)
    duckdb: CatalogPort = field(default_factory=DuckDBFileCatalog)
    other: CatalogPort = field(default_factory=FileOnlyCatalog)

    def for_kind(self, kind: str) -> CatalogPort:
        return {"postgres": self.postgres, "duckdb": self.duckdb}.get(kind, self.other)
