"""`dpone fork promote`: as the parent, with the reviewed diff id, all tables or none, never sharing
a file with the fork; on the embedded default and on PostgreSQL + S3."""

from __future__ import annotations

import pytest

from dpone_dagster.errors import DponeError
from dpone_dagster.lake.lifecycle.diff import fork_diff
from dpone_dagster.lake.lifecycle.promote import PromotePorts, promote, promotions
from dpone_dagster.lake.state.tracking import fork_state
from dpone_dagster.workspaces.service import Workspaces

from .lakes import fingerprint, fork_prefix, materialize, run_error_text, run_sql

FORK = "wm-fork-promote"


def as_ws(env, workspace):
    return env.config.model_copy(update={"workspace": workspace})


@pytest.fixture
def forked(lake_env):
    env = lake_env
    materialize(env, "prod", "orders", "SELECT range AS id, range * 10 AS amount FROM range(5)")
    materialize(env, "prod", "customers", "SELECT range AS id FROM range(3)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, "orders", "SELECT range AS id, range * 11 AS amount FROM range(6)")
    materialize(env, FORK, "summary", "SELECT count(*) AS n FROM lake_main.main.customers")
    return env


def reviewed(env, *tables) -> str:
    return fork_diff(FORK, tables, key=["id"] if tables == ("orders",) else None, config=as_ws(env, FORK)).diff_id


def parent_rows(env, table):
    return run_sql(env, "prod", [], fetch=f"SELECT * FROM lake_main.main.{table} ORDER BY ALL")


@pytest.mark.slow  # about 20 s on PostgreSQL + S3 (one setup for every step, instead of one per step)
def test_promotion_refusals_atomicity_publication_and_a_later_fork_drop(forked):
    """On both backends, in order: every refusal leaves the parent byte-identical; an injected
    failure on the second table leaves neither visible; then both publish in one snapshot, with
    provenance, into files of the parent's own, and survive dropping the fork."""
    env = forked
    diff_id = reviewed(env, "orders", "summary")
    before = fingerprint(env)

    with pytest.raises(DponeError) as from_fork:
        promote(FORK, ["orders"], diff_id, config=as_ws(env, FORK))
    assert from_fork.value.code == "fork.promotion_not_parent"
    with pytest.raises(DponeError) as unknown:
        promote(FORK, ["orders"], "sha256:" + "0" * 64, config=env.config)
    assert unknown.value.code == "fork.diff_unknown"

    def fail_on_second(name):
        if name.table == "summary":
            raise RuntimeError("injected failure after copying the second table")

    with pytest.raises(RuntimeError):
        promote(FORK, ["orders", "summary"], diff_id, config=env.config, ports=PromotePorts(after_copy=fail_on_second))
    after = fingerprint(env)
    assert (after.snapshots, after.catalog_files) == (before.snapshots, before.catalog_files), "neither table visible"
    assert parent_rows(env, "orders") == [(i, i * 10) for i in range(5)]
    assert promotions(env.config, "prod") == []
    assert fingerprint(env) == before, "every refusal left the parent unchanged"

    result = promote(FORK, ["orders", "summary"], diff_id, config=env.config)
    assert {t.table for t in result.tables} == {"main.orders", "main.summary"}
    assert len(fingerprint(env).snapshots) == len(before.snapshots) + 1, "both tables in one DuckLake snapshot"
    assert fork_state("prod", "main", "main", "summary", env.config).state == "own"
    rows = promotions(env.config, "prod")
    assert {(r["table_name"], r["fork_id"], r["diff_id"]) for r in rows} == {
        ("orders", FORK, diff_id),
        ("summary", FORK, diff_id),
    }
    assert all(r["snapshot_id"] == result.snapshot_id and r["fork_snapshot_id"] for r in rows)
    files = run_sql(
        env,
        "prod",
        [],
        fetch="SELECT data_file FROM ducklake_list_files('lake_main', 'orders', schema => 'main')",
    )
    prefix = fork_prefix(env, FORK)
    assert files and not any("__wm_forks" in f or f.startswith(prefix) for (f,) in files)

    assert Workspaces(env.config).drop(FORK, actor="alice").cleanup.complete
    assert parent_rows(env, "orders") == [(i, i * 11) for i in range(6)]
    assert parent_rows(env, "summary") == [(3,)]


@pytest.mark.slow  # about 20 s on PostgreSQL + S3
def test_a_changed_parent_target_is_a_conflict_and_the_parent_stays_unchanged(forked):
    env = forked
    diff_id = reviewed(env, "orders")
    materialize(env, "prod", "orders", "SELECT range AS id, 0 AS amount FROM range(5)")
    before = fingerprint(env)
    with pytest.raises(DponeError) as refused:
        promote(FORK, ["orders"], diff_id, config=env.config)
    assert refused.value.code == "fork.promotion_conflict"
    assert fingerprint(env) == before


def test_a_changed_upstream_the_fork_built_from_is_a_conflict(embedded_lake):
    env = embedded_lake
    materialize(env, "prod", "customers", "SELECT range AS id FROM range(3)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, "summary", "SELECT count(*) AS n FROM lake_main.main.customers")
    diff_id = reviewed(env, "summary")
    materialize(env, "prod", "customers", "SELECT range AS id FROM range(4)")  # summary read it
    before = fingerprint(env)
    with pytest.raises(DponeError) as refused:
        promote(FORK, ["summary"], diff_id, config=env.config)
    assert refused.value.code == "fork.promotion_conflict"
    assert "customers" in refused.value.message
    assert fingerprint(env) == before


def test_a_wrong_or_stale_diff_id_is_refused(embedded_lake, monkeypatch):
    env = embedded_lake
    materialize(env, "prod", "orders", "SELECT range AS id, range * 10 AS amount FROM range(5)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, "orders", "SELECT range AS id, range * 11 AS amount FROM range(6)")
    diff_id = reviewed(env, "orders")
    before = fingerprint(env)
    with pytest.raises(DponeError) as unknown:
        promote(FORK, ["orders"], "sha256:" + "0" * 64, config=env.config)
    assert unknown.value.code == "fork.diff_unknown"
    materialize(env, FORK, "orders", "SELECT range AS id, range * 12 AS amount FROM range(6)")  # after review
    with pytest.raises(DponeError) as stale:
        promote(FORK, ["orders"], diff_id, config=env.config)
    assert stale.value.code == "fork.diff_mismatch"
    with pytest.raises(DponeError) as uncovered:
        promote(FORK, ["other"], diff_id, config=env.config)
    assert uncovered.value.code == "fork.promotion_not_in_diff"
    assert fingerprint(env) == before


def test_the_cli_diffs_in_the_fork_and_promotes_in_the_parent(embedded_lake, monkeypatch):
    import json

    from typer.testing import CliRunner

    from dpone_dagster.cli import app
    from dpone_dagster.config import load_config

    env = embedded_lake.__class__(embedded_lake.kind, load_config(), embedded_lake.list_files)  # what the CLI reads
    materialize(env, "prod", "orders", "SELECT range AS id, range * 10 AS amount FROM range(5)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, "orders", "SELECT range AS id, range * 11 AS amount FROM range(6)")
    runner = CliRunner()
    refused = runner.invoke(app, ["fork", "diff", FORK, "--key", "id"])  # prod's shell
    assert refused.exit_code == 1 and "fork.diff_not_in_fork" in refused.output
    monkeypatch.setenv("DPONE_WORKSPACE", FORK)
    shown = runner.invoke(app, ["fork", "diff", FORK, "orders", "--key", "id", "--json"])
    assert shown.exit_code == 0, shown.output
    document = json.loads(shown.output)
    assert document["tables"][0]["rows"] == {"added": 1, "removed": 0, "changed": 4}
    from_fork = runner.invoke(app, ["fork", "promote", FORK, "orders", "--diff-id", document["diff_id"]])
    assert from_fork.exit_code == 1 and "fork.promotion_not_parent" in from_fork.output
    monkeypatch.delenv("DPONE_WORKSPACE")
    done = runner.invoke(app, ["fork", "promote", FORK, "orders", "--diff-id", document["diff_id"], "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["tables"][0]["rows"] == 6
    assert parent_rows(env, "orders") == [(i, i * 11) for i in range(6)]


@pytest.mark.slow  # two in-process Dagster runs, about 30 s on a loaded machine
def test_the_parent_deployment_job_promotes_and_a_fork_deployment_job_is_refused(embedded_lake, monkeypatch):
    from dagster import AssetKey, DagsterInstance

    from dpone_dagster.config import load_config
    from dpone_dagster.integration.lake.diff import diff_check_results
    from dpone_dagster.integration.lake.promote import build_promote_fork_job
    from dpone_dagster.integration.lake.resources import DuckLakeResource
    from dpone_dagster.lake.lifecycle import diff as diff_module
    from dpone_dagster.lake.resolution.plan import TableName

    # the check keys each table by its model's dbt `unique` test (`unique_keys`, tested in test_diff);
    # the manifest itself is not parsed here (a stale one would cost a `dbt parse`)
    keys_of = {TableName("marts", "customer_lifetime_value"): ("customer_id",)}
    monkeypatch.setattr(diff_module, "manifest_keys", lambda config: keys_of)
    env = embedded_lake.__class__(embedded_lake.kind, load_config(), embedded_lake.list_files)
    clv = "marts.customer_lifetime_value"  # unique test on customer_id
    materialize(env, "prod", clv, "SELECT range AS customer_id, range * 10 AS amount FROM range(5)")
    materialize(env, "prod", "customers", "SELECT range AS id FROM range(3)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, clv, "SELECT range AS customer_id, range * 11 AS amount FROM range(6)")

    monkeypatch.setenv("DPONE_WORKSPACE", FORK)  # the fork's deployment: its check shows the diff
    keys = [AssetKey(["main", "marts", "customer_lifetime_value"]), AssetKey(["main", "main", "customers"])]
    results = {r.asset_key: r for r in diff_check_results(DuckLakeResource(), keys)}
    orders = results[keys[0]]
    assert orders.passed and orders.metadata["rows_added"].value == 1 and orders.metadata["rows_changed"].value == 4
    assert "by key (customer_id)" in orders.metadata["diff"].value
    assert "not materialized in this fork" in results[keys[1]].description
    diff_id = orders.metadata["diff_id"].value
    run_config = {"ops": {"promote_fork_tables_op": {"config": {"fork": FORK, "tables": [clv], "diff_id": diff_id}}}}
    instance = DagsterInstance.ephemeral()
    refused = build_promote_fork_job().execute_in_process(
        run_config=run_config, instance=instance, raise_on_error=False
    )
    assert not refused.success and "fork.promotion_not_parent" in run_error_text(refused)

    monkeypatch.delenv("DPONE_WORKSPACE")  # prod's deployment
    done = build_promote_fork_job().execute_in_process(run_config=run_config, instance=instance)
    assert done.success
    [materialization] = done.asset_materializations_for_node("promote_fork_tables_op")
    assert materialization.asset_key == keys[0]
    assert materialization.metadata["diff_id"].value == diff_id
    assert run_sql(env, "prod", [], fetch=f"SELECT * FROM lake_main.{clv} ORDER BY 1") == [
        (i, i * 11) for i in range(6)
    ]


def test_promotion_into_a_parent_that_is_itself_a_fork(embedded_lake):
    env = embedded_lake
    materialize(env, "prod", "orders", "SELECT range AS id, range * 10 AS amount FROM range(5)")
    service = Workspaces(env.config)
    service.create_fork("dev/alice", "prod", owner="alice")  # a standing dev workspace: deferring to prod
    service.create_fork(FORK, "dev/alice", owner="alice")
    materialize(env, FORK, "orders", "SELECT range AS id, range * 11 AS amount FROM range(6)")
    diff_id = fork_diff(FORK, ["orders"], key=["id"], config=as_ws(env, FORK)).diff_id
    prod_before = fingerprint(env)
    with pytest.raises(DponeError) as from_root:
        promote(FORK, ["orders"], diff_id, config=env.config)  # prod is the grandparent
    assert from_root.value.code == "fork.promotion_not_parent"

    promote(FORK, ["orders"], diff_id, config=as_ws(env, "dev/alice"))
    assert fork_state("dev/alice", "main", "main", "orders", env.config).state == "fork_materialized"
    rows = run_sql(env, "dev/alice", [], fetch="SELECT * FROM lake_main.main.orders ORDER BY 1")
    assert rows == [(i, i * 11) for i in range(6)]
    assert fingerprint(env) == prod_before, "prod, the grandparent, is never written"
