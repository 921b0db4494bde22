"""A dbt run typed in a terminal is tracked like the Dagster asset's: prod's hand-built tables defer to
forks, a fork's hand-built model is `fork_materialized` (what `dpone fork diff` / `promote` read), and
a dbt process the Dagster asset started (`DPONE_DBT_RECORDER=dagster`) records nothing itself.

What a reader could get wrong: the recording happens when the dbt *process* exits (atexit in the
dpone plugin), after dbt wrote run_results.json; these tests therefore run the real `dbt` executable.
"""

from __future__ import annotations

import pytest
from dbt_lakes import LakeSetup

from dpone_dagster.lake.dbt_recording import tables_of_run
from dpone_dagster.lake.resolution.plan import TableName

FORK = "wm-fork-terminal"
OTHER = "wm-fork-terminal-dagster"


def _state(setup: LakeSetup, workspace: str, table: str):
    from dpone_dagster.lake.state.tracking import fork_state

    name = TableName.parse(table)
    return fork_state(workspace, "main", name.schema, name.table, setup.config())


@pytest.mark.slow
def test_terminal_dbt_runs_are_tracked_in_prod_and_in_a_fork(tmp_path):
    from dpone_dagster.lake.state.table_states import lake_table_states
    from dpone_dagster.workspaces.service import Workspaces

    setup = LakeSetup(tmp_path)
    with setup.applied():
        done = setup.dbt("build", "-s", "raw_orders", "stg_orders", "raw_customers", "stg_customers")
        assert "dpone: recorded 4 built and 0 failed table(s)" in done.stderr, done.stderr[-2000:]
        prod = lake_table_states("prod", "main", setup.config())
        assert {str(n) for n in prod.tables} == {
            "raw.raw_orders",
            "staging.stg_orders",
            "raw.raw_customers",
            "staging.stg_customers",
        }
        assert all(state.snapshot_id for state in prod.tables.values())

        workspaces = Workspaces(setup.config())
        workspaces.create_fork(FORK, "prod", owner="tester")
        workspaces.create_fork(OTHER, "prod", owner="tester")
    fork = LakeSetup(tmp_path, extra_env={"DPONE_WORKSPACE": FORK})
    with fork.applied():
        fork.dbt("build", "-s", "stg_orders")
        assert _state(fork, FORK, "staging.stg_orders").state == "fork_materialized"
        deferred = _state(fork, FORK, "raw.raw_orders")
        assert (deferred.state, deferred.owner) == ("deferred", "prod")  # prod's terminal build is what it reads

    under_dagster = LakeSetup(tmp_path, extra_env={"DPONE_WORKSPACE": OTHER, "DPONE_DBT_RECORDER": "dagster"})
    with under_dagster.applied():
        done = under_dagster.dbt("build", "-s", "stg_orders")
        assert "dpone: recorded" not in done.stderr
        assert _state(under_dagster, OTHER, "staging.stg_orders").state == "deferred"  # nothing of its own recorded


def test_a_run_splits_into_built_and_failed_tables_of_its_own_lake_only() -> None:
    manifest = {
        "nodes": {
            "model.p.a": {
                "resource_type": "model",
                "database": "lake_main",
                "schema": "s",
                "name": "a",
                "alias": "a_t",
                "config": {"materialized": "table"},
            },
            "model.p.b": {
                "resource_type": "model",
                "database": "lake_main",
                "schema": "s",
                "name": "b",
                "config": {"materialized": "view"},
            },
            "seed.p.c": {"resource_type": "seed", "database": "lake_main", "schema": "raw", "name": "c", "config": {}},
            "model.p.e": {
                "resource_type": "model",
                "database": "lake_main",
                "schema": "s",
                "name": "e",
                "config": {"materialized": "ephemeral"},
            },
            "model.p.o": {"resource_type": "model", "database": "lake_other", "schema": "s", "name": "o", "config": {}},
            "test.p.t": {"resource_type": "test", "database": "lake_main", "schema": "s", "name": "t", "config": {}},
            "model.p.f": {"resource_type": "model", "database": "lake_main", "schema": "s", "name": "f", "config": {}},
            "model.p.k": {"resource_type": "model", "database": "lake_main", "schema": "s", "name": "k", "config": {}},
        }
    }
    results = {
        "results": [
            {"unique_id": uid, "status": status}
            for uid, status in (
                ("model.p.a", "success"),
                ("model.p.b", "success"),
                ("seed.p.c", "success"),
                ("model.p.e", "success"),
                ("model.p.o", "success"),
                ("test.p.t", "pass"),
                ("model.p.f", "error"),
                ("model.p.k", "skipped"),
            )
        ]
    }
    run = tables_of_run(results, manifest, "lake_main")
    assert [str(n) for n in run.built] == ["raw.c", "s.a_t", "s.b"]
    assert [str(n) for n in run.failed] == ["s.f"]
