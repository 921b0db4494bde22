"""Fork-aware dbt: in a fork, the selected models build into the fork's own namespace.

The root (`prod`) has every dbt asset materialized (the session's `built_prod_lake`); then a fork
materializes only `marts.daily_revenue` and the SCD2 `marts.dim_customers_scd2`. Their upstream
tables are read through defer views onto prod, prod is not written, and the fork's materializations
are recorded (so it no longer defers those tables, nor lays the SCD2 `_current` companion view over
its own table).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import AssetKey
from dbt_lakes import LakeSetup, materialize_synthetic_dbt

FORK = "wm-fork-dbt-test"
TARGET = AssetKey(["main", "marts", "daily_revenue"])
SCD2 = AssetKey(["main", "marts", "dim_customers_scd2"])


def _snapshot(setup: LakeSetup, workspace: str) -> int:
    conn = setup.connect(workspace=workspace)
    try:
        return conn.execute("SELECT max(snapshot_id) FROM lake_main.snapshots()").fetchone()[0]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def forked(built_prod_lake):
    from dpone_dagster.config import load_config
    from dpone_dagster.workspaces.service import Workspaces

    root, built = built_prod_lake
    assert built.success
    with root.applied():
        Workspaces(load_config()).create_fork(FORK, "prod", owner="tester")
    prod_snapshot = _snapshot(root, "prod")
    fork = LakeSetup(root.state_dir, extra_env={"DPONE_WORKSPACE": FORK})
    result = materialize_synthetic_dbt(fork, selection=[TARGET, SCD2])
    return root, fork, result, prod_snapshot


def test_only_the_selected_models_materialize_in_the_fork(forked):
    _, _, result, _ = forked
    assert result.success
    events = result.get_asset_materialization_events()
    assert sorted(e.asset_key.to_user_string() for e in events) == sorted(k.to_user_string() for k in (TARGET, SCD2))
    for event in events:
        metadata = {k: v.value for k, v in event.materialization.metadata.items()}
        assert metadata["workspace"] == FORK
        assert metadata["fork_state"] == "fork_materialized"
        assert metadata["namespace"].startswith("wm_fork_")
        assert isinstance(metadata["snapshot_id"], int)
    checks = result.get_asset_check_evaluations()
    assert checks and all(c.asset_key in (TARGET, SCD2) and c.passed for c in checks)


def test_the_fork_reads_upstream_through_defer_views_and_owns_its_target(forked):
    root, fork, _, _ = forked
    conn = fork.connect(workspace=FORK)
    try:
        kinds = dict(
            conn.execute(
                "SELECT table_schema || '.' || table_name, table_type FROM information_schema.tables "
                "WHERE table_catalog = 'lake_main'"
            ).fetchall()
        )
        fork_rows = conn.execute("SELECT * FROM lake_main.marts.daily_revenue ORDER BY ALL").fetchall()
        upstream = conn.execute("SELECT count(*) FROM lake_main.staging.stg_payments").fetchone()[0]
        files = [
            r[0]
            for r in conn.execute(
                "SELECT data_file FROM ducklake_list_files('lake_main', 'daily_revenue', schema => 'marts')"
            ).fetchall()
        ]
    finally:
        conn.close()
    assert kinds["marts.daily_revenue"] == kinds["marts.dim_customers_scd2"] == "BASE TABLE"
    assert kinds["staging.stg_payments"] == kinds["staging.stg_customers"] == "VIEW"
    assert "marts.dim_customers_scd2_current" not in kinds
    assert upstream == root.rows("SELECT count(*) FROM lake_main.staging.stg_payments")[0][0]
    assert fork_rows == root.rows("SELECT * FROM lake_main.marts.daily_revenue ORDER BY ALL")
    parent_data = Path(root.config().embedded_main_lake().data_path).resolve()
    assert files and all("__wm_forks" in f and not Path(f).resolve().is_relative_to(parent_data) for f in files)


def test_prod_is_not_written_by_the_fork_run(forked):
    root, _, _, prod_snapshot = forked
    assert _snapshot(root, "prod") == prod_snapshot
