"""Resolution cost grows with chain depth, never with the number of tables; views commit once."""

from __future__ import annotations

import sqlalchemy as sa

from dpone_dagster.control.store import open_store
from dpone_dagster.lake.catalogs import CatalogAdapters, CountingCatalog
from dpone_dagster.lake.resolution.fork import LakePorts, resolve_workspace_lake
from dpone_dagster.lake.resolution.plan import parse_targets
from dpone_dagster.lake.state.registry import RegistrationCache
from dpone_dagster.lake.state.tracking import record_materialization
from dpone_dagster.workspaces.service import Workspaces

from .lakes import run_sql


def _track(env, workspace, count):
    """Track tables without writing them: resolution never opens a table, only the catalog."""
    for i in range(count):
        record_materialization(
            workspace,
            "main",
            "main",
            f"t{i:03d}",
            status="materialized",
            snapshot_id=1,
            columns=[("id", "BIGINT")],
            config=env.config,
        )


CACHE = RegistrationCache()


def _cost(env, workspace):
    catalog = CountingCatalog(CatalogAdapters().duckdb)
    engine = open_store(env.config.control_store)
    queries = []
    listener = lambda *args: queries.append(args[2])  # noqa: E731
    sa.event.listen(engine, "before_cursor_execute", listener)
    try:
        resolved = resolve_workspace_lake(
            workspace,
            "main",
            env.config,
            (),
            LakePorts(catalogs=CatalogAdapters(duckdb=catalog), registrations=CACHE),
        )
    finally:
        sa.event.remove(engine, "before_cursor_execute", listener)
    return len(queries), catalog.calls, resolved


def test_round_trips_depend_on_depth_not_on_tables(embedded_lake):
    env = embedded_lake
    service = Workspaces(env.config)
    service.create_fork("wm-fork-1", "prod", owner="a")
    service.create_fork("wm-fork-2", "wm-fork-1", owner="a")
    service.create_fork("wm-fork-3", "wm-fork-2", owner="a")
    for workspace in ("prod", "wm-fork-1", "wm-fork-2", "wm-fork-3"):
        run_sql(env, workspace, [])
        _cost(env, workspace)
    _track(env, "prod", 3)
    few_shallow = _cost(env, "wm-fork-1")
    few_deep = _cost(env, "wm-fork-3")
    _track(env, "prod", 60)
    many_shallow = _cost(env, "wm-fork-1")
    many_deep = _cost(env, "wm-fork-3")

    assert few_shallow[:2] == many_shallow[:2] and few_deep[:2] == many_deep[:2]
    assert len(many_deep[2].views) == 60 and len(few_deep[2].views) == 3
    # chain, settings, tracking, pins (lake/resolution/pins.py), own partitions (lake/resolution/partitions.py):
    # never per table
    assert many_deep[0] == many_shallow[0] == 5
    assert (few_shallow[1], few_deep[1]) == (2, 4)
    statements = many_deep[2].statements()
    begin = statements.index("BEGIN TRANSACTION")
    assert statements.count("BEGIN TRANSACTION") == 1 and statements[-1] == "COMMIT"
    assert all(s.startswith("CREATE VIEW") for s in statements[begin + 1 : -1])


def test_apply_reads_live_views_in_its_session_not_from_the_plan(embedded_lake):
    """A plan made before its fork's views existed still drops the view its target became, and
    applying never opens the fork's catalog file apart (it is attached in the session)."""
    from .lakes import attached, materialize

    env = embedded_lake
    materialize(env, "prod", "orders", "SELECT range AS id FROM range(4)")
    Workspaces(env.config).create_fork("wm-fork-a", "prod", owner="a")
    catalog = CountingCatalog(CatalogAdapters().duckdb)
    ports = LakePorts(catalogs=CatalogAdapters(duckdb=catalog), registrations=CACHE)
    early = resolve_workspace_lake("wm-fork-a", "main", env.config, parse_targets(["orders"]), ports)
    assert early.live is None
    run_sql(env, "wm-fork-a", [])
    calls = catalog.calls

    with attached(env, "prod") as conn:
        conn.execute("DETACH lake_main")
        early.apply(conn)
        assert catalog.calls == calls
        conn.execute("CREATE OR REPLACE TABLE lake_main.orders AS SELECT 7 AS id")
        assert conn.execute("SELECT id FROM lake_main.orders").fetchall() == [(7,)]
    assert early.transition == ()


def test_a_named_metadata_catalog_is_where_the_session_reads_live_views(embedded_lake):
    """`METADATA_CATALOG` in a lake's settings renames the catalog the session reads; ancestors
    never take it (two attaches under one metadata name would collide)."""
    from dataclasses import replace

    from .lakes import materialize

    lake = embedded_lake.lake.model_copy(
        update={"attach_args": {**embedded_lake.lake.attach_args, "metadata_catalog": "main_meta"}}
    )
    env = replace(embedded_lake, config=embedded_lake.config.model_copy(update={"lakes": (lake,)}))
    materialize(env, "prod", "orders", "SELECT 1 AS id")
    Workspaces(env.config).create_fork("wm-fork-a", "prod", owner="a")
    assert run_sql(env, "wm-fork-a", [], fetch="SELECT id FROM lake_main.orders") == [(1,)]
    resolved = resolve_workspace_lake("wm-fork-a", "main", env.config, parse_targets(["orders"]))
    assert resolved.metadata_catalog == "main_meta"
    assert all("METADATA_CATALOG" not in s for a in resolved.ancestors for s in (x.render() for x in a.statements))
    materialize(env, "wm-fork-a", "orders", "SELECT 2 AS id")
    assert run_sql(env, "wm-fork-a", [], fetch="SELECT id FROM lake_main.orders") == [(2,)]
