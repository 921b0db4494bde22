"""Runs that start warm behave as default-launched ones: events, failure, cancellation, a crashed worker.

One code server and one instance (real DagsterInstance, SQLite, a temp home opted in to the warm
launcher as docs/warm-runs.md says) serve `location_source.py` for the whole file; every run is
launched through GraphQL's launchRun, as the UI does. The first run of the file has no warm worker
yet and takes the default path: it is the default-launched run the warm ones are compared with.
The stale-code test edits the location and runs last.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from dagster import DagsterRunStatus

from dpone_dagster.integration.warm.launcher import FALLBACK_TAG, LAUNCHER_TAG, WORKER_TAG
from tests.conftest import REPO_ROOT
from tests.warm.harness import opted_in_home, served

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def serving(tmp_path_factory):
    folder = tmp_path_factory.mktemp("warm_location")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WARM_TEST_DIR", str(folder))
        patch.setenv("DPONE_PROJECT_ROOT", str(REPO_ROOT))  # module scope: set before tests/conftest.py's
        patch.setenv("DPONE_STATE_DIR", str(tmp_path_factory.mktemp("warm_state")))
        patch.delenv("DPONE_WORKSPACE", raising=False)
        with served(folder, opted_in_home(tmp_path_factory.mktemp("warm_home"))) as serving:
            serving.default_run = serving.launch("ok")  # no worker yet: the default path, and the first worker
            assert serving.wait(serving.default_run) == DagsterRunStatus.SUCCESS
            yield serving


def _warm_launch(serving, asset: str, tags=None) -> str:
    serving.wait_for_ready_worker()
    run_id = serving.launch(asset, tags)
    assert serving.tags(run_id)[LAUNCHER_TAG] == "warm", serving.tags(run_id)
    return run_id


def _slow_step_started(serving) -> None:
    marker = serving.folder / "slow.pid"
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert time.monotonic() < deadline, "the slow step never started"
        time.sleep(0.1)
    marker.unlink()


def test_the_first_run_takes_the_default_path_and_says_why(serving):
    tags = serving.tags(serving.default_run)
    assert tags[LAUNCHER_TAG] == "default" and tags[FALLBACK_TAG] == "warm.worker_unavailable"
    assert "Launched through the code server" in serving.text(serving.default_run)


def test_a_warm_run_succeeds_with_the_events_of_a_default_run(serving):
    run_id = _warm_launch(serving, "ok")
    assert serving.wait(run_id) == DagsterRunStatus.SUCCESS
    assert Counter(serving.event_types(run_id)) == Counter(serving.event_types(serving.default_run))
    assert "Launched in a warm run worker" in serving.text(run_id)
    pid = int(serving.tags(run_id)[WORKER_TAG].split(":")[0])
    assert f"Started process for run (pid: {pid})" in serving.text(run_id)


def test_a_failing_op_ends_the_warm_run_failure_with_its_error(serving):
    run_id = _warm_launch(serving, "broken")
    assert serving.wait(run_id) == DagsterRunStatus.FAILURE
    events = serving.event_types(run_id)
    assert "STEP_FAILURE" in events and "PIPELINE_FAILURE" in events
    assert "broken on purpose" in serving.text(run_id)


def test_terminate_cancels_a_warm_run(serving):
    run_id = _warm_launch(serving, "slow")
    _slow_step_started(serving)
    assert serving.terminate(run_id)["__typename"] == "TerminateRunSuccess"
    assert serving.wait(run_id) == DagsterRunStatus.CANCELED
    assert "PIPELINE_CANCELING" in serving.event_types(run_id)


def test_a_worker_killed_mid_run_ends_the_run_failure_naming_the_exit(serving):
    run_id = _warm_launch(serving, "slow")
    _slow_step_started(serving)
    os.kill(int(serving.tags(run_id)[WORKER_TAG].split(":")[0]), signal.SIGKILL)
    assert serving.wait(run_id, timeout=60) == DagsterRunStatus.FAILURE
    assert "exited killed by SIGKILL before the run finished" in serving.text(run_id)


def test_run_monitoring_fails_a_warm_run_whose_worker_died_unwatched(serving, monkeypatch):
    """The launching process's crash watcher is off (as when that process died first): Dagster's run
    monitoring, through `check_run_worker_health` on a fresh launcher too, ends the run FAILURE."""
    from dagster._core.launcher.base import WorkerStatus
    from dagster._daemon.monitoring.run_monitoring import monitor_started_run

    from dpone_dagster.integration.warm.launcher import WarmRunLauncher
    from dpone_dagster.integration.warm.pool import WarmWorker

    monkeypatch.setattr(WarmWorker, "watch", lambda self, on_exit: None)
    run_id = _warm_launch(serving, "slow")
    _slow_step_started(serving)
    fresh = WarmRunLauncher()  # another process's launcher: it launched nothing, it reads the run's tags
    fresh.register_instance(serving.instance)
    assert fresh.check_run_worker_health(serving.instance.get_run_by_id(run_id)).status == WorkerStatus.RUNNING
    worker = serving.launcher._live_worker(serving.instance.get_run_by_id(run_id))
    os.kill(worker, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while fresh._live_worker(serving.instance.get_run_by_id(run_id)) is not None:
        assert time.monotonic() < deadline, "the killed worker is still there"  # unreaped: a zombie
        time.sleep(0.1)
    run = serving.instance.get_run_by_id(run_id)
    assert run.status == DagsterRunStatus.STARTED  # nothing else noticed
    health = fresh.check_run_worker_health(run)
    assert health.status == WorkerStatus.FAILED and f"{worker}:" in health.msg, health
    record = serving.instance.get_run_record_by_id(run_id)
    monitor_started_run(serving.instance, serving.context, record, logging.getLogger("run_monitoring"))
    assert serving.wait(run_id, timeout=30) == DagsterRunStatus.FAILURE
    assert "is gone while the run is STARTED" in serving.text(run_id)


def test_a_run_tagged_for_another_workspace_is_refused_in_the_warm_worker(serving):
    run_id = _warm_launch(serving, "ok", {"dpone/workspace": "wm-fork-other"})
    assert serving.wait(run_id) == DagsterRunStatus.FAILURE
    assert "workspace.not_this_deployment" in serving.text(run_id)
    assert "ASSET_MATERIALIZATION" not in serving.event_types(run_id)


def test_a_fork_process_that_is_not_confined_starts_no_worker(serving, monkeypatch):
    serving.wait_for_ready_worker()
    monkeypatch.setenv("DPONE_WORKSPACE", "wm-fork-unconfined")
    run_id = serving.launch("ok")
    serving.wait(run_id)
    assert serving.tags(run_id)[FALLBACK_TAG] == "warm.unconfined"


def test_edited_python_takes_the_default_path_and_the_next_worker_loads_the_edit(serving):
    serving.wait_for_ready_worker()
    location: Path = serving.folder / "warm_location.py"
    location.write_text(location.read_text() + "\n# edited\n")
    run_id = serving.launch("ok")
    assert serving.wait(run_id) == DagsterRunStatus.SUCCESS
    tags = serving.tags(run_id)
    assert tags[LAUNCHER_TAG] == "default" and tags[FALLBACK_TAG] == "warm.code_stale", tags
    assert "warm_location.py changed since the warm worker loaded" in serving.text(run_id)
    after = _warm_launch(serving, "ok")  # the replacement loaded the edited file
    assert serving.wait(after) == DagsterRunStatus.SUCCESS
