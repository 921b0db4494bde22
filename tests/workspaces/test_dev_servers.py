"""`dpone fork drop` respects a running fork UI (issue 18 item 5): refused with `workspace.in_use`
naming the processes `dpone dev` recorded in the fork's home (and their descendants), or with --stop
stopped cleanly first; a stale pid file (process gone, pid reused) blocks nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from dpone_dagster.cli import app
from dpone_dagster.config import load_config
from dpone_dagster.workspaces.dagster_home import prepare_dagster_home
from dpone_dagster.workspaces.dev_servers import PID_FILE, record_dev_server, serving_processes
from dpone_dagster.workspaces.service import Workspaces

# A stand-in for `dagster dev`: a parent that starts a child whose command line names the webserver.
_FAKE_DEV = (
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', 'dagster-' + 'webserver']); "
    "time.sleep(600)"
)


def _fork_home(monkeypatch, workspace: str):
    monkeypatch.setenv("DPONE_WORKSPACE", workspace)
    home = prepare_dagster_home(load_config(), {}).path
    monkeypatch.delenv("DPONE_WORKSPACE")
    return home


@pytest.fixture
def served_fork(monkeypatch):
    Workspaces(load_config()).create_fork("wm-fork-served", "prod", owner="alice")
    home = _fork_home(monkeypatch, "wm-fork-served")
    server = subprocess.Popen([sys.executable, "-c", _FAKE_DEV], start_new_session=True)
    record_dev_server(home, server.pid)
    deadline = time.monotonic() + 60
    while len(serving_processes(home)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    yield home, server
    if server.poll() is None:
        for process in serving_processes(home):
            subprocess.run(["kill", "-9", str(process.pid)], check=False)
        server.kill()
    server.wait(timeout=30)


def test_drop_refuses_while_the_forks_own_dev_server_runs_and_names_them(served_fork) -> None:
    home, server = served_fork
    result = CliRunner().invoke(app, ["fork", "drop", "wm-fork-served", "--as", "alice"])
    assert result.exit_code == 1
    assert "workspace.in_use" in result.output
    assert f"dagster dev (pid {server.pid})" in result.output
    assert "webserver (pid" in result.output
    assert home.is_dir() and server.poll() is None
    assert "wm-fork-served" in [row.id for row in Workspaces(load_config()).list() if not row.deleted]


def test_drop_with_stop_stops_them_first_and_leaves_no_server_on_a_deleted_home(served_fork) -> None:
    home, server = served_fork
    running = serving_processes(home)
    result = CliRunner().invoke(app, ["fork", "drop", "wm-fork-served", "--as", "alice", "--stop"])
    assert result.exit_code == 0, result.output
    assert not home.exists()
    assert f"stopped dagster dev (pid {server.pid})" in result.output  # says what it stopped
    assert "stopped webserver (pid" in result.output
    server.wait(timeout=30)
    for process in running:
        stat = f"/proc/{process.pid}/stat"
        try:
            state = open(stat).read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        assert state == "Z", f"{process} still runs after the drop"


def test_a_refused_drop_with_stop_stops_nothing(served_fork) -> None:
    """--stop acts only for a drop that will happen: an actor who may not drop it, or a standing
    dev workspace attached below it, refuses before any of the fork's servers is touched."""
    home, server = served_fork
    result = CliRunner().invoke(app, ["fork", "drop", "wm-fork-served", "--as", "mallory", "--stop"])
    assert result.exit_code == 1 and "workspace.in_use" not in result.output, result.output
    Workspaces(load_config()).create_fork("bob-dev", "wm-fork-served", owner="alice")  # a standing dev workspace
    result = CliRunner().invoke(app, ["fork", "drop", "wm-fork-served", "--as", "alice", "--stop"])
    assert result.exit_code == 1 and "bob-dev" in result.output, result.output
    assert server.poll() is None and len(serving_processes(home)) >= 2 and home.is_dir()


def test_a_stale_pid_file_blocks_nothing(monkeypatch) -> None:
    Workspaces(load_config()).create_fork("wm-fork-stale", "prod", owner="alice")
    home = _fork_home(monkeypatch, "wm-fork-stale")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(timeout=30)
    record_dev_server(home, gone.pid)
    assert serving_processes(home) == []
    assert not (home / PID_FILE).exists()


def test_a_reused_pid_is_not_taken_for_the_recorded_server(monkeypatch) -> None:
    Workspaces(load_config()).create_fork("wm-fork-reused", "prod", owner="alice")
    home = _fork_home(monkeypatch, "wm-fork-reused")
    record_dev_server(home)  # this test process, alive, with its real start time
    assert [p.pid for p in serving_processes(home)][:1]
    entry = json.loads((home / PID_FILE).read_text())
    (home / PID_FILE).write_text(json.dumps({**entry, "start": "1"}))  # same pid, another start time
    assert serving_processes(home) == []
    assert Workspaces(load_config()).drop("wm-fork-reused", actor="alice").workspace_deleted
