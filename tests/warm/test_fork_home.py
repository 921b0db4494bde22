"""The instance a fork's embedded home gets runs warm; prod's embedded home and a DAGSTER_HOME set by hand do not.

And a fork's warm-launched run, from a kernel-confined process as `dpone dev` starts it, still carries and
enforces its workspace: a run tagged for `prod` is refused in the warm worker (the slow test).
"""

from __future__ import annotations

import os
import sys

import pytest
import yaml
from dagster import DagsterInstance

from dpone_dagster.config import load_config
from dpone_dagster.integration.warm.launcher import FALLBACK_TAG, LAUNCHER_TAG, WarmRunLauncher
from dpone_dagster.workspaces.dagster_home import _INSTANCE_YAML, WARM_RUNS_YAML, prepare_dagster_home
from tests.confinement.harness import needs_landlock
from tests.conftest import REPO_ROOT


def _instance_config(home) -> dict:
    return yaml.safe_load((home / "dagster.yaml").read_text()) or {}


def test_a_fork_home_launches_runs_warm_and_without_the_queue(monkeypatch):
    monkeypatch.setenv("DPONE_WORKSPACE", "wm-fork-warm")
    home = prepare_dagster_home(load_config(), {}).path
    config = _instance_config(home)
    assert config["run_launcher"]["class"] == "WarmRunLauncher"
    assert config["run_coordinator"]["class"] == "SyncInMemoryRunCoordinator"
    with DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.run_launcher, WarmRunLauncher)
        assert instance.run_monitoring_enabled and instance.run_launcher.supports_check_run_worker_health


def test_prod_and_a_dagster_home_set_by_hand_get_no_launcher_from_dpone(monkeypatch, tmp_path):
    assert "run_launcher" not in _instance_config(prepare_dagster_home(load_config(), {}).path)
    monkeypatch.setenv("DPONE_WORKSPACE", "wm-fork-explicit")
    explicit = prepare_dagster_home(load_config(), {"DAGSTER_HOME": str(tmp_path / "mine")})
    assert explicit.wrote_instance_yaml and "run_launcher" not in _instance_config(explicit.path)


def test_a_yaml_an_earlier_version_wrote_is_brought_up_to_date_and_an_edited_one_is_kept(monkeypatch):
    monkeypatch.setenv("DPONE_WORKSPACE", "wm-fork-upgrade")
    home = prepare_dagster_home(load_config(), {}).path
    for earlier in (_INSTANCE_YAML, _INSTANCE_YAML + WARM_RUNS_YAML):  # before warm runs, before run monitoring
        (home / "dagster.yaml").write_text(earlier.format(workspace="wm-fork-upgrade"))
        assert prepare_dagster_home(load_config(), {}).wrote_instance_yaml
        assert _instance_config(home)["run_launcher"]["class"] == "WarmRunLauncher"
        assert _instance_config(home)["run_monitoring"]["enabled"] is True
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    assert not prepare_dagster_home(load_config(), {}).wrote_instance_yaml
    assert "run_launcher" not in _instance_config(home)


@pytest.mark.slow
@needs_landlock
def test_a_confined_forks_warm_run_keeps_its_workspace_and_refuses_prods(tmp_path):
    from tests.confinement.harness import FORK, build_forked_state, last_json_line, run_for_fork

    forked = build_forked_state(tmp_path / "state")
    folder = forked.state_dir / "workspaces" / FORK / "warm_location"  # a tree the fork may write
    env = forked.env(WARM_TEST_DIR=str(folder), PYTHONPATH=str(REPO_ROOT))
    done = run_for_fork([sys.executable, "-m", "tests.warm.harness", str(folder)], env, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    report = last_json_line(done.stdout)
    first_status, first_tags = report["first"]
    assert first_status == "SUCCESS" and first_tags[FALLBACK_TAG] == "warm.worker_unavailable"
    own_status, own_tags = report["own"]
    assert own_status == "SUCCESS" and own_tags[LAUNCHER_TAG] == "warm", own_tags
    assert own_tags["dpone/workspace"] == FORK
    other_status, other_tags, text = report["other"]
    assert other_status == "FAILURE" and other_tags[LAUNCHER_TAG] == "warm", other_tags
    assert "workspace.not_this_deployment" in text
    assert not os.environ.get("DPONE_CONFINED_WORKSPACE")  # the pytest process itself stays unconfined
