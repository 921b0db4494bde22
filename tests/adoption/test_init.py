"""`dpone init` (issue 18 item 2) on a small dbt-duckdb project written for the test (not the
synthetic one): writes dpone.yaml, the fork-aware profile target, the Dagster definitions (plain
definitions.py, or the component's defs.yaml in a dg project); shows the change; a second run
changes nothing; unsupported profiles are refused with a code and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dpone_dagster.cli import app
from dpone_dagster.config import load_config

SHOP_PROFILE = {
    "shop": {
        "target": "dev",
        "outputs": {"dev": {"type": "duckdb", "path": "shop.duckdb", "schema": "analytics", "threads": 4}},
    }
}


def _shop(root: Path, profile: dict = SHOP_PROFILE) -> Path:
    project = root / "shop_dbt"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: shop\nversion: '1.0'\nprofile: shop\n")
    (project / "models" / "orders.sql").write_text("select 1 as id\n")
    (project / "profiles.yml").write_text(yaml.safe_dump(profile))
    return project


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _init(root: Path, monkeypatch, *args: str):
    monkeypatch.chdir(root)
    return CliRunner().invoke(app, ["init", *args])


def test_init_makes_the_project_fork_aware_and_a_second_run_changes_nothing(tmp_path, monkeypatch) -> None:
    project = _shop(tmp_path)
    result = _init(tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert "+dbt_project_dir: shop_dbt" in result.output  # the change is shown
    profile = yaml.safe_load((project / "profiles.yml").read_text())["shop"]
    assert profile["target"] == "dpone"
    assert profile["outputs"]["dev"]["path"] == "shop.duckdb"  # the old target is kept
    target = profile["outputs"]["dpone"]
    assert target["plugins"][-1]["module"] == "dpone_dagster.lake.dbt_plugin"
    assert (target["database"], target["schema"], target["threads"]) == ("lake_main", "analytics", 1)
    assert "fork_aware_dbt_definitions" in (tmp_path / "definitions.py").read_text()
    monkeypatch.delenv("DPONE_PROJECT_ROOT")
    monkeypatch.chdir(project / "models")
    assert load_config().dbt_project_path == project.resolve()
    before = _snapshot(tmp_path)
    again = _init(tmp_path, monkeypatch)
    assert again.exit_code == 0 and "nothing to change" in again.output
    assert _snapshot(tmp_path) == before


def test_dry_run_shows_and_writes_nothing(tmp_path, monkeypatch) -> None:
    _shop(tmp_path)
    before = _snapshot(tmp_path)
    result = _init(tmp_path, monkeypatch, "--dry-run")
    assert result.exit_code == 0 and "3 file(s) would change" in result.output
    assert "+++ b/shop_dbt/profiles.yml" in result.output
    assert _snapshot(tmp_path) == before


def test_a_dg_project_gets_the_components_defs_yaml(tmp_path, monkeypatch) -> None:
    _shop(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "shop"\n[tool.dg.project]\nroot_module = "shop"\n')
    assert _init(tmp_path, monkeypatch).exit_code == 0
    defs = yaml.safe_load((tmp_path / "shop" / "defs" / "shop_dbt" / "defs.yaml").read_text())
    assert defs["type"] == "dpone_dagster.integration.dbt.component.ForkAwareDbtProjectComponent"
    assert defs["attributes"]["project_dir"].endswith("/shop_dbt")
    assert not (tmp_path / "definitions.py").exists()


@pytest.mark.parametrize(
    ("profile", "code"),
    [
        ({"shop": {"target": "pg", "outputs": {"pg": {"type": "postgres", "host": "db"}}}}, "init.profile_unsupported"),
        (
            {
                "shop": {
                    "target": "dev",
                    "outputs": {
                        "dev": {
                            "type": "duckdb",
                            "path": "x.duckdb",
                            "attach": [{"path": "other.sqlite", "type": "sqlite"}],
                        }
                    },
                }
            },
            "init.profile_unsupported",
        ),
        ({"other": {"target": "dev", "outputs": {"dev": {"type": "duckdb"}}}}, "init.profile_unsupported"),
    ],
)
def test_unsupported_profiles_are_refused_with_a_code_and_nothing_written(tmp_path, monkeypatch, profile, code) -> None:
    _shop(tmp_path, profile)
    before = _snapshot(tmp_path)
    result = _init(tmp_path, monkeypatch)
    assert result.exit_code == 1
    assert f"error [{code}]" in result.output
    assert _snapshot(tmp_path) == before


def test_no_dbt_project_and_another_configured_project_are_refused(tmp_path, monkeypatch) -> None:
    assert "init.dbt_project_missing" in _init(tmp_path, monkeypatch).output
    _shop(tmp_path)
    (tmp_path / "dpone.yaml").write_text("dbt_project_dir: elsewhere\n")
    assert "init.config_conflict" in _init(tmp_path, monkeypatch).output
