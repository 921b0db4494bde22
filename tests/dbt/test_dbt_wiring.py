"""The pieces between Dagster and dbt: manifest preparation, run targets, errored models."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from dbt_lakes import DBT_PROJECT_DIR

from dpone_dagster.config import load_config
from dpone_dagster.errors import LakeError
from dpone_dagster.lake.dbt_handover import TARGETS_ENV, targets_from_env, targets_to_env


@pytest.fixture
def project_copy(tmp_path):
    from dagster_dbt import DbtProject

    copy = tmp_path / "dbt_project_synthetic"
    shutil.copytree(DBT_PROJECT_DIR, copy, ignore=shutil.ignore_patterns("target", "logs", "flows"))
    return DbtProject(project_dir=copy, profiles_dir=copy)


def test_manifest_is_parsed_once_and_again_only_when_the_sources_change(project_copy):
    from dpone_dagster.integration.dbt.project import DbtProjectError, manifest_is_current, prepare_manifest

    assert not manifest_is_current(project_copy)
    assert prepare_manifest(project_copy) is True
    first = project_copy.manifest_path.stat().st_mtime_ns
    assert prepare_manifest(project_copy) is False
    assert project_copy.manifest_path.stat().st_mtime_ns == first

    model = project_copy.project_dir / "models" / "marts" / "daily_revenue.sql"
    model.write_text("select {{ ref('no_such_model') }}", encoding="utf-8")
    assert not manifest_is_current(project_copy)
    with pytest.raises(DbtProjectError) as refused:
        prepare_manifest(project_copy)
    assert refused.value.code == "dbt.parse_failed"
    assert str(project_copy.project_dir) not in refused.value.message
    assert not manifest_is_current(project_copy)


def test_targets_round_trip_through_the_environment():
    value = targets_to_env(["marts.fct_orders", "raw.raw_orders", "marts.fct_orders"])
    assert value == "marts.fct_orders,raw.raw_orders"
    assert targets_from_env({TARGETS_ENV: value}) == ("marts.fct_orders", "raw.raw_orders")
    assert targets_from_env({}) == ()
    with pytest.raises(LakeError):
        targets_to_env(["marts.a,b"])


def test_the_subprocess_environment_is_set_only_inside_the_block(monkeypatch):
    from dpone_dagster.integration.dbt.run import dbt_subprocess_env
    from dpone_dagster.integration.lake.resources import DuckLakeResource

    monkeypatch.setenv("DPONE_WORKSPACE", "wm-fork-x")
    monkeypatch.delenv(TARGETS_ENV, raising=False)
    monkeypatch.delenv("DPONE_PROJECT_ROOT")
    root = str(load_config().project_root)
    with dbt_subprocess_env(DuckLakeResource(), ["marts.fct_orders"]):
        assert os.environ["DPONE_WORKSPACE"] == "wm-fork-x"
        assert os.environ["DPONE_PROJECT_ROOT"] == root
        assert os.environ[TARGETS_ENV] == "marts.fct_orders"
    assert os.environ["DPONE_WORKSPACE"] == "wm-fork-x"
    assert TARGETS_ENV not in os.environ and "DPONE_PROJECT_ROOT" not in os.environ


class _Invocation:
    """Only what `failed_tables` reads from a dbt invocation: its run_results.json."""

    def __init__(self, results):
        self.results = results

    def get_artifact(self, name):
        assert name == "run_results.json"
        if self.results is None:
            raise FileNotFoundError(name)
        return {"results": self.results}


def test_errored_models_are_named_by_their_lake_table():
    from dpone_dagster.defs.dbt.assets import DBT_PROJECT
    from dpone_dagster.integration.dbt.run import failed_tables

    manifest = json.loads(DBT_PROJECT.manifest_path.read_text(encoding="utf-8"))
    results = [
        {"unique_id": "model.dbt_project_synthetic.fct_orders", "status": "error"},
        {"unique_id": "model.dbt_project_synthetic.stg_orders", "status": "success"},
        {"unique_id": "model.dbt_project_synthetic.daily_revenue", "status": "skipped"},
        {"unique_id": next(k for k in manifest["nodes"] if k.startswith("test.")), "status": "error"},
    ]
    assert failed_tables(_Invocation(results), manifest) == ["marts.fct_orders"]
    assert failed_tables(_Invocation(None), manifest) == []


def test_a_missing_dbt_project_names_the_setting_that_points_at_it(tmp_path, monkeypatch):
    """No dbt_project.yml where `dbt_project_dir` points: the refusal names the setting, not a path."""
    from dpone_dagster.integration.dbt.project import DbtProjectError, configured_dbt_project

    monkeypatch.setenv("DPONE_PROJECT_ROOT", str(tmp_path))
    with pytest.raises(DbtProjectError) as refused:
        configured_dbt_project()
    assert refused.value.code == "dbt.project_missing"
    assert "`dbt_project_dir`" in refused.value.message
    assert str(tmp_path) not in refused.value.message


def test_the_read_set_variables_are_always_set_or_unset_never_inherited(monkeypatch):
    """A `DPONE_DBT_READS_FROM_INVOCATION` or `DPONE_DBT_READS` in the op's own environment (a user's
    shell, a run launcher) must not narrow or widen what a dbt run of the op defers."""
    from dpone_dagster.integration.dbt.run import dbt_subprocess_env
    from dpone_dagster.integration.lake.resources import DuckLakeResource
    from dpone_dagster.lake.dbt_handover import READS_FROM_INVOCATION_ENV
    from dpone_dagster.lake.resolution.reads import READS_ENV

    monkeypatch.setenv(READS_FROM_INVOCATION_ENV, "1")
    monkeypatch.setenv(READS_ENV, "raw.inherited")
    with dbt_subprocess_env(DuckLakeResource(), ["marts.fct_orders"]):  # reads_everything: every table
        assert READS_FROM_INVOCATION_ENV not in os.environ and READS_ENV not in os.environ
    with dbt_subprocess_env(DuckLakeResource(), ["marts.fct_orders"], ["staging.stg_orders"]):
        assert READS_FROM_INVOCATION_ENV not in os.environ
        assert os.environ[READS_ENV] == "staging.stg_orders"
    with dbt_subprocess_env(DuckLakeResource(), ["marts.fct_orders"], reads_from_invocation=True):
        assert os.environ[READS_FROM_INVOCATION_ENV] == "1" and READS_ENV not in os.environ
    assert os.environ[READS_FROM_INVOCATION_ENV] == "1" and os.environ[READS_ENV] == "raw.inherited"


_HANDOVER_PROBE = """
import sys
from dpone_dagster.integration.dbt.run import dbt_subprocess_env
from dpone_dagster.integration.lake.resources import DuckLakeResource
with dbt_subprocess_env(DuckLakeResource(), ["marts.fct_orders"], ["staging.stg_orders"]):
    pass
print(sorted(m for m in sys.modules if m.startswith(("dbt.adapters.duckdb", "dpone_dagster.lake.dbt_plugin"))))
"""


def test_the_op_hands_dbt_its_environment_without_loading_the_dbt_adapter():
    """The Dagster process only sets the plugin's variables: importing dbt-duckdb's adapter (and the
    plugin with it) there costs a quarter of a second a run and is dbt's own business."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _HANDOVER_PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


_PLUGIN_IMPORT_PROBE = """
import sys
import dpone_dagster.lake.dbt_plugin
print(sorted({m.split(".")[0] for m in sys.modules if m.startswith("cryptography")}))
"""


def test_every_dbt_invocation_imports_the_plugin_without_cryptography():
    """Every dbt command in a fork imports the plugin; `cryptography` (~0.1 s) is needed only to seal or
    unseal a PostgreSQL catalog's role password (`control/role_passwords.py`), never on the embedded default."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _PLUGIN_IMPORT_PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
