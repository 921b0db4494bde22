"""The manifest follows the files: a model edited after the location loaded is seen by the next run.

A run (worker or code-server-spawned) that finds the dbt sources changed since the manifest its
definitions were loaded with refreshes the manifest with dbt's *partial* parse and takes its read
set from it; with nothing changed it parses nothing. Edits happen in a copy of the demo project
(other tests read the real one at the same time).
"""

from __future__ import annotations

import json
import shutil

import pytest
from dagster import AssetKey
from dbt_lakes import DBT_PROJECT_DIR, LakeSetup

from dpone_dagster.integration.dbt.reads import dbt_reads

FORK = "wm-fork-edited-model"
CLV = "marts.customer_lifetime_value"
EDITED_CLV = 'select customer_id, count(*) as order_count from {{ ref("fct_orders") }} group by all\n'
RUN_WORKER_ARGV = ["/x/dagster/__main__.py", "api", "execute_run", "{}"]


@pytest.fixture
def project_copy(tmp_path):
    from dagster_dbt import DbtProject

    copy = tmp_path / "dbt_project_synthetic"
    shutil.copytree(DBT_PROJECT_DIR, copy, ignore=shutil.ignore_patterns("target", "logs", "flows"))
    return DbtProject(project_dir=copy, profiles_dir=copy)


def _edit_clv(project) -> None:
    (project.project_dir / "models" / "marts" / "customer_lifetime_value.sql").write_text(EDITED_CLV, encoding="utf-8")


def test_an_edited_model_is_seen_by_the_next_run_through_a_partial_parse(project_copy, monkeypatch):
    from dpone_dagster.integration.dbt.project import manifest_for_run, prepare_manifest, stored_fingerprint

    assert prepare_manifest(project_copy) is True
    loaded = stored_fingerprint(project_copy)
    loaded_manifest = json.loads(project_copy.manifest_path.read_text())
    assert dbt_reads(loaded_manifest, [CLV]) == ["marts.dim_customers_scd2", "marts.fct_orders"]
    parsed_at = project_copy.manifest_path.stat().st_mtime_ns

    monkeypatch.setattr("sys.argv", RUN_WORKER_ARGV)  # the refresh happens in a run worker too
    assert manifest_for_run(project_copy, loaded) is None  # nothing changed: no parse, no read
    assert project_copy.manifest_path.stat().st_mtime_ns == parsed_at

    _edit_clv(project_copy)
    fresh = manifest_for_run(project_copy, loaded)
    assert fresh is not None
    assert dbt_reads(fresh, [CLV]) == ["marts.fct_orders"]
    perf = json.loads((project_copy.manifest_path.with_name("perf_info.json")).read_text())
    assert perf["is_partial_parse_enabled"] is True
    assert perf["parsed_path_count"] < 5, perf  # the edited file (and its schema entry), not all ~20

    refreshed = stored_fingerprint(project_copy)
    assert refreshed != loaded
    assert manifest_for_run(project_copy, refreshed) is None  # a later run finds it current
    reread = manifest_for_run(project_copy, loaded)  # one still holding the old manifest only reads
    assert reread is not None and dbt_reads(reread, [CLV]) == ["marts.fct_orders"]
    assert json.loads((project_copy.manifest_path.with_name("perf_info.json")).read_text()) == perf  # no second parse


@pytest.mark.slow
def test_a_fork_run_after_an_edit_defers_only_what_the_edited_model_reads(built_prod_lake, project_copy):
    """The op of a location loaded before the edit: its run defers 1 table (the edited model's
    read), not the 2 of the loaded manifest, nor every one of prod's tables."""
    from dagster import materialize

    from dpone_dagster.config import load_config
    from dpone_dagster.definitions import defs
    from dpone_dagster.integration.dbt.factory import fork_aware_dbt_assets, fork_aware_dbt_resource
    from dpone_dagster.workspaces.service import Workspaces

    root, built = built_prod_lake
    assert built.success
    assets = fork_aware_dbt_assets(project=project_copy, name="edited_copy_dbt_build")  # loads (parses) now
    _edit_clv(project_copy)  # ... and the model is edited afterwards, without a reload
    with root.applied():
        Workspaces(load_config()).create_fork(FORK, "prod", owner="tester")
    fork = LakeSetup(root.state_dir, extra_env={"DPONE_WORKSPACE": FORK})
    resources = {**dict(defs.resources or {}), "dbt": fork_aware_dbt_resource(project_copy)}
    with fork.applied():
        result = materialize(
            [assets], resources=resources, selection=[AssetKey(["main", *CLV.split(".")])], raise_on_error=False
        )
    assert result.success

    views, columns = fork.defer_views(FORK, sql=f"DESCRIBE lake_main.{CLV}")
    assert views == ["marts.fct_orders"]
    assert [c[0] for c in columns] == ["customer_id", "order_count"]  # the edited SQL ran
