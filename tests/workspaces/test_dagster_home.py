"""One Dagster instance per workspace: each workspace's DAGSTER_HOME is its own, with a dagster.yaml.

`dpone dev` and `dpone demo` go through `prepare_dagster_home`. The UI consequence (a fork's
webserver shows no prod materialization) is proven by tests/ui/test_fork_deployment_ui.py.
"""

from __future__ import annotations

import logging
import shutil

import pytest
from dagster import DagsterInstance

from dpone_dagster.config import load_config
from dpone_dagster.workspaces.dagster_home import (
    DagsterHomeOfAnotherWorkspaceError,
    default_dagster_home,
    prepare_dagster_home,
    private_temp_dir,
    workspace_segment,
)


def test_prod_and_each_fork_get_their_own_home(_isolated_state):
    config = load_config()
    assert default_dagster_home(config, "prod") == _isolated_state / "dagster_home"
    fork = default_dagster_home(config, "wm-fork-a")
    assert fork == _isolated_state / "workspaces" / "wm-fork-a" / "dagster_home"
    assert len({fork, default_dagster_home(config, "wm-fork-b"), default_dagster_home(config, "prod")}) == 3
    # ids may hold '/': one path component, distinct from the id a plain sanitization would give
    assert "/" not in workspace_segment("team/dev")
    assert workspace_segment("team/dev") != workspace_segment("team_dev")


def test_a_fork_home_is_prepared_with_a_dagster_yaml_so_dagster_does_not_warn(monkeypatch, caplog):
    monkeypatch.setenv("DPONE_WORKSPACE", "wm-fork-home")
    home = prepare_dagster_home(load_config(), {})
    assert home.path.name == "dagster_home" and "wm-fork-home" in str(home.path)
    assert home.wrote_instance_yaml and (home.path / "dagster.yaml").is_file()
    assert not prepare_dagster_home(load_config(), {}).wrote_instance_yaml  # kept, never rewritten

    monkeypatch.setenv("DAGSTER_HOME", str(home.path))
    with caplog.at_level(logging.WARNING, logger="dagster"):
        with DagsterInstance.get() as instance:
            assert instance.root_directory == str(home.path)
    assert not [r for r in caplog.records if "No dagster instance configuration file" in r.getMessage()]


def test_another_workspaces_home_is_refused(monkeypatch):
    prod_home = prepare_dagster_home(load_config(), {})
    monkeypatch.setenv("DPONE_WORKSPACE", "wm-fork-shared")
    with pytest.raises(DagsterHomeOfAnotherWorkspaceError) as refused:
        prepare_dagster_home(load_config(), {"DAGSTER_HOME": str(prod_home.path)})
    assert refused.value.code == "workspace.dagster_home_of_another_workspace"
    # its own explicit home is fine
    own = prepare_dagster_home(load_config(), {})
    assert prepare_dagster_home(load_config(), {"DAGSTER_HOME": str(own.path)}).explicit


def _prepared(monkeypatch, workspace: str):
    monkeypatch.setenv("DPONE_WORKSPACE", workspace)
    home = prepare_dagster_home(load_config(), {}).path
    (home / "runs.db").write_text("synthetic", encoding="utf-8")
    monkeypatch.delenv("DPONE_WORKSPACE")
    return home


def test_dropping_a_fork_removes_its_own_home_only(monkeypatch):
    from typer.testing import CliRunner

    from dpone_dagster.cli import app
    from dpone_dagster.workspaces.service import Workspaces

    service = Workspaces(load_config())
    service.create_fork("wm-fork-gone", "prod", owner="alice")
    service.create_fork("wm-fork-kept", "prod", owner="alice")
    prod_home = _prepared(monkeypatch, "prod")
    gone, kept = _prepared(monkeypatch, "wm-fork-gone"), _prepared(monkeypatch, "wm-fork-kept")

    config = load_config()
    gone_temp, kept_temp = private_temp_dir(config, "wm-fork-gone"), private_temp_dir(config, "wm-fork-kept")
    for temp in (gone_temp, kept_temp):
        temp.mkdir(mode=0o700, exist_ok=True)
        (temp / "spill.tmp").write_bytes(b"synthetic spill")

    result = CliRunner().invoke(app, ["fork", "drop", "wm-fork-gone", "--as", "alice"])
    assert result.exit_code == 0, result.output
    assert f"removed its Dagster home {gone}" in result.output
    assert f"removed its temporary folder {gone_temp}" in result.output
    assert not gone_temp.exists() and (kept_temp / "spill.tmp").is_file()
    shutil.rmtree(kept_temp)
    assert not gone.exists()
    assert gone.parent.is_dir()  # only the dagster_home directory itself
    assert (prod_home / "runs.db").is_file() and (kept / "runs.db").is_file()
    # a DAGSTER_HOME in the environment is never what a drop removes
    service.create_fork("wm-fork-third", "prod", owner="alice")
    monkeypatch.setenv("DAGSTER_HOME", str(kept))
    assert service.drop("wm-fork-third", actor="alice").dagster_home_removed is None
    assert (kept / "runs.db").is_file() and (prod_home / "runs.db").is_file()


def test_a_home_marked_for_another_workspace_or_an_incomplete_cleanup_is_kept(monkeypatch):
    from dpone_dagster.lake.lifecycle.cleanup import CleanupReport, LeftoverRow
    from dpone_dagster.workspaces import dagster_home
    from dpone_dagster.workspaces import service as service_module
    from dpone_dagster.workspaces.service import Workspaces

    config = load_config()
    service = Workspaces(config)
    service.create_fork("wm-fork-marked", "prod", owner="alice")
    service.create_fork("wm-fork-pending", "prod", owner="alice")
    # a fork's home directory that holds prod's marker (someone copied prod's instance there)
    marked = dagster_home.default_dagster_home(config, "wm-fork-marked")
    marked.mkdir(parents=True)
    (marked / dagster_home.MARKER_FILE).write_text("prod\n", encoding="utf-8")
    assert service.drop("wm-fork-marked", actor="alice").dagster_home_removed is None
    assert marked.is_dir()
    assert dagster_home.remove_dagster_home(config, "prod") is None

    pending = _prepared(monkeypatch, "wm-fork-pending")
    leftover = CleanupReport(
        leftovers=[LeftoverRow("wm-fork-pending", "main", "m", "drop", "lake.catalog_busy", False)]
    )
    monkeypatch.setattr(service_module, "drop_fork_namespaces", lambda *a, **k: leftover)
    assert service.drop("wm-fork-pending", actor="alice").dagster_home_removed is None
    assert (pending / "runs.db").is_file()


def test_a_link_at_a_forks_temp_folder_name_is_never_followed_by_a_drop(tmp_path):
    from dpone_dagster.workspaces.service import Workspaces

    service = Workspaces(load_config())
    service.create_fork("wm-fork-linked", "prod", owner="alice")
    elsewhere = tmp_path / "not-the-forks"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("kept")
    link = private_temp_dir(load_config(), "wm-fork-linked")
    link.symlink_to(elsewhere, target_is_directory=True)
    try:
        assert service.drop("wm-fork-linked", actor="alice").temp_dir_removed is None
        assert (elsewhere / "keep.txt").read_text() == "kept"
    finally:
        link.unlink()
