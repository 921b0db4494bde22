"""Per-table degradation (a deferred table gone from its owner), quoted names in steady state, and
the attach refusals: `METADATA_PATH` in fork settings, a lake alias already attached elsewhere."""

from __future__ import annotations

import pytest

from dpone_dagster.errors import LakeError
from dpone_dagster.lake.duck import connect
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.lake.state.table_states import lake_table_states
from dpone_dagster.lake.state.tracking import fork_state, record_materialization
from dpone_dagster.workspaces.service import Workspaces

from .lakes import attached, fingerprint, materialize, run_sql, set_lake_settings

FORK = "wm-fork-a"


def test_a_table_dropped_out_of_band_in_the_owner_loses_only_its_own_view(lake_env):
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(5)")
    materialize(lake_env, "prod", "customers", "SELECT 1 AS id")
    Workspaces(lake_env.config).create_fork(FORK, "prod", owner="alice")
    Workspaces(lake_env.config).create_fork("wm-fork-a/b", FORK, owner="bob")
    run_sql(lake_env, "prod", "DROP TABLE lake_main.main.customers")  # out of band: tracking unchanged

    materialize(lake_env, FORK, "order_count", "SELECT count(*) AS n FROM lake_main.orders")
    assert run_sql(lake_env, FORK, [], fetch="SELECT n FROM lake_main.order_count") == [(5,)]
    state = fork_state(FORK, "main", "main", "customers", lake_env.config)
    assert (state.state, state.owner) == ("missing", "prod")
    assert lake_table_states(FORK, "main", lake_env.config).of(state_table("customers")).state.state == "missing"
    assert fork_state(FORK, "main", "main", "orders", lake_env.config).state == "deferred"
    warnings = resolve("wm-fork-a/b", config=lake_env.config).warnings
    assert any("customers" in w and "missing" in w for w in warnings)
    assert run_sql(lake_env, "wm-fork-a/b", [], fetch="SELECT n FROM lake_main.order_count") == [(5,)]

    materialize(lake_env, "prod", "customers", "SELECT 2 AS id")  # the owner brings it back
    assert fork_state(FORK, "main", "main", "customers", lake_env.config).state == "deferred"
    assert run_sql(lake_env, FORK, [], fetch="SELECT id FROM lake_main.customers") == [(2,)]


def state_table(name: str):
    from dpone_dagster.lake.resolution.plan import TableName

    return TableName("main", name)


def test_quoted_names_reach_steady_state(lake_env):
    run_sql(
        lake_env,
        "prod",
        [
            'CREATE SCHEMA IF NOT EXISTS lake_main."Mart"',
            'CREATE TABLE lake_main."Mart"."Order-Items" AS SELECT 1 AS id, true AS is_current',
        ],
        targets=["Mart.Order-Items"],
    )
    record_materialization(
        "prod",
        "main",
        "Mart",
        "Order-Items",
        status="materialized",
        snapshot_id=None,
        columns=[("id", "INTEGER"), ("is_current", "BOOLEAN")],
        config=lake_env.config,
    )
    Workspaces(lake_env.config).create_fork(FORK, "prod", owner="alice")
    first = resolve(FORK, config=lake_env.config)
    assert {str(v.name) for v in first.views} == {"Mart.Order-Items", "Mart.Order-Items_current"}
    with attached(lake_env, FORK) as conn:
        assert conn.execute('SELECT count(*) FROM lake_main."Mart"."Order-Items_current"').fetchone() == (1,)
    snapshots = fingerprint(lake_env, FORK).snapshots

    steady = resolve(FORK, config=lake_env.config)
    assert steady.views == () and not any("VIEW" in s for s in steady.statements())
    with attached(lake_env, FORK):
        pass
    assert fingerprint(lake_env, FORK).snapshots == snapshots


def test_metadata_path_in_fork_settings_is_stripped(embedded_lake):
    env = embedded_lake
    materialize(env, "prod", "orders", "SELECT 1 AS id")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    parent_catalog = resolve("prod", config=env.config).catalog.target
    hostile = env.lake.model_copy(
        update={"attach_args": {"DATA_INLINING_ROW_LIMIT": 0, "metadata_path": parent_catalog}}
    )
    set_lake_settings(env, FORK, hostile)
    assert "METADATA_PATH" not in resolve(FORK, config=env.config).target.render().upper()
    before = fingerprint(env)
    materialize(env, FORK, "orders", "SELECT 2 AS id")
    assert fingerprint(env) == before
    assert run_sql(env, "prod", [], fetch="SELECT id FROM lake_main.orders") == [(1,)]


def test_apply_refuses_a_connection_with_the_alias_attached_elsewhere(embedded_lake):
    env = embedded_lake
    materialize(env, "prod", "orders", "SELECT 1 AS id")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    prod, fork = resolve("prod", config=env.config), resolve(FORK, config=env.config)
    conn = connect(extensions=prod.extensions)
    try:
        prod.apply(conn)
        prod.apply(conn)  # the same target again is fine
        with pytest.raises(LakeError) as caught:
            fork.apply(conn)
        assert caught.value.code == "lake.alias_attached_elsewhere"
        conn.execute("DETACH lake_main")
        conn.execute("ATTACH ':memory:' AS lake_main")  # anything else under the alias
        with pytest.raises(LakeError):
            prod.apply(conn)
    finally:
        conn.close()
