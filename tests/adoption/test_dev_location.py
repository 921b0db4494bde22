"""`dpone dev` for any project (issue 18 item 3): -m / -w / the project's own workspace.yaml / the dg
project, every code location named `<name>@<workspace>`, a free port when 3000 is busy."""

from __future__ import annotations

import socket

import pytest
import yaml

from dpone_dagster.cli.dev_location import pick_port, serve_plan
from dpone_dagster.config import load_config
from dpone_dagster.errors import ConfigError


def _config(root, workspace="prod"):
    return load_config({"DPONE_PROJECT_ROOT": str(root), "DPONE_WORKSPACE": workspace})


def test_a_module_is_served_as_project_at_workspace(tmp_path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "shop"\n')
    plan = serve_plan(_config(tmp_path, "wm-fork-a"), tmp_path, module="shop_defs")
    assert plan.location_names == ("shop@wm-fork-a",)
    (entry,) = yaml.safe_load(plan.workspace_file.read_text())["load_from"]
    assert entry["python_module"]["module_name"] == "shop_defs"
    assert entry["python_module"]["working_directory"] == str(tmp_path.resolve())


def test_a_workspace_file_gets_every_location_renamed_and_paths_made_absolute(tmp_path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "ws.yaml").write_text(
        yaml.safe_dump(
            {
                "load_from": [
                    {"python_module": {"module_name": "a.defs", "location_name": "a"}},
                    {"python_file": "defs/b.py"},
                ]
            }
        )
    )
    home = tmp_path / "home"
    home.mkdir()
    plan = serve_plan(_config(project), home, workspace_file=project / "ws.yaml")
    assert plan.location_names == ("a@prod", "b@prod")
    assert plan.modules == ("a.defs",)
    entries = yaml.safe_load(plan.workspace_file.read_text())["load_from"]
    assert entries[1]["python_file"]["relative_path"] == str((project / "defs" / "b.py").resolve())
    assert "@" not in (project / "ws.yaml").read_text()  # the user's file is never edited


def test_the_dg_project_module_is_the_default(tmp_path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "shop"\n[tool.dg.project]\nroot_module = "shop"\n')
    assert serve_plan(_config(tmp_path), tmp_path).modules == ("shop.definitions",)


def test_nothing_to_serve_is_a_coded_refusal(tmp_path) -> None:
    with pytest.raises(ConfigError) as refused:
        serve_plan(_config(tmp_path), tmp_path)
    assert refused.value.code == "config.location_unspecified"


def test_a_busy_port_gives_a_free_one_by_default_and_refuses_when_asked_for() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = held.getsockname()[1]
        with pytest.raises(ConfigError) as refused:
            pick_port(busy)
        assert refused.value.code == "config.port_busy"
        assert pick_port(None) != busy
