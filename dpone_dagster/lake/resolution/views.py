"""`View`: what every view a fork's resolution creates offers, whatever kind of view it is.

A fork reads a table it has not built through a view. Two kinds exist: a plain defer view over the
nearest owning ancestor (`plan.DeferView`) and a per-partition union view over the fork's own
partitions and the owner's others (`partitions.PartitionView`). The defer plan compares both with
the live views and `apply.ResolvedLake` creates both, so code that handles either names this
Protocol instead of one of the two classes.

What a reader could get wrong: this is a type, not a base class; neither view inherits from it and
nothing checks it at run time. `stored_sql` (what DuckLake keeps and the plan compares with) is not
always `select_sql` (what is run): a partition view's reference to its own catalog is stored as
`{DUCKLAKE_CATALOG}`. The plan re-points a view with `dataclasses.replace(view, replace=True)`, so
every implementation is a frozen dataclass with a `replace` field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from dpone_dagster.lake.guard.statement import Statement, quote_ident
from dpone_dagster.lake.resolution.plan import DEFAULT_SCHEMA, TableName


class View(Protocol):
    @property
    def name(self) -> TableName:
        """Where the view lives in the fork (schema and table, no catalog)."""

    @property
    def owner_workspace(self) -> str:
        """The nearest ancestor that owns the table read (empty when no ancestor owns it)."""

    @property
    def owner_alias(self) -> str:
        """The attach alias the view reads the owner's table through."""

    @property
    def source(self) -> TableName:
        """The table read at the owner."""

    @property
    def replace(self) -> bool:
        """True when a live view of this name points elsewhere and is re-created."""

    def select_sql(self) -> str:
        """The view's query as it is run."""

    def stored_sql(self) -> str:
        """The view's query as DuckLake stores it, what a live view is compared with."""

    def create_sql(self, alias: str) -> str:
        """The statement that creates (or re-points) the view in the fork catalog `alias`."""


def view_statements(alias: str, views: Sequence[View]) -> list[Statement]:
    """The statements that create `views` in the lake attached as `alias`: their schemas, then the
    views, in one transaction (one catalog commit); none for no view."""
    if not views:
        return []
    schemas = sorted({view.name.schema for view in views} - {DEFAULT_SCHEMA})
    body = [Statement.of(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(alias)}.{quote_ident(s)}") for s in schemas] + [
        Statement.of(view.create_sql(alias)) for view in views
    ]
    return [Statement.of("BEGIN TRANSACTION"), *body, Statement.of("COMMIT")]
