"""The Dagster surface: DuckLakeResource in prod and in a fork, and the fork-drop job."""

from __future__ import annotations

from dagster import MaterializeResult, asset, materialize

from dpone_dagster.config import load_config
from dpone_dagster.defs.lake import build_defs
from dpone_dagster.integration.lake.jobs import build_drop_fork_job
from dpone_dagster.integration.lake.resources import DuckLakeResource
from dpone_dagster.lake.resolution.naming import fork_metadata_schema
from dpone_dagster.workspaces.service import Workspaces


@asset
def orders(ducklake: DuckLakeResource) -> MaterializeResult:
    with ducklake.connect("main", targets=["orders"]) as conn:
        conn.execute("CREATE OR REPLACE TABLE orders AS SELECT range AS id FROM range(25)")
        return MaterializeResult(metadata=ducklake.record_materialization(conn, "orders"))


@asset(deps=[orders])
def order_count(ducklake: DuckLakeResource) -> MaterializeResult:
    with ducklake.connect("main", targets=["order_count"]) as conn:
        conn.execute("CREATE OR REPLACE TABLE order_count AS SELECT count(*) AS n FROM orders")
        metadata = ducklake.record_materialization(conn, "order_count")
        metadata["n"] = conn.execute("SELECT n FROM order_count").fetchone()[0]
        return MaterializeResult(metadata=metadata)


def _metadata(result, key):
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key.path == [key]]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_resource_in_prod_then_in_a_fork_that_defers_upstream(monkeypatch):
    prod = materialize([orders, order_count], resources={"ducklake": DuckLakeResource()})
    assert prod.success
    meta = _metadata(prod, "order_count")
    assert meta["workspace"] == "prod" and meta["fork_state"] == "own" and meta["n"] == 25
    assert isinstance(meta["snapshot_id"], int)

    Workspaces(load_config()).create_fork("wm-fork-dag", "prod", owner="alice")
    monkeypatch.setenv("DPONE_WORKSPACE", "wm-fork-dag")
    fork = DuckLakeResource()
    run = materialize([order_count], resources={"ducklake": fork}, selection=[order_count.key])
    assert run.success
    meta = _metadata(run, "order_count")
    assert meta["workspace"] == "wm-fork-dag" and meta["fork_state"] == "fork_materialized"
    assert (
        meta["namespace"] == fork_metadata_schema("wm-fork-dag", "main", _incarnation("wm-fork-dag"))
        and meta["n"] == 25
    )
    with fork.connect() as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (25,)
    from dpone_dagster.lake.state.tracking import fork_state

    assert fork_state("wm-fork-dag", "main", "main", "orders").state == "deferred"


def test_drop_job_deletes_the_fork_and_fails_visibly_when_refused(monkeypatch):
    assert build_defs().resolve_job_def("drop_fork_job") is not None
    Workspaces(load_config()).create_fork("wm-fork-job", "prod", owner="alice")
    monkeypatch.setenv("DPONE_WORKSPACE", "wm-fork-job")
    with DuckLakeResource().connect() as conn:
        conn.execute("CREATE TABLE t AS SELECT 1 AS x")
    monkeypatch.delenv("DPONE_WORKSPACE")
    drop_fork_job = build_drop_fork_job()

    def run(actor):
        return drop_fork_job.execute_in_process(
            run_config={
                "ops": {"drop_fork_namespaces_op": {"config": {"workspace_id": "wm-fork-job", "actor": actor}}}
            },
            raise_on_error=False,
        )

    refused = run("mallory")
    assert not refused.success
    assert [w.id for w in Workspaces(load_config()).list()] == ["prod", "wm-fork-job"]
    assert run("alice").success
    assert [w.id for w in Workspaces(load_config()).list()] == ["prod"]


def _incarnation(workspace_id: str) -> str:
    from dpone_dagster.control.store import open_store
    from dpone_dagster.control.workspace_tables import incarnation_state

    with open_store(load_config().control_store).connect() as conn:
        found = incarnation_state(conn, workspace_id)
    return found[0] if found else ""
