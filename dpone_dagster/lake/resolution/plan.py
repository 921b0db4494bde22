"""What a fork defers: table names, defer views and the plan that compares them with live views;
and `LakePlan`, the whole attach plan as data (`apply.ResolvedLake` runs it).

A fork sees each upstream table it has not materialized itself through a view over the nearest
ancestor that owns it. `DeferPlan.views` compares the views wanted with the ones live in the fork
catalog, so a fork in steady state runs no view statement at all.

What a reader could get wrong: DuckLake stores a view's SQL as DuckDB re-renders it, not as it was
written, so the comparison is on a canonical form (whitespace, letter case outside quotes, optional
quoting of plain identifiers), never on the raw text; a mismatch re-creates the view and makes a
new fork snapshot on every run.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from dpone_dagster.config import DponeConfig
from dpone_dagster.errors import LakeError
from dpone_dagster.lake.guard.statement import Statement, quote_ident
from dpone_dagster.lake.ports import CatalogPort, Namespace
from dpone_dagster.lake.resolution.attach import CatalogLocation

DEFAULT_SCHEMA = "main"
SCD2_MARKER = "is_current"


class InvalidTargetError(LakeError):
    code = "lake.invalid_target"


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

    def stored_sql(self) -> str:
        """What the live view is compared with (a `partitions.PartitionView` differs from its select)."""
        return self.select_sql()

    def create_sql(self, alias: str) -> str:
        verb = "CREATE OR REPLACE VIEW" if self.replace else "CREATE VIEW IF NOT EXISTS"
        return f"{verb} {self.name.qualified(alias)} AS {self.select_sql()}"


LiveViews = Mapping[TableName, str]
"""The views live in a fork namespace: name -> the SQL DuckLake stored for it."""

_TOKEN = re.compile(
    r'"(?P<quoted>(?:[^"]|"")*)"'
    r"|(?P<string>'(?:[^']|'')*')"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_$]*)"
    r"|(?P<space>\s+)"
    r"|(?P<other>.)",
    re.DOTALL,
)


def canonical_sql(sql: str) -> tuple[tuple[str, str], ...]:
    """Tokens of `sql` as DuckDB resolves them: identifiers unquoted and case-folded (a quoted
    `"Mart"` and DuckDB's re-rendered bare `Mart` are one identifier), string literals verbatim,
    whitespace and a trailing `;` dropped. Two SQL texts with equal tokens define the same view."""
    out: list[tuple[str, str]] = []
    for match in _TOKEN.finditer(sql.strip().rstrip(";")):
        kind = match.lastgroup
        if kind == "quoted":
            out.append(("name", match.group("quoted").replace('""', '"').lower()))
        elif kind == "word":
            out.append(("name", match.group("word").lower()))
        elif kind == "string":
            out.append(("string", match.group("string")))
        elif kind == "other":
            out.append(("punct", match.group("other")))
    return tuple(out)


@dataclass(frozen=True)
class ParentViews:
    """Which *untracked* views of the ancestors a fork defers too (a dbt view model built from a
    terminal is recorded nowhere): every one not named in `skip` (tracked anywhere in the chain, or
    a target of this job) and, with a read set, only those in `only`. They are found in the session
    once the ancestors are attached (`lake/resolution/parent_views.py`), never at resolution."""

    skip: frozenset[TableName] = frozenset()
    only: frozenset[TableName] | None = None

    def wants(self, name: TableName) -> bool:
        return name not in self.skip and (self.only is None or name in self.only)


@dataclass(frozen=True)
class DeferPlan:
    """What a fork needs before looking at its catalog: every defer view, and the job's targets
    (with their `_current` companions), which must end up as tables, not views; `parent_views`
    (None at a root) says which untracked ancestor views are deferred once the session sees them."""

    wanted: tuple[DeferView, ...] = ()
    retargets: tuple[TableName, ...] = ()
    parent_views: ParentViews | None = None

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
            wanted = view.stored_sql()
            if existing != wanted and canonical_sql(existing) != canonical_sql(wanted):
                out.append(replace(view, replace=True))
        return tuple(out)


def parse_targets(targets: Sequence[str]) -> tuple[TableName, ...]:
    if isinstance(targets, str):
        raise InvalidTargetError("targets is a sequence of table names, not one string")
    return tuple(sorted({TableName.parse(t) for t in targets}))


@dataclass(frozen=True)
class IncarnationFence:
    """What `apply()` re-reads before attaching a plan held for a while (dbt applies one plan per
    connection): that `incarnation` is still `workspace_id`'s current, active one."""

    control_store: str
    workspace_id: str
    incarnation: str


@dataclass(frozen=True)
class MissingMarks:
    """Where `apply()` records the defer views whose source is gone: the owners' tracking rows of
    `lake`. An owner read at a pin (`pinned`) is skipped: a table it created after the pin is
    absent at the pin, not gone from the owner."""

    config: DponeConfig
    lake: str
    pinned: frozenset[str] = frozenset()

    def owners(self, gone: Sequence[DeferView]) -> list[tuple[str, TableName]]:
        return sorted({(v.owner_workspace, v.source) for v in gone if v.owner_workspace not in self.pinned})


@dataclass(frozen=True)
class AncestorAttach:
    """One READ_ONLY ancestor attach; `statements` are its storage secret (if any) and ATTACH."""

    workspace_id: str
    alias: str
    statements: tuple[Statement, ...]


@dataclass(frozen=True)
class LakePlan:
    """How one workspace attaches one lake, as data: the statements, the defer plan and what `apply()`
    re-checks. Holds no credential, only references to them. `apply.ResolvedLake` is this plan with
    the code that runs it; the fork builder makes it from what it read in one pass."""

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
    live_from: tuple[CatalogPort, Namespace] | None = field(default=None, compare=False, repr=False)
    """Where to read the live views without a session (the fork catalog opened apart); inspection only."""
    metadata_catalog: str = ""
    """Where the session finds the fork's catalog tables once attached (DuckDB-file catalogs)."""
    missing_marks: MissingMarks | None = field(default=None, compare=False, repr=False)
    """Where defer views that lost their source (the owner's table no longer exists) are recorded
    as `missing` (a fork's plan)."""
    fence: IncarnationFence | None = field(default=None, compare=False, repr=False)
    """The fork incarnation this plan was made for; `apply()` checks it is still the current, active
    one before attaching anything when the plan is older than `FENCE_GRACE_S`, so a plan held across
    a drop (dbt applies one plan per connection) cannot re-create the namespace. A younger plan read
    the same state when it was made."""
    planned_at: float = field(default_factory=time.monotonic, compare=False, repr=False)
