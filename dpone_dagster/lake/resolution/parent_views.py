"""Defer views in the session: created in one transaction, and those over the ancestors' *untracked*
views (a parent's dbt view built from a terminal).

`create_views` runs a plan's defer views (`apply.ResolvedLake.apply`); the rest of this module
finds the ancestors' untracked views and creates them the same way.

Tracked tables and views defer from the control store's tracking rows (`lake/resolution/fork.py`).
A `dbt build` run from a terminal records no row, so without this a fork reads a parent's dbt view
(a staging model) as absent and the first model over it fails with "Table with name ... does not
exist". Views hold no data and cannot be half-written, so the ancestors' live views are looked up in
the session once they are attached (one `duckdb_views()` query, either catalog backend) and each one
the plan allows (`plan.ParentViews`) and the fork has no view of gets `SELECT * FROM <owner>.<view>`.

What a reader could get wrong:
- the view reads the *ancestor's* data, as `dbt --defer` does: DuckLake stores a view's reference
  to its own catalog as `{DUCKLAKE_CATALOG}`, so the parent's view binds to the parent's alias in
  the fork's session, not to the fork's `lake_<lake>`; the fork's own rebuild of a table under it is
  not seen through it until the fork builds the view too.
- an existing fork view of that name is never replaced (it may be the fork's own view model), and a
  parent view that no longer binds (its table dropped) is skipped with a warning, not fatal.
- untracked parent *tables* still do not defer (design: pipeline-env-isolation.md).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from dpone_dagster.lake.resolution.plan import DeferView, LiveViews, ParentViews, TableName
from dpone_dagster.lake.resolution.views import View, view_statements

log = logging.getLogger(__name__)

_VIEWS_SQL = (
    "SELECT database_name, schema_name, view_name FROM duckdb_views() WHERE NOT internal AND database_name IN ({marks})"
)


def create_views(conn, alias: str, views: Sequence[View]) -> None:
    """All views in one transaction (one catalog commit), rolled back as a whole on failure.
    A view statement carries no credential, so it is run as rendered."""
    statements = view_statements(alias, views)
    if not statements:
        return
    try:
        for statement in statements:
            conn.execute(statement.render(redact=False))
    except Exception:
        conn.execute("ROLLBACK")
        raise


def untracked_parent_views(
    conn, wanted: ParentViews, owners: Sequence[tuple[str, str]], live: LiveViews
) -> list[DeferView]:
    """Defer views for the ancestors' views `wanted` allows; `owners` are (workspace, alias) of the
    attached ancestors, nearest first (the nearest one having a view of a name serves it)."""
    if not owners:
        return []
    rank = {alias.lower(): index for index, (_, alias) in enumerate(owners)}
    marks = ", ".join("?" for _ in owners)
    rows = conn.execute(_VIEWS_SQL.format(marks=marks), [alias for _, alias in owners]).fetchall()
    nearest: dict[TableName, int] = {}
    for database, schema, view in rows:
        name, index = TableName(schema, view), rank[database.lower()]
        if wanted.wants(name) and name not in live and index < nearest.get(name, len(owners)):
            nearest[name] = index
    return [DeferView(name, owners[i][0], owners[i][1], name) for name, i in sorted(nearest.items())]


def defer_parent_views(
    conn,
    wanted: ParentViews,
    owners: Sequence[tuple[str, str]],
    live: LiveViews,
    alias: str,
) -> list[str]:
    """Create them all in the lake attached as `alias` in one transaction; when that fails, one by
    one, each failure a warning."""
    views = untracked_parent_views(conn, wanted, owners, live)
    try:
        create_views(conn, alias, views)
        return []
    except Exception:
        pass
    warnings = []
    for view in views:
        try:
            create_views(conn, alias, [view])
        except Exception as exc:
            message = (
                f"the view {view.source} of ancestor {view.owner_workspace!r} cannot be read from the "
                f"fork ({type(exc).__name__}); it is not deferred in this run"
            )
            log.warning(message)
            warnings.append(message)
    return warnings
