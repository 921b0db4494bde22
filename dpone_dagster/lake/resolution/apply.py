"""`ResolvedLake`: how one workspace attaches one lake, as statements, and how they are applied.

Built by `root_resolution` here (the root, or a lake a fork shares) and by the fork builder
(`fork.py`). Its data is `plan.LakePlan` (a value: what the builder read, in one pass); this module
only runs it, and what `apply()` may re-check (the incarnation fence, where a missing table is
recorded) is data in the plan, never a call-back into the builder. `statements()` redacts
credentials by default; only `apply()` (or `statements(redact=False)`) reads them, at that moment,
from the referenced environment variables.

What a reader could get wrong: the target is attached with a plain `ATTACH` (never `IF NOT
EXISTS`, which would silently keep whatever is attached under the alias, and the job would read
and write there): an alias taken by another place is refused, one taken by an earlier `apply()` of
the very same target (remembered in a session variable with that attach's oid) is reused. A fork's
`transition` and `views` depend on the views live in its catalog: `apply()` reads them from the
fork catalog it has just attached, in the same session; only code that inspects the plan without
applying it (`statements()`, `views`, `transition`) reads them apart.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

from dpone_dagster.config import DponeConfig, LakeConfig
from dpone_dagster.errors import LakeError
from dpone_dagster.lake.guard.statement import CredentialResolver, Statement, quote_ident, sql_string
from dpone_dagster.lake.resolution.attach import (
    COMMIT_RETRY,
    absolute_data_path,
    attach_statement,
    catalog_location,
    normalize_options,
    storage_secret_statement,
)
from dpone_dagster.lake.resolution.naming import lake_alias, metadata_catalog
from dpone_dagster.lake.resolution.parent_views import create_views, defer_parent_views
from dpone_dagster.lake.resolution.plan import (
    LIVE_VIEWS_SQL,
    LakePlan,
    LiveViews,
    TableName,
)
from dpone_dagster.lake.resolution.views import View, view_statements
from dpone_dagster.lake.state.registry import require_current
from dpone_dagster.lake.state.tracking import mark_missing

log = logging.getLogger(__name__)


class DataPathDriftError(LakeError):
    code = "lake.data_path_drift"


class AliasAttachedElsewhereError(LakeError):
    code = "lake.alias_attached_elsewhere"


FENCE_GRACE_S = 1.0
"""A plan younger than this is applied without re-reading its fork's incarnation state."""

ATTACH_MARK_VARIABLE = "__dpone_attach_{alias}"
"""Session variable naming the target a resolution attached under `alias` and that attach's
database oid (a digest and a number, no secret): a later `apply()` reuses exactly that attach."""


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


class ResolvedLake(LakePlan):
    """How one workspace attaches one lake (`plan.LakePlan`, its data), and how it is applied.
    Holds no credential, only references to them; built by the fork builder or `root_resolution`."""

    @cached_property
    def _planned_live(self) -> LiveViews:
        if self.live is not None:
            return self.live
        if self.live_from is None:
            return {}
        adapter, namespace = self.live_from
        return {TableName(schema, name): sql for schema, name, sql in adapter.live_views(namespace)}

    @property
    def transition(self) -> tuple[TableName, ...]:
        """Targets that are live defer views in the fork now: dropped right after the target attach."""
        return self.defer.transition(self._planned_live)

    @property
    def views(self) -> tuple[View, ...]:
        """Defer views to create or re-point (those live with the same definition are left alone)."""
        return self.defer.views(self._planned_live)

    def _drop_statements(self, transition: Sequence[TableName] | None = None) -> list[Statement]:
        names = self.transition if transition is None else transition
        return [Statement.of(f"DROP VIEW {name.qualified(self.alias)}") for name in names]

    def plan(self) -> list[Statement]:
        ancestor_statements = [s for a in self.ancestors for s in a.statements]
        return [
            *COMMIT_RETRY,
            *self.setup,
            self.target_attach,
            *self._drop_statements(),
            *ancestor_statements,
            *view_statements(self.alias, self.views),
        ]

    def statements(self, *, redact: bool = True, credentials: CredentialResolver | None = None) -> list[str]:
        """The exact SQL `apply()` runs, in order; credentials shown as `'<redacted>'` by default."""
        return [s.render(redact=redact, credentials=credentials) for s in self.plan()]

    def apply(self, conn, *, credentials: CredentialResolver | None = None) -> list[str]:
        """Run the plan on a `duck.connect()` connection. Returns the warnings it met.

        An ancestor whose attach fails (unreachable catalog, locked DuckDB file) only loses its own
        defer views, with a warning; so does one table its owner no longer has (dropped or renamed
        out of band: looked for only when creating the views failed, so no run pays for the check
        unless a table is gone).
        The target attach and everything else must succeed.
        """
        from dpone_dagster.lake.duck import load_extensions

        warnings = list(self.warnings)
        if self.fence is not None and time.monotonic() - self.planned_at > FENCE_GRACE_S:
            require_current(self.fence)
        load_extensions(conn, self.extensions)  # postgres_scanner / httpfs only when the plan needs them
        self._prepare_local_paths()
        for statement in (*COMMIT_RETRY, *self.setup):  # commit conflicts are retried (attach.py)
            _run(conn, statement, credentials)
        self._attach_target(conn, credentials)
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
        # a per-partition view with no owning ancestor reads only the fork's own table (its alias)
        views = [v for v in self.defer.views(live) if v.owner_alias in reachable or v.owner_alias == self.alias]
        try:
            create_views(conn, self.alias, views)
        except Exception:
            kept, missing = _split_missing(conn, views)
            if not missing:
                raise
            for view in missing:
                message = (
                    f"table {view.source} of ancestor {view.owner_workspace!r} (lake {self.lake!r}) "
                    f"no longer exists; {view.name} is not deferred in this run (fork_state missing)"
                )
                log.warning(message)
                warnings.append(message)
            if self.missing_marks is not None:
                marks = self.missing_marks
                mark_missing(marks.config, marks.lake, marks.owners(missing))
            create_views(conn, self.alias, kept)
        if self.defer.parent_views is not None:  # untracked ancestor views (lake/resolution/parent_views.py)
            owners = [(a.workspace_id, a.alias) for a in self.ancestors if a.alias in reachable]
            warnings += defer_parent_views(conn, self.defer.parent_views, owners, live, self.alias)
        return warnings

    @property
    def target_attach(self) -> Statement:
        """The target ATTACH as run: plain `ATTACH`, so an alias already taken fails instead of
        being kept silently (`ATTACH IF NOT EXISTS` would keep whatever is attached there)."""
        parts = list(self.target.parts)  # a catalog password's secret may precede the ATTACH
        for index, part in enumerate(parts):
            if isinstance(part, str) and "ATTACH IF NOT EXISTS " in part:
                parts[index] = part.replace("ATTACH IF NOT EXISTS ", "ATTACH ", 1)
                return Statement(tuple(parts))
        return self.target

    def _attach_target(self, conn, credentials: CredentialResolver | None) -> None:
        try:
            _run(conn, self.target_attach, credentials)
        except Exception as exc:
            if "does not match existing data path" in str(exc):
                raise DataPathDriftError(
                    f"lake {self.lake!r} of workspace {self.workspace_id!r} was created with a "
                    "different data path than its settings give now; its existing files would be "
                    "misread, so it is not attached (restore the data path, or drop and recreate "
                    "the fork)"
                ) from None
            if self._attached_by_this_plan(conn):
                return
            raise
        conn.execute(
            f"SET VARIABLE {quote_ident(self._mark_variable)} = {sql_string(self._target_digest + ':')} "
            f"|| (SELECT database_oid FROM duckdb_databases() WHERE database_name = {sql_string(self.alias)})"
        )

    @property
    def _mark_variable(self) -> str:
        return ATTACH_MARK_VARIABLE.format(alias=self.alias)

    @property
    def _target_digest(self) -> str:
        return hashlib.sha256(self.target.render(redact=True).encode()).hexdigest()

    def _attached_by_this_plan(self, conn) -> bool:
        """After a failed target ATTACH: False when the alias is free (the failure was something
        else), True when an earlier `apply()` attached this very target there, else refuse."""
        row = conn.execute(
            f"SELECT database_oid, getvariable({sql_string(self._mark_variable)}) FROM duckdb_databases() "
            f"WHERE database_name = {sql_string(self.alias)}"
        ).fetchone()
        if row is None:
            return False
        oid, mark = row
        if mark != f"{self._target_digest}:{oid}":
            raise AliasAttachedElsewhereError(
                f"this connection already has {self.alias!r} attached to another place than "
                f"{self.workspace_id!r}'s lake {self.lake!r}; detach it (or use a new connection) "
                "before applying this resolution"
            )
        return True

    def _session_live(self, conn) -> LiveViews:
        if not self.fork_mode or not (self.defer.wanted or self.defer.retargets or self.defer.parent_views):
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
        return self.open(credentials=credentials)[0]

    def open(self, *, extensions: Sequence[str] | None = None, credentials: CredentialResolver | None = None):
        """(a new `duck.connect()` connection with the plan applied, the warnings `apply()` met);
        `extensions` loads more than the plan needs (the resource's: `duck.DEFAULT_EXTENSIONS`)."""
        from dpone_dagster.lake import duck

        conn = duck.connect(extensions=self.extensions if extensions is None else extensions)
        try:
            warnings = self.apply(conn, credentials=credentials)
        except BaseException:
            conn.close()
            raise
        return conn, warnings

    def _prepare_local_paths(self) -> None:
        if self.catalog.kind in ("duckdb", "sqlite"):
            Path(self.catalog.target).parent.mkdir(parents=True, exist_ok=True)
        if "://" not in self.data_path:
            Path(self.data_path).mkdir(parents=True, exist_ok=True)


_EXISTING_SQL = (
    "SELECT database_name, schema_name, table_name FROM duckdb_tables() WHERE database_name IN ({in_}) "
    "UNION ALL SELECT database_name, schema_name, view_name FROM duckdb_views() "
    "WHERE database_name IN ({in_})"
)


def _split_missing(conn, views: Sequence[View]) -> tuple[list[View], list[View]]:
    """(views whose source exists in its owner's attach, views whose source does not): one query,
    but a slow one (≈ 0.3 s over three attached lakes of 200 tables), hence only after a failure."""
    if not views:
        return [], []
    aliases = sorted({v.owner_alias for v in views})
    marks = ", ".join("?" for _ in aliases)
    rows = conn.execute(_EXISTING_SQL.format(in_=marks), [*aliases, *aliases]).fetchall()
    existing = {(db.lower(), schema.lower(), table.lower()) for db, schema, table in rows}
    keep, missing = [], []
    for view in views:
        key = (view.owner_alias.lower(), view.source.schema.lower(), view.source.table.lower())
        (keep if key in existing else missing).append(view)
    return keep, missing


def _run(conn, statement: Statement, credentials: CredentialResolver | None) -> None:
    sql = statement.render(redact=False, credentials=credentials)
    try:
        conn.execute(sql)
    except Exception as exc:
        if not statement.has_secret:
            raise
        raise LakeError(
            f"a statement carrying credentials failed ({type(exc).__name__}): " + statement.render(redact=True),
            code="lake.attach_failed",
        ) from None


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
