"""One Dagster instance per workspace: each workspace's DAGSTER_HOME is its own, with a dagster.yaml.

`dpone dev` and `dpone demo` go through `prepare_dagster_home`. The UI consequence (a fork's
webserver shows no prod materialization) is proven by tests/ui/test_fork_deployment_ui.py.
"""

from __future__ import annotations

import logging

import pytest
from dagster import DagsterInstance

from dpone_dagster.config import load_config
from dpone_dagster.workspaces.dagster_home import (
    DagsterHomeOfAnotherWorkspaceError,
    default_dagster_home,
    prepare_dagster_home,
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
