"""A parent's dbt *view* (a staging model) is readable in a fork that has not built it (issue 18).

dbt-duckdb builds a view model as `CREATE VIEW "lake_main"."main"."stg_orders" AS (...
"lake_main"."main"."raw_orders")`. Through Dagster every built model is recorded and defers like a
table; a `dbt build` from a terminal records nothing, and the fork used to read the view as absent
("Table with name stg_orders does not exist!", the adoption wheel test). Untracked ancestor views
now defer (`lake/resolution/parent_views.py`).

What a reader could get wrong: the view reads the *parent's* rows even though the table under it is untracked
(absent in the fork): DuckLake stores the view's reference to its own catalog as `{DUCKLAKE_CATALOG}`, so it
binds to the parent's alias in the fork's session. Untracked parent *tables* still read as absent.
"""

from __future__ import annotations

import duckdb
import pytest

from dpone_dagster.lake.state.tracking import record_materialization

from .lakes import attached, current_snapshot, materialize, rows, run_sql

RAW = "SELECT range AS id, CASE WHEN range % 2 = 0 THEN 'placed' ELSE 'returned' END AS status FROM range(6)"
STAGING_VIEW = (
    'CREATE VIEW "lake_main"."main"."stg_orders" AS '
    '(SELECT id AS order_id, status FROM "lake_main"."main"."raw_orders" WHERE status <> \'returned\')'
)
READ = "SELECT order_id, status FROM lake_main.main.stg_orders ORDER BY order_id"
PLACED = [(0, "placed"), (2, "placed"), (4, "placed")]


def _terminal_build(env) -> None:
    """Prod as a terminal `dbt build` leaves it: a table and a view over it, written through
    `resolve(...).apply(conn)`, nothing recorded."""
    run_sql(env, "prod", f"CREATE TABLE lake_main.main.raw_orders AS {RAW}", targets=["raw_orders"])
    run_sql(env, "prod", STAGING_VIEW, targets=["stg_orders"])
    assert rows(env, "prod", READ) == PLACED


def test_an_unrecorded_parent_view_reads_the_parents_rows_in_the_fork(lake_env, service):
    _terminal_build(lake_env)
    service.create_fork("wm-fork-a", "prod", owner="alice")
    assert rows(lake_env, "wm-fork-a", READ) == PLACED
    with pytest.raises(duckdb.Error):  # the untracked table itself still reads as absent
        rows(lake_env, "wm-fork-a", "SELECT * FROM lake_main.main.raw_orders")
    snapshot = current_snapshot(lake_env, "wm-fork-a")
    assert rows(lake_env, "wm-fork-a", READ) == PLACED
    assert current_snapshot(lake_env, "wm-fork-a") == snapshot  # steady state: no view statement, no snapshot


def test_a_recorded_parent_view_reads_the_parents_rows_in_the_fork(embedded_lake, service):
    materialize(embedded_lake, "prod", "raw_orders", RAW)
    run_sql(embedded_lake, "prod", STAGING_VIEW, targets=["stg_orders"])
    record_materialization(
        "prod",
        "main",
        "main",
        "stg_orders",
        status="materialized",
        snapshot_id=None,
        columns=[("order_id", "BIGINT"), ("status", "VARCHAR")],
        config=embedded_lake.config,
    )
    service.create_fork("wm-fork-a", "prod", owner="alice")
    assert rows(embedded_lake, "wm-fork-a", READ) == PLACED


def test_a_parent_view_whose_recorded_run_failed_reads_as_absent(embedded_lake, service):
    _terminal_build(embedded_lake)
    record_materialization(
        "prod", "main", "main", "stg_orders", status="failed", snapshot_id=None, columns=[], config=embedded_lake.config
    )
    service.create_fork("wm-fork-a", "prod", owner="alice")
    with pytest.raises(duckdb.Error):
        rows(embedded_lake, "wm-fork-a", READ)


def test_a_grandchild_reads_the_roots_unrecorded_view_through_its_parent(embedded_lake, service):
    _terminal_build(embedded_lake)
    service.create_fork("wm-fork-a", "prod", owner="alice")
    service.create_fork("wm-fork-a/b", "wm-fork-a", owner="alice")
    assert rows(embedded_lake, "wm-fork-a/b", READ) == PLACED


def test_the_forks_own_view_and_its_targets_are_not_replaced(embedded_lake, service):
    _terminal_build(embedded_lake)
    service.create_fork("wm-fork-a", "prod", owner="alice")
    own = "CREATE OR REPLACE VIEW lake_main.main.stg_orders AS SELECT 9 AS order_id, 'mine' AS status"
    run_sql(embedded_lake, "wm-fork-a", own, targets=["stg_orders"])
    assert rows(embedded_lake, "wm-fork-a", READ) == [(9, "mine")]
    run_sql(embedded_lake, "wm-fork-a", "DROP VIEW lake_main.main.stg_orders")
    with attached(embedded_lake, "wm-fork-a", targets=["stg_orders"]) as conn:  # the job that builds it
        assert conn.execute("SELECT count(*) FROM duckdb_views() WHERE database_name = 'lake_main'").fetchone() == (0,)


def test_a_parent_view_that_no_longer_binds_is_skipped_with_a_warning(embedded_lake, service):
    from dpone_dagster.lake.duck import connect
    from dpone_dagster.lake.resolution.seam import resolve

    _terminal_build(embedded_lake)
    run_sql(embedded_lake, "prod", "CREATE VIEW lake_main.main.stg_ok AS SELECT 1 AS one")
    run_sql(embedded_lake, "prod", "DROP TABLE lake_main.main.raw_orders")  # stg_orders no longer binds
    service.create_fork("wm-fork-a", "prod", owner="alice")
    resolved = resolve("wm-fork-a", "main", config=embedded_lake.config)
    conn = connect(extensions=resolved.extensions)
    try:
        warnings = resolved.apply(conn)
        assert conn.execute("SELECT one FROM lake_main.main.stg_ok").fetchall() == [(1,)]
    finally:
        conn.close()
    assert any("main.stg_orders" in w and "not deferred" in w for w in warnings), warnings


def test_a_name_live_in_the_fork_gets_no_view_statement(embedded_lake, service):
    from dpone_dagster.lake.resolution.naming import ancestor_alias
    from dpone_dagster.lake.resolution.parent_views import untracked_parent_views
    from dpone_dagster.lake.resolution.plan import ParentViews, TableName

    _terminal_build(embedded_lake)
    service.create_fork("wm-fork-a", "prod", owner="alice")
    owners = [("prod", ancestor_alias("main", "prod"))]
    name = TableName("main", "stg_orders")
    with attached(embedded_lake, "wm-fork-a") as conn:
        found = untracked_parent_views(conn, ParentViews(), owners, {})
        assert [(v.name, v.owner_workspace) for v in found] == [(name, "prod")]
        assert untracked_parent_views(conn, ParentViews(), owners, {name: found[0].stored_sql()}) == []
        assert untracked_parent_views(conn, ParentViews(only=frozenset()), owners, {}) == []  # a read set without it
