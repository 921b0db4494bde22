"""The project root is never implicit (issue 18 item 1): dpone.yaml or `[tool.dpone]` found upward from
the working directory, or DPONE_PROJECT_ROOT; none of them is a coded refusal, never a lake where the
command runs. The dbt plugin (a terminal `dbt build`) and a Dagster run resolve the same prod from any
subfolder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dpone_dagster.config import load_config
from dpone_dagster.errors import ConfigError
from dpone_dagster.lake.dbt_plugin import resolve_for_dbt
from dpone_dagster.lake.resolution.seam import resolve


@pytest.fixture
def no_root_env(monkeypatch) -> dict[str, str]:
    monkeypatch.delenv("DPONE_PROJECT_ROOT", raising=False)
    monkeypatch.delenv("DPONE_STATE_DIR", raising=False)
    return {}


def test_outside_any_project_commands_refuse_and_name_the_three_ways(tmp_path, monkeypatch, no_root_env) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as refused:
        load_config(no_root_env)
    assert refused.value.code == "config.project_root_missing"
    for way in ("dpone.yaml", "[tool.dpone]", "DPONE_PROJECT_ROOT"):
        assert way in refused.value.message
    assert not (tmp_path / ".dpone").exists()


def test_the_cli_refuses_outside_a_project_and_creates_nothing(tmp_path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [str(Path(sys.executable).with_name("dpone")), "fork", "list"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "config.project_root_missing" in done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == [] or not (tmp_path / ".dpone").exists()


def test_dpone_yaml_is_found_upward_as_git_does(tmp_path, monkeypatch, no_root_env) -> None:
    (tmp_path / "dpone.yaml").write_text("dbt_project_dir: shop\n")
    nested = tmp_path / "shop" / "models" / "staging"
    nested.mkdir(parents=True)
    monkeypatch.chdir(nested)
    config = load_config(no_root_env)
    assert config.project_root == tmp_path.resolve()
    assert config.state_path == tmp_path.resolve() / ".dpone"
    assert config.dbt_project_path == tmp_path.resolve() / "shop"


def test_a_tool_dpone_table_in_pyproject_is_the_configuration(tmp_path, monkeypatch, no_root_env) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "shop"\n\n[tool.dpone]\ndbt_project_dir = "dbt"\n')
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path / "src")
    config = load_config(no_root_env)
    assert config.project_root == tmp_path.resolve()
    assert config.dbt_project_path == tmp_path.resolve() / "dbt"


def test_a_pyproject_without_the_table_is_not_a_project(tmp_path, monkeypatch, no_root_env) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as refused:
        load_config(no_root_env)
    assert refused.value.code == "config.project_root_missing"


def test_dpone_project_root_wins(tmp_path, monkeypatch, no_root_env) -> None:
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "elsewhere"
    root.mkdir()
    assert load_config({"DPONE_PROJECT_ROOT": str(root)}).project_root == root.resolve()


def test_no_dbt_project_default_and_the_refusal_names_the_setting(tmp_path) -> None:
    config = load_config({"DPONE_PROJECT_ROOT": str(tmp_path)})
    with pytest.raises(ConfigError) as refused:
        config.dbt_project_path
    assert refused.value.code == "config.dbt_project_unset"
    assert "`dbt_project_dir`" in refused.value.message


def test_the_dbt_plugin_and_a_dagster_run_resolve_the_same_prod_from_any_subfolder(
    tmp_path, monkeypatch, no_root_env
) -> None:
    (tmp_path / "dpone.yaml").write_text("dbt_project_dir: shop\n")
    dbt_folder = tmp_path / "shop" / "models"
    dbt_folder.mkdir(parents=True)
    monkeypatch.chdir(dbt_folder)  # where a terminal `dbt build` runs the plugin
    from_dbt = resolve_for_dbt("main", no_root_env)
    monkeypatch.chdir(tmp_path)  # where `dagster dev` runs
    from_dagster = resolve("prod", "main", config=load_config(no_root_env))
    assert from_dbt.catalog == from_dagster.catalog
    assert from_dbt.data_path == from_dagster.data_path
    assert str(tmp_path.resolve() / ".dpone") in from_dbt.data_path
