"""The one seam that turns (workspace, lake) into the DuckLake ATTACH statements a job runs.

Every DuckLake access in the project — dbt (through the dbt-duckdb plugin), the `DuckLakeResource`,
`dpone lake sql`, tests and benchmarks — gets its attach from `resolve()`. For the root workspace
(`prod`) and for lakes a fork shares with its parent, that is the lake's own configuration. For an
isolated fork it is the fork's own namespace (write redirect), its ancestors attached READ_ONLY, and
defer views for every upstream table the fork has not materialized itself (see `fork_plan.py`).

What a reader could get wrong: `alias` is not the lake name. DuckDB reserves `main` (the default
lake's name) as a catalog alias, so every lake is attached as `lake_<name>` (`lake_main`), in the
root and in every fork alike; user SQL and dbt address tables as `<alias>.<schema>.<table>`.
`statements()` redacts credentials by default; only `apply()` (or `statements(redact=False)`)
reads them, at that moment, from the referenced environment variables. A fork's `transition` and
`views` depend on the views live in its catalog: `apply()` reads them from the fork catalog it has
just attached, in the same session (the fresher answer, and no second connection); only code that
inspects the plan without applying it (`statements()`, `views`, `transition`) reads them apart.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from dpone_dagster.config import DponeConfig, LakeConfig, load_config
from dpone_dagster.errors import LakeError
from dpone_dagster.lake.attach import (
    CatalogLocation,
    absolute_data_path,
    attach_statement,
    catalog_location,
    normalize_options,
    storage_secret_statement,
)
from dpone_dagster.lake.naming import lake_alias
from dpone_dagster.lake.sql import CredentialResolver, Statement, quote_ident
from dpone_dagster.workspaces.ids import ROOT_WORKSPACE, check_workspace_id

log = logging.getLogger(__name__)

DEFAULT_SCHEMA = "main"
SCD2_MARKER = "is_current"


class InvalidTargetError(LakeError):
    code = "lake.invalid_target"


class DataPathDriftError(LakeError):
    code = "lake.data_path_drift"


LIVE_VIEWS_SQL = (
    "SELECT s.schema_name, v.view_name, v.sql FROM {ns}.ducklake_view v "
    "JOIN {ns}.ducklake_schema s ON s.schema_id = v.schema_id "
    "WHERE v.end_snapshot IS NULL AND s.end_snapshot IS NULL"
)
"""A DuckLake namespace's live views as (schema, view, stored SQL); `{ns}` is its metadata schema."""


@dataclass(frozen=True, order=True)
class TableName:
    schema: str
    table: str

    @classmethod
    def parse(cls, text: str) -> TableName:
        parts = text.split(".")
        if len(parts) == 1:
            parts = [DEFAULT_SCHEMA, parts[0]]
        if len(parts) != 2 or not all(parts):
            raise InvalidTargetError(f"a target is `table` or `schema.table`, not {text!r}")
        return cls(parts[0], parts[1])

    def qualified(self, alias: str) -> str:
        return f"{quote_ident(alias)}.{quote_ident(self.schema)}.{quote_ident(self.table)}"

    def __str__(self) -> str:
        return f"{self.schema}.{self.table}"


@dataclass(frozen=True)
class AncestorAttach:
    """One READ_ONLY ancestor attach; `statements` are its storage secret (if any) and ATTACH."""

    workspace_id: str
    alias: str
    statements: tuple[Statement, ...]


@dataclass(frozen=True)
class DeferView:
    """A fork view over the nearest ancestor that owns `source`.

    `current_only` makes the SCD2 `<table>_current` companion; `replace` is set when a live view of
    that name already points elsewhere (the nearest owner changed), so it is re-pointed.
    """

    name: TableName
    owner_workspace: str
    owner_alias: str
    source: TableName
    current_only: bool = False
    replace: bool = False

    def select_sql(self) -> str:
        where = f" WHERE {SCD2_MARKER}" if self.current_only else ""
        return f"SELECT * FROM {self.source.qualified(self.owner_alias)}{where}"

    def create_sql(self, alias: str) -> str:
        verb = "CREATE OR REPLACE VIEW" if self.replace else "CREATE VIEW IF NOT EXISTS"
        return f"{verb} {self.name.qualified(alias)} AS {self.select_sql()}"


LiveViews = Mapping[TableName, str]
"""The views live in a fork namespace: name -> the SQL DuckLake stored for it."""

_SPACES = re.compile(r"\s+")


def _normalized(sql: str) -> str:
    return _SPACES.sub(" ", sql).strip().rstrip(";").lower()


@dataclass(frozen=True)
class DeferPlan:
    """What a fork needs before looking at its catalog: every defer view, and the job's targets
    (with their `_current` companions), which must end up as tables, not views."""

    wanted: tuple[DeferView, ...] = ()
    retargets: tuple[TableName, ...] = ()

    def transition(self, live: LiveViews) -> tuple[TableName, ...]:
        return tuple(sorted(name for name in self.retargets if name in live))

    def views(self, live: LiveViews) -> tuple[DeferView, ...]:
        """Views not yet live with the same definition; live views that differ are re-pointed."""
        out = []
        for view in self.wanted:
            existing = live.get(view.name)
            if existing is None:
                out.append(view)
                continue
            wanted = view.select_sql()
            if existing != wanted and _normalized(existing) != _normalized(wanted):
                out.append(replace(view, replace=True))
        return tuple(out)


def metadata_catalog(alias: str, metadata_catalog_option: object = None) -> str:
    """The name under which DuckLake attaches the catalog database of the lake attached as `alias`:
    the `METADATA_CATALOG` option when given, else DuckLake's default `__ducklake_metadata_<alias>`."""
    return str(metadata_catalog_option) if metadata_catalog_option else f"__ducklake_metadata_{alias}"


def live_views_in_session(conn, catalog: str) -> dict[TableName, str]:
    """The live views of a DuckDB-file DuckLake, read in this session through `catalog`, the
    metadata catalog DuckLake attached for it (see `metadata_catalog`)."""
    ns = f"{quote_ident(catalog)}.main"
    try:
        rows = conn.execute(LIVE_VIEWS_SQL.format(ns=ns)).fetchall()
    except Exception as exc:
        raise LakeError(
            f"the live views of a fork catalog cannot be read from its metadata catalog {catalog!r} "
            f"({type(exc).__name__}); the DuckLake extension may have changed how it attaches catalogs",
            code="lake.live_views_unreadable",
        ) from None
    return {TableName(schema, view): sql for schema, view, sql in rows}


@dataclass(frozen=True)
class ResolvedLake:
    """How one workspace attaches one lake. Holds no credential, only references to them."""

    alias: str
    workspace_id: str
    lake: str
    fork_mode: bool
    namespace: str
    data_path: str
    catalog: CatalogLocation
    base_catalog: CatalogLocation
    setup: tuple[Statement, ...]
    target: Statement
    ancestors: tuple[AncestorAttach, ...] = ()
    defer: DeferPlan = DeferPlan()
    warnings: tuple[str, ...] = ()
    targets: tuple[TableName, ...] = field(default=())
    live: LiveViews | None = field(default=None, compare=False, repr=False)
    """The fork's live views when resolution already knew them (PostgreSQL answers them in the
    same round trip as its ancestor check); None means read them from the attached catalog."""
    read_live: Callable[[], LiveViews] | None = field(default=None, compare=False, repr=False)
    """Reads the live views without a session (opens the fork catalog apart); inspection only."""
    metadata_catalog: str = ""
    """Where the session finds the fork's catalog tables once attached (DuckDB-file catalogs)."""

    @cached_property
    def _planned_live(self) -> LiveViews:
        if self.live is not None:
            return self.live
        return self.read_live() if self.read_live is not None else {}

    @property
    def transition(self) -> tuple[TableName, ...]:
        """Targets that are live defer views in the fork now: dropped right after the target attach."""
        return self.defer.transition(self._planned_live)

    @property
    def views(self) -> tuple[DeferView, ...]:
        """Defer views to create or re-point (those live with the same definition are left alone)."""
        return self.defer.views(self._planned_live)

    def _drop_statements(self, transition: Sequence[TableName] | None = None) -> list[Statement]:
        names = self.transition if transition is None else transition
        return [Statement.of(f"DROP VIEW {name.qualified(self.alias)}") for name in names]

    def _view_statements(self, views: Sequence[DeferView]) -> list[Statement]:
        if not views:
            return []
        schemas = sorted({view.name.schema for view in views} - {DEFAULT_SCHEMA})
        body = [
            Statement.of(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(self.alias)}.{quote_ident(s)}")
            for s in schemas
        ] + [Statement.of(view.create_sql(self.alias)) for view in views]
        return [Statement.of("BEGIN TRANSACTION"), *body, Statement.of("COMMIT")]

    def plan(self) -> list[Statement]:
        ancestor_statements = [s for a in self.ancestors for s in a.statements]
        return [
            *self.setup,
            self.target,
            *self._drop_statements(),
            *ancestor_statements,
            *self._view_statements(self.views),
        ]

    def statements(
        self, *, redact: bool = True, credentials: CredentialResolver | None = None
    ) -> list[str]:
        """The exact SQL `apply()` runs, in order; credentials shown as `'<redacted>'` by default."""
        return [s.render(redact=redact, credentials=credentials) for s in self.plan()]

    def apply(self, conn, *, credentials: CredentialResolver | None = None) -> list[str]:
        """Run the plan on a `duck.connect()` connection. Returns the warnings it met.

        An ancestor whose attach fails (unreachable catalog, locked DuckDB file) only loses its own
        defer views, with a warning; the target attach and everything else must succeed.
        """
        warnings = list(self.warnings)
        self._prepare_local_paths()
        for statement in self.setup:
            _run(conn, statement, credentials)
        try:
            _run(conn, self.target, credentials)
        except Exception as exc:
            if "does not match existing data path" in str(exc):
                raise DataPathDriftError(
                    f"lake {self.lake!r} of workspace {self.workspace_id!r} was created with a "
                    "different data path than its settings give now; its existing files would be "
                    "misread, so it is not attached (restore the data path, or drop and recreate "
                    "the fork)"
                ) from None
            raise
        live = self._session_live(conn)
        for statement in self._drop_statements(self.defer.transition(live)):
            _run(conn, statement, credentials)
        reachable: set[str] = set()
        for ancestor in self.ancestors:
            try:
                for statement in ancestor.statements:
                    _run(conn, statement, credentials)
            except Exception as exc:
                message = (
                    f"ancestor {ancestor.workspace_id!r} of lake {self.lake!r} could not be attached "
                    f"({type(exc).__name__}); its tables are not deferred in this run"
                )
                log.warning(message)
                warnings.append(message)
                continue
            reachable.add(ancestor.alias)
        views = [v for v in self.defer.views(live) if v.owner_alias in reachable]
        statements = self._view_statements(views)
        if statements:
            try:
                for statement in statements:
                    _run(conn, statement, credentials)
            except Exception:
                conn.execute("ROLLBACK")
                raise
        return warnings

    def _session_live(self, conn) -> LiveViews:
        if not self.fork_mode or not (self.defer.wanted or self.defer.retargets):
            return {}
        if self.live is not None:
            return self.live
        return live_views_in_session(conn, self.metadata_catalog or metadata_catalog(self.alias))

    @property
    def extensions(self) -> tuple[str, ...]:
        """The DuckDB extensions this plan needs (each costs a signature check when loaded)."""
        needed = ["ducklake"]
        attaches = [*self.setup, self.target, *(s for a in self.ancestors for s in a.statements)]
        rendered = " ".join(s.render() for s in attaches)
        if self.catalog.kind == "postgres" or "'ducklake:postgres:" in rendered:
            needed.append("postgres_scanner")
        if "(TYPE s3" in rendered:
            needed.append("httpfs")
        return tuple(needed)

    def connect(self, *, credentials: CredentialResolver | None = None):
        """A new `duck.connect()` connection with just the needed extensions, plan applied."""
        from dpone_dagster.lake.duck import connect

        conn = connect(extensions=self.extensions)
        try:
            self.apply(conn, credentials=credentials)
        except BaseException:
            conn.close()
            raise
        return conn

    def _prepare_local_paths(self) -> None:
        if self.catalog.kind in ("duckdb", "sqlite"):
            Path(self.catalog.target).parent.mkdir(parents=True, exist_ok=True)
        if "://" not in self.data_path:
            Path(self.data_path).mkdir(parents=True, exist_ok=True)


def _run(conn, statement: Statement, credentials: CredentialResolver | None) -> None:
    sql = statement.render(redact=False, credentials=credentials)
    try:
        conn.execute(sql)
    except Exception as exc:
        if not statement.has_secret:
            raise
        raise LakeError(
            f"a statement carrying credentials failed ({type(exc).__name__}): "
            + statement.render(redact=True),
            code="lake.attach_failed",
        ) from None


def parse_targets(targets: Sequence[str]) -> tuple[TableName, ...]:
    if isinstance(targets, str):
        raise InvalidTargetError("targets is a sequence of table names, not one string")
    return tuple(sorted({TableName.parse(t) for t in targets}))


def root_resolution(
    workspace_id: str, settings: LakeConfig, config: DponeConfig, targets: tuple[TableName, ...]
) -> ResolvedLake:
    """A lake attached at its own configured location: the root workspace, or a shared fork lake."""
    catalog = catalog_location(settings, config.project_root)
    data_path = absolute_data_path(settings.data_path, config.project_root)
    options = normalize_options(settings.attach_args)
    if any(name in ("DATA_PATH", "OVERRIDE_DATA_PATH") for name, _ in options):
        raise LakeError(
            f"lake {settings.name!r} sets DATA_PATH in attach_args; use its data_path setting",
            code="lake.reserved_option",
        )
    secret = storage_secret_statement(settings.storage, data_path)
    return ResolvedLake(
        alias=lake_alias(settings.name),
        workspace_id=workspace_id,
        lake=settings.name,
        fork_mode=False,
        namespace="",
        data_path=data_path,
        catalog=catalog,
        base_catalog=catalog,
        setup=(secret,) if secret else (),
        target=attach_statement(catalog, lake_alias(settings.name), (*options, ("DATA_PATH", data_path))),
        targets=targets,
    )


def resolve(
    workspace_id: str,
    lake: str = "main",
    *,
    config: DponeConfig | None = None,
    targets: Sequence[str] = (),
) -> ResolvedLake:
    """Resolve how `workspace_id` attaches `lake`; `targets` are the tables the job will write."""
    config = config or load_config()
    check_workspace_id(workspace_id)
    wanted = parse_targets(targets)
    if workspace_id == ROOT_WORKSPACE:
        return root_resolution(workspace_id, config.lake(lake), config, wanted)
    from dpone_dagster.lake.fork_plan import resolve_workspace_lake

    return resolve_workspace_lake(workspace_id, lake, config, wanted)
