"""The manifest follows the files: a model edited after the location loaded is seen by the next run.

A run (worker or code-server-spawned) that finds the dbt sources changed since the manifest its
definitions were loaded with parses nothing itself: its `dbt build` parses the edited files anyway
(partial parse), and the dpone plugin takes the read set from the manifest *that* invocation wrote,
proven by dbt's invocation id. Edits happen in a copy of the demo project (other tests read the real
one at the same time).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from dagster import AssetKey
from dbt_lakes import DBT_PROJECT_DIR, LakeSetup

from dpone_dagster.lake.dbt_reads import dbt_reads

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


def test_an_edit_is_noticed_and_the_read_set_comes_from_the_dbt_invocations_own_parse(
    project_copy, tmp_path, monkeypatch
):
    from dpone_dagster.integration.dbt.project import (
        dbt_executable,
        prepare_manifest,
        sources_changed_since,
        stored_fingerprint,
    )
    from dpone_dagster.lake.dbt_plugin import invocation_reads

    assert prepare_manifest(project_copy) is True
    loaded = stored_fingerprint(project_copy)
    loaded_manifest = json.loads(project_copy.manifest_path.read_text())
    assert dbt_reads(loaded_manifest, [CLV]) == ["marts.dim_customers_scd2", "marts.fct_orders"]
    assert not sources_changed_since(project_copy, loaded)
    assert sources_changed_since(project_copy, None)

    _edit_clv(project_copy)
    assert sources_changed_since(project_copy, loaded)
    # what `dbt build` does before its first connection: parse into its own target path
    target = tmp_path / "invocation-target"
    env = {**os.environ, "DBT_TARGET_PATH": str(target), "DBT_PROFILES_DIR": str(project_copy.profiles_dir)}
    parsed = subprocess.run(
        [dbt_executable(), "parse", "--quiet"], cwd=project_copy.project_dir, env=env, capture_output=True, text=True
    )
    assert parsed.returncode == 0, parsed.stdout[-2000:] + parsed.stderr[-2000:]
    invocation_id = json.loads((target / "manifest.json").read_text())["metadata"]["invocation_id"]

    plugin_env = {"DBT_TARGET_PATH": str(target)}
    assert invocation_reads([CLV], plugin_env) is None  # not this invocation's manifest: every table
    monkeypatch.setattr("dbt_common.invocation.get_invocation_id", lambda: invocation_id)
    assert invocation_reads([CLV], plugin_env) == ["marts.fct_orders"]  # the edited model's one read
    assert invocation_reads([CLV], {"DBT_TARGET_PATH": str(tmp_path / "nothing-here")}) is None
    relative = {"DBT_TARGET_PATH": "invocation-target", "DBT_PROJECT_DIR": str(tmp_path)}
    assert invocation_reads([CLV], relative) == ["marts.fct_orders"]


def test_the_plugin_refuses_two_read_sets_at_once():
    from dpone_dagster.errors import LakeError
    from dpone_dagster.lake.dbt_handover import READS_FROM_INVOCATION_ENV
    from dpone_dagster.lake.dbt_plugin import resolve_for_dbt
    from dpone_dagster.lake.resolution.reads import READS_ENV

    with pytest.raises(LakeError) as raised:
        resolve_for_dbt("main", {READS_FROM_INVOCATION_ENV: "1", READS_ENV: "marts.fct_orders"})
    assert raised.value.code == "lake.invalid_read"


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
