"""Fork-mode resolution on both backends: write redirect, defer, transition, chains, orphans, sharing."""

from __future__ import annotations

import duckdb
import pytest

from dpone_dagster.errors import LakeError
from dpone_dagster.lake.resolution.naming import ancestor_alias
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.lake.state.tracking import fork_state
from dpone_dagster.workspaces.service import Workspaces

from .lakes import fingerprint, fork_prefix, fork_schema, materialize, rows, run_sql, set_lake_settings


def test_fork_defers_to_the_parents_current_rows_and_never_writes_it(lake_env, service):
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(50)")
    materialize(lake_env, "prod", "mart.revenue", "SELECT 7 AS total")
    service.create_fork("wm-fork-a", "prod", owner="alice")
    before = fingerprint(lake_env)

    resolved = resolve("wm-fork-a", config=lake_env.config)
    assert resolved.fork_mode and resolved.namespace == fork_schema(lake_env, "wm-fork-a")
    assert resolved.data_path.startswith(fork_prefix(lake_env, "wm-fork-a"))
    assert rows(lake_env, "wm-fork-a", "SELECT count(*), sum(id) FROM lake_main.orders") == [(50, 1225)]
    assert rows(lake_env, "wm-fork-a", "SELECT total FROM lake_main.mart.revenue") == [(7,)]
    assert fork_state("wm-fork-a", "main", "main", "orders", lake_env.config).state == "deferred"

    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(3)")
    assert rows(lake_env, "wm-fork-a", "SELECT count(*) FROM lake_main.orders") == [(3,)]

    after_parent_write = fingerprint(lake_env)
    materialize(lake_env, "wm-fork-a", "orders", "SELECT 42 AS id")
    materialize(lake_env, "wm-fork-a", "scratch", "SELECT range AS n FROM range(20)")
    assert fingerprint(lake_env) == after_parent_write
    assert before != after_parent_write
    assert rows(lake_env, "wm-fork-a", "SELECT id FROM lake_main.orders") == [(42,)]
    assert rows(lake_env, "prod", "SELECT count(*) FROM lake_main.orders") == [(3,)]
    fork_files = lake_env.list_files(resolved.data_path)
    assert fork_files and all(f.startswith(resolved.data_path) for f in fork_files)
    assert fork_state("wm-fork-a", "main", "main", "orders", lake_env.config).state == "fork_materialized"
    assert fork_state("prod", "main", "main", "orders", lake_env.config).state == "own"


def test_parent_attach_is_read_only(embedded_lake, service):
    materialize(embedded_lake, "prod", "orders", "SELECT 1 AS id")
    service.create_fork("wm-fork-a", "prod", owner="alice")
    alias = ancestor_alias("main", "prod")
    with pytest.raises(duckdb.Error, match="read-only"):
        run_sql(embedded_lake, "wm-fork-a", f"INSERT INTO {alias}.orders VALUES (2)")
    assert rows(embedded_lake, "prod", "SELECT count(*) FROM lake_main.orders") == [(1,)]


def test_transition_replaces_the_defer_view_with_a_table(lake_env, service):
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(5)")
    service.create_fork("wm-fork-a", "prod", owner="alice")
    run_sql(lake_env, "wm-fork-a", [])
    with pytest.raises(duckdb.Error, match="View"):
        run_sql(lake_env, "wm-fork-a", "CREATE OR REPLACE TABLE lake_main.orders AS SELECT 1 AS id")

    planned = resolve("wm-fork-a", config=lake_env.config, targets=["orders"])
    assert [str(t) for t in planned.transition] == ["main.orders"]
    assert "DROP VIEW lake_main.main.orders" in planned.statements()
    materialize(lake_env, "wm-fork-a", "orders", "SELECT 99 AS id")
    assert rows(lake_env, "wm-fork-a", "SELECT id FROM lake_main.orders") == [(99,)]
    again = resolve("wm-fork-a", config=lake_env.config, targets=["orders"])
    assert again.transition == () and not any("DROP VIEW" in s for s in again.statements())


def test_failed_first_fork_run_does_not_wedge_the_table(embedded_lake, service):
    materialize(embedded_lake, "prod", "orders", "SELECT range AS id FROM range(5)")
    service.create_fork("wm-fork-a", "prod", owner="alice")
    run_sql(embedded_lake, "wm-fork-a", [])
    with pytest.raises(duckdb.Error):
        run_sql(embedded_lake, "wm-fork-a", "SELECT no_such_column FROM range(1)", targets=["orders"])
    from dpone_dagster.lake.state.tracking import record_materialization

    record_materialization(
        "wm-fork-a",
        "main",
        "main",
        "orders",
        status="failed",
        snapshot_id=None,
        columns=[],
        config=embedded_lake.config,
    )
    assert fork_state("wm-fork-a", "main", "main", "orders", embedded_lake.config).state == "absent"
    retry = resolve("wm-fork-a", config=embedded_lake.config, targets=["orders"])
    assert retry.transition == ()
    materialize(embedded_lake, "wm-fork-a", "orders", "SELECT 1 AS id")
    assert rows(embedded_lake, "wm-fork-a", "SELECT id FROM lake_main.orders") == [(1,)]


def test_chain_grandchild_reads_root_owned_table_through_the_nearest_owner(lake_env, service):
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(10)")
    materialize(lake_env, "prod", "customers", "SELECT 'root' AS who")
    service.create_fork("dev/team", "prod", owner="alice")
    materialize(lake_env, "dev/team", "customers", "SELECT 'parent' AS who")
    service.create_fork("wm-fork-team/x", "dev/team", owner="bob")
    before = fingerprint(lake_env)
    before_parent = fingerprint(lake_env, "dev/team")

    resolved = resolve("wm-fork-team/x", config=lake_env.config)
    owners = {str(v.name): v.owner_workspace for v in resolved.views}
    assert owners == {"main.orders": "prod", "main.customers": "dev/team"}
    assert [a.workspace_id for a in resolved.ancestors] == ["dev/team", "prod"]
    assert rows(lake_env, "wm-fork-team/x", "SELECT count(*) FROM lake_main.orders") == [(10,)]
    assert rows(lake_env, "wm-fork-team/x", "SELECT who FROM lake_main.customers") == [("parent",)]
    state = fork_state("wm-fork-team/x", "main", "main", "orders", lake_env.config)
    assert (state.state, state.owner) == ("deferred", "prod")

    materialize(lake_env, "wm-fork-team/x", "orders", "SELECT 0 AS id")
    assert fingerprint(lake_env) == before
    assert fingerprint(lake_env, "dev/team") == before_parent


def test_nearest_owner_change_repoints_a_live_view(embedded_lake, service):
    materialize(embedded_lake, "prod", "orders", "SELECT 'root' AS who")
    service.create_fork("dev/team", "prod", owner="alice")
    service.create_fork("wm-fork-x", "dev/team", owner="bob")
    assert rows(embedded_lake, "wm-fork-x", "SELECT who FROM lake_main.orders") == [("root",)]
    materialize(embedded_lake, "dev/team", "orders", "SELECT 'parent' AS who")
    replanned = resolve("wm-fork-x", config=embedded_lake.config)
    assert [v.replace for v in replanned.views] == [True]
    assert rows(embedded_lake, "wm-fork-x", "SELECT who FROM lake_main.orders") == [("parent",)]
    steady = resolve("wm-fork-x", config=embedded_lake.config)
    assert steady.views == ()


def test_scd2_owner_gets_a_current_companion(embedded_lake, service):
    materialize(
        embedded_lake,
        "prod",
        "customers_history",
        "SELECT range AS id, range % 2 = 0 AS is_current FROM range(6)",
    )
    service.create_fork("wm-fork-a", "prod", owner="alice")
    assert rows(embedded_lake, "wm-fork-a", "SELECT count(*) FROM lake_main.customers_history_current") == [(3,)]
    planned = resolve("wm-fork-a", config=embedded_lake.config, targets=["customers_history"])
    assert {str(t) for t in planned.transition} == {
        "main.customers_history",
        "main.customers_history_current",
    }


def test_only_tracked_materialized_tables_defer(embedded_lake, service):
    run_sql(embedded_lake, "prod", "CREATE TABLE lake_main.untracked AS SELECT 1 AS x")
    materialize(embedded_lake, "prod", "broken", "SELECT 1 AS x", status="failed")
    service.create_fork("wm-fork-a", "prod", owner="alice")
    assert resolve("wm-fork-a", config=embedded_lake.config).views == ()
    for table in ("untracked", "broken"):
        assert fork_state("wm-fork-a", "main", "main", table, embedded_lake.config).state == "absent"
        with pytest.raises(duckdb.Error):
            rows(embedded_lake, "wm-fork-a", f"SELECT * FROM lake_main.{table}")


def test_orphaned_fork_stays_isolated(lake_env, service):
    materialize(lake_env, "prod", "orders", "SELECT 1 AS id")
    service.create_fork("wm-fork-a", "prod", owner="alice")
    service.create_fork("wm-fork-a/b", "wm-fork-a", owner="bob")
    run_sql(lake_env, "wm-fork-a/b", [])
    result = service.drop("wm-fork-a", actor="alice")
    assert result.orphaned == ("wm-fork-a/b",) and result.cleanup.complete
    before = fingerprint(lake_env)

    resolved = resolve("wm-fork-a/b", config=lake_env.config, targets=["orders"])
    assert resolved.fork_mode and resolved.ancestors == () and resolved.views == ()
    assert [str(t) for t in resolved.transition] == ["main.orders"]
    with pytest.raises(duckdb.Error):
        rows(lake_env, "wm-fork-a/b", "SELECT * FROM lake_main.orders")
    materialize(lake_env, "wm-fork-a/b", "orders", "SELECT 5 AS id")
    assert rows(lake_env, "wm-fork-a/b", "SELECT id FROM lake_main.orders") == [(5,)]
    assert fingerprint(lake_env) == before


def test_shared_lake_writes_the_parent_and_a_fork_of_it_is_isolated_again(lake_env, service):
    service.create_fork("wm-fork-s", "prod", owner="alice", shared_lakes=["main"])
    shared = resolve("wm-fork-s", config=lake_env.config)
    assert not shared.fork_mode and shared.namespace == "" and shared.ancestors == ()
    materialize(lake_env, "wm-fork-s", "orders", "SELECT 11 AS id")
    assert rows(lake_env, "prod", "SELECT id FROM lake_main.orders") == [(11,)]

    service.create_fork("wm-fork-s/child", "wm-fork-s", owner="bob")
    child = resolve("wm-fork-s/child", config=lake_env.config)
    assert child.fork_mode
    assert [a.workspace_id for a in child.ancestors] == ["wm-fork-s"]
    assert rows(lake_env, "wm-fork-s/child", "SELECT id FROM lake_main.orders") == [(11,)]
    before = fingerprint(lake_env)
    materialize(lake_env, "wm-fork-s/child", "orders", "SELECT 12 AS id")
    assert fingerprint(lake_env) == before


def test_unreachable_ancestor_only_loses_its_own_defer(embedded_lake, service):
    from dpone_dagster.lake.catalogs import CatalogAdapters, CatalogUnreachableError
    from dpone_dagster.lake.resolution.fork import LakePorts, resolve_workspace_lake
    from dpone_dagster.lake.resolution.plan import parse_targets

    materialize(embedded_lake, "prod", "orders", "SELECT 1 AS id")
    service.create_fork("dev/team", "prod", owner="alice")
    materialize(embedded_lake, "dev/team", "customers", "SELECT 2 AS id")
    service.create_fork("wm-fork-x", "dev/team", owner="bob")
    team_schema = fork_schema(embedded_lake, "dev/team")

    real = CatalogAdapters()

    class TeamCatalogDown:
        def __init__(self, inner):
            self.inner = inner

        def inspect(self, namespaces, views_of):
            labels = {ns.schema or ns.catalog.target for ns in namespaces}
            if any(team_schema in label for label in labels):
                raise CatalogUnreachableError("down")
            return self.inner.inspect(namespaces, views_of)

        def live_views(self, namespace):
            return self.inner.live_views(namespace)

        def drop_namespace(self, namespace):
            return self.inner.drop_namespace(namespace)

    adapters = CatalogAdapters(duckdb=TeamCatalogDown(real.duckdb))
    resolved = resolve_workspace_lake(
        "wm-fork-x", "main", embedded_lake.config, parse_targets(()), LakePorts(catalogs=adapters)
    )
    assert [str(v.name) for v in resolved.views] == ["main.orders"]
    assert any("dev/team" in w for w in resolved.warnings)


def test_sqlite_and_mysql_catalogs_are_refused_in_forks_but_may_be_shared(embedded_lake, tmp_path):
    lake = embedded_lake.lake.model_copy(
        update={"catalog": f"sqlite:{tmp_path}/cat.sqlite", "storage": None, "data_path": str(tmp_path / "data") + "/"}
    )
    config = embedded_lake.config.model_copy(update={"lakes": (lake,)})
    service = Workspaces(config)
    service.create_fork("wm-fork-a", "prod", owner="alice")
    service.create_fork("wm-fork-b", "prod", owner="alice", shared_lakes=["main"])
    with pytest.raises(LakeError) as caught:
        resolve("wm-fork-a", config=config)
    assert caught.value.code == "lake.fork_unsupported_catalog"
    assert not resolve("wm-fork-b", config=config).fork_mode


def test_reserved_options_in_fork_settings_are_stripped(lake_env, service):

    materialize(lake_env, "prod", "orders", "SELECT 1 AS id")
    service.create_fork("wm-fork-a", "prod", owner="alice")
    hostile = lake_env.lake.model_copy(
        update={
            "attach_args": {
                "metadata_schema": "public",
                "DATA_INLINING_ROW_LIMIT": 0,
                "Data_Path": lake_env.lake.data_path,
                "override_DATA_PATH": True,
            }
        }
    )
    set_lake_settings(lake_env, "wm-fork-a", hostile)
    resolved = resolve("wm-fork-a", config=lake_env.config)
    target = resolved.target.render()
    assert "public" not in target and "override" not in target.lower()
    assert target.count("DATA_PATH") == 1 and f"DATA_PATH '{resolved.data_path}'" in target
    before = fingerprint(lake_env)
    materialize(lake_env, "wm-fork-a", "orders", "SELECT 2 AS id")
    assert fingerprint(lake_env) == before


def test_unknown_workspace_is_refused(embedded_lake):
    with pytest.raises(Exception) as caught:
        resolve("wm-fork-nobody", config=embedded_lake.config)
    assert caught.value.code == "workspace.unknown"
