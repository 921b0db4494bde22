"""Staleness on the embedded default and on PostgreSQL + S3: exact numbers on a known sequence of
parent commits, upstream changes of fork-built tables, and the WARN asset check."""

from __future__ import annotations

from datetime import timedelta

from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.lake.state.staleness import lake_staleness

from .lakes import current_snapshot, materialize, rows, run_sql


def snapshot_time(env, snapshot: int):
    return rows(env, "prod", f"SELECT snapshot_time FROM lake_main.snapshots() WHERE snapshot_id = {snapshot}")[0][0]


def test_pinned_fork_staleness_is_exact_on_a_known_sequence(lake_env, service):
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(5)")
    materialize(lake_env, "prod", "customers", "SELECT 1 AS id")
    service.create_fork("wm-fork-pin", "prod", owner="alice", pin=True)
    pin = current_snapshot(lake_env)
    fresh = lake_staleness("wm-fork-pin", "main", lake_env.config)
    assert fresh.mode == "pinned" and fresh.pins == {"prod": pin}
    assert [(d.table, d.snapshots_behind, d.table_changed) for d in fresh.deferred] == [
        ("main.customers", 0, False),
        ("main.orders", 0, False),
    ]

    # the known sequence: orders twice (managed), one raw insert into customers (untracked)
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(6)")
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(7)")
    run_sql(lake_env, "prod", "INSERT INTO lake_main.customers VALUES (2)")
    assert current_snapshot(lake_env) == pin + 3
    moved_on_at = snapshot_time(lake_env, pin + 1)
    report = lake_staleness("wm-fork-pin", "main", lake_env.config, clock=lambda: moved_on_at + timedelta(seconds=90))
    by_table = {d.table: d for d in report.deferred}
    orders, customers = by_table["main.orders"], by_table["main.customers"]
    assert (orders.reference_snapshot, orders.owner_snapshot, orders.snapshots_behind) == (pin, pin + 3, 3)
    assert orders.table_changed and orders.owner_table_snapshot == pin + 2
    assert orders.behind_seconds == 90.0 and orders.behind_since == moved_on_at.isoformat()
    # a raw-SQL write is not a managed materialize: the lake moved on, the table reads unchanged
    assert (customers.snapshots_behind, customers.table_changed) == (3, False)
    assert [d.table for d in report.stale_deferred] == ["main.orders"]

    service.repin("wm-fork-pin", actor="alice")
    after = lake_staleness("wm-fork-pin", "main", lake_env.config)
    assert [(d.snapshots_behind, d.table_changed) for d in after.deferred] == [(0, False), (0, False)]


def test_fork_built_table_reports_upstream_changed_after_parent_commits(lake_env, service):
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(5)")
    materialize(lake_env, "prod", "other", "SELECT 1 AS x")
    service.create_fork("wm-fork-live", "prod", owner="alice")
    materialize(lake_env, "wm-fork-live", "mart.summary", "SELECT count(*) AS n FROM lake_main.orders")
    built = current_snapshot(lake_env)
    report = lake_staleness("wm-fork-live", "main", lake_env.config)
    assert report.mode == "live"
    (summary,) = report.built
    assert summary.built_from == {"prod": built} and not summary.upstream_changed

    materialize(lake_env, "prod", "orders", "SELECT 1 AS id")
    materialize(lake_env, "prod", "other", "SELECT 2 AS x")
    report = lake_staleness("wm-fork-live", "main", lake_env.config)
    (summary,) = report.built
    assert summary.changed_upstreams == (f"prod:main.orders@{built + 1}", f"prod:main.other@{built + 2}")
    orders = next(d for d in report.deferred if d.table == "main.orders")
    assert (orders.reference_snapshot, orders.snapshots_behind, orders.table_changed) == (built, 2, True)
    # lineage narrows it to what the table reads
    lineage = {TableName("mart", "summary"): [TableName("main", "orders")]}
    narrowed = lake_staleness("wm-fork-live", "main", lake_env.config, upstreams=lineage, catalog=False)
    assert narrowed.built[0].changed_upstreams == (f"prod:main.orders@{built + 1}",)
    assert narrowed.deferred[0].snapshots_behind is None  # catalog=False: control store only

    materialize(lake_env, "wm-fork-live", "mart.summary", "SELECT count(*) AS n FROM lake_main.orders")
    assert not lake_staleness("wm-fork-live", "main", lake_env.config, catalog=False).built[0].upstream_changed


def test_a_live_fork_that_built_nothing_is_never_stale(embedded_lake, service):
    materialize(embedded_lake, "prod", "orders", "SELECT 1 AS id")
    service.create_fork("wm-fork-live", "prod", owner="alice")
    materialize(embedded_lake, "prod", "orders", "SELECT 2 AS id")
    (orders,) = lake_staleness("wm-fork-live", "main", embedded_lake.config).deferred
    assert (orders.reference_snapshot, orders.snapshots_behind, orders.table_changed) == (None, 0, False)
    assert lake_staleness("prod", "main", embedded_lake.config).mode == "own"


def test_the_asset_check_warns_and_never_errors(embedded_lake, service, monkeypatch):
    from dagster import AssetCheckSeverity, AssetKey

    from dpone_dagster.integration.lake.resources import DuckLakeResource
    from dpone_dagster.integration.lake.staleness import staleness_check_results

    materialize(embedded_lake, "prod", "orders", "SELECT 1 AS id")
    service.create_fork("wm-fork-chk", "prod", owner="alice", pin=True)
    materialize(embedded_lake, "wm-fork-chk", "mart.summary", "SELECT count(*) AS n FROM lake_main.orders")
    keys = [AssetKey(["main", "main", "orders"]), AssetKey(["main", "mart", "summary"])]
    deps = {keys[1]: [keys[0]]}
    monkeypatch.setenv("DPONE_WORKSPACE", "wm-fork-chk")
    fresh = staleness_check_results(DuckLakeResource(), keys, deps)
    assert [r.passed for r in fresh] == [True, True]

    materialize(embedded_lake, "prod", "orders", "SELECT 2 AS id")
    results = staleness_check_results(DuckLakeResource(), keys, deps)
    assert [(r.asset_key, r.passed, r.severity) for r in results] == [
        (keys[0], False, AssetCheckSeverity.WARN),
        (keys[1], False, AssetCheckSeverity.WARN),
    ]
    assert results[1].metadata["changed_upstreams"].value.startswith("prod:main.orders@")

    monkeypatch.setenv("DPONE_WORKSPACE", "prod")
    assert all(r.passed for r in staleness_check_results(DuckLakeResource(), keys, deps))


def test_the_fork_sensor_reports_staleness(embedded_lake, service, monkeypatch):
    from dagster import AssetKey, build_sensor_context

    from dpone_dagster.integration.lake.resources import DuckLakeResource
    from dpone_dagster.integration.lake.sensors import build_fork_state_sensor

    materialize(embedded_lake, "prod", "orders", "SELECT 1 AS id")
    service.create_fork("wm-fork-sns", "prod", owner="alice", pin=True)
    monkeypatch.setenv("DPONE_WORKSPACE", "wm-fork-sns")
    sensor = build_fork_state_sensor(lambda: [AssetKey(["main", "main", "orders"])], workspace="wm-fork-sns")
    first = sensor(build_sensor_context(resources={"ducklake": DuckLakeResource()}))
    assert "staleness: 0 deferred table(s) changed" in first.skip_reason.skip_message
    materialize(embedded_lake, "prod", "orders", "SELECT 2 AS id")
    second = sensor(build_sensor_context(cursor=first.cursor, resources={"ducklake": DuckLakeResource()}))
    assert "staleness: 1 deferred table(s) changed in their owner" in second.skip_reason.skip_message
    quiet = sensor(build_sensor_context(cursor=second.cursor, resources={"ducklake": DuckLakeResource()}))
    assert quiet.skip_reason.skip_message.startswith("no ancestor materialized since")
    assert "staleness: 1 deferred table(s) changed in their owner" in quiet.skip_reason.skip_message
