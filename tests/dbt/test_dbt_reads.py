"""Defer only what a dbt job reads: the read set comes from dbt's graph (`lake/dbt_reads.py`), and a
fork dbt run creates exactly those defer views (counted in the fork catalog afterwards)."""

from __future__ import annotations

import json

import pytest
from dagster import AssetKey
from dbt_lakes import DBT_PROJECT_DIR, LakeSetup, materialize_synthetic_dbt

from dpone_dagster.lake.dbt_reads import dbt_reads

FORK = "wm-fork-dbt-reads"


def _manifest() -> dict:
    return json.loads((DBT_PROJECT_DIR / "target" / "manifest.json").read_text())


def test_reads_are_the_direct_parents_and_the_parents_of_tests_that_touch_the_selection(prepared_manifest):
    manifest = _manifest()
    assert dbt_reads(manifest, ["marts.customer_lifetime_value"]) == ["marts.dim_customers_scd2", "marts.fct_orders"]
    assert dbt_reads(manifest, ["marts.daily_revenue"]) == ["staging.stg_payments"]
    # the relationships test on stg_orders also reads stg_customers
    assert dbt_reads(manifest, ["staging.stg_orders"]) == ["raw.raw_orders", "staging.stg_customers"]
    # a selected parent is a target, not a read
    assert dbt_reads(manifest, ["staging.stg_payments", "marts.daily_revenue"]) == ["raw.raw_payments"]


def test_an_ephemeral_parent_is_read_through_and_sources_count():
    def model(name, parents=(), materialized="table"):
        return {
            "resource_type": "model",
            "schema": "s",
            "name": name,
            "alias": name,
            "config": {"materialized": materialized},
            "depends_on": {"nodes": list(parents)},
        }

    manifest = {
        "nodes": {
            "model.p.top": model("top", ["model.p.eph"]),
            "model.p.eph": model("eph", ["model.p.base", "source.p.raw.events"], materialized="ephemeral"),
            "model.p.base": model("base"),
            "model.p.other": model("other"),
        },
        "sources": {
            "source.p.raw.events": {
                "resource_type": "source",
                "schema": "raw",
                "name": "events",
                "identifier": "events_v2",
            }
        },
    }
    assert dbt_reads(manifest, ["s.top"]) == ["raw.events_v2", "s.base"]


@pytest.mark.slow
def test_a_fork_dbt_run_of_one_model_creates_exactly_its_upstream_views(built_prod_lake):
    from dpone_dagster.config import load_config
    from dpone_dagster.workspaces.service import Workspaces

    root, built = built_prod_lake
    assert built.success
    with root.applied():
        Workspaces(load_config()).create_fork(FORK, "prod", owner="tester")
    fork = LakeSetup(root.state_dir, extra_env={"DPONE_WORKSPACE": FORK})
    result = materialize_synthetic_dbt(fork, selection=[AssetKey(["main", "marts", "customer_lifetime_value"])])
    assert result.success

    views, ((rows,),) = fork.defer_views(FORK, sql="SELECT count(*) FROM lake_main.marts.customer_lifetime_value")
    # 11 tables owned by prod; the run read 2 of them
    assert views == ["marts.dim_customers_scd2", "marts.fct_orders"]
    assert rows == root.rows("SELECT count(*) FROM lake_main.marts.customer_lifetime_value")[0][0]
