"""The pre-imported dbt (`integration/dbt/prewarm.py`) runs a command exactly as a new `dbt` process would.

Each test drives the real client and server on a tiny plain-DuckDB dbt project in `tmp_path` and,
where behaviour is compared, the installed `dbt` the same way: the same exit code on success, on a
parse error and on a failing model; SIGINT (dagster-dbt's cancellation) reaches dbt; a dbt process
killed by a signal makes the client end by the same signal; a client that goes away takes its dbt
process with it; with no server the client becomes the real dbt. That the command really ran in a
forked dbt is read from dbt's own JSON log (`info.pid` is not the client's pid).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpone_dagster.integration.dbt import prewarm
from dpone_dagster.integration.dbt.project import dbt_executable
from dpone_dagster.integration.warm.worker import CONTROL_FLAG

PROJECT = {
    "dbt_project.yml": "name: prewarm_probe\nprofile: prewarm_probe\nversion: '1.0'\nconfig-version: 2\n",
    "models/one.sql": "select 1 as id\n",
    "macros/slow.sql": (  # minutes of Jinja: Python bytecode, so SIGINT is seen at once
        "{% macro slow() %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
        "{% endmacro %}\n"
    ),
}
PROFILE = (
    "prewarm_probe:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: '{path}'\n      threads: 1\n"
)


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "probe"
    for name, text in PROJECT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "profiles.yml").write_text(PROFILE.format(path=tmp_path / "probe.duckdb"))
    return root


@pytest.fixture
def server(tmp_path):
    """A running server and its client, the way `prewarm.start` makes them (not in this process's state)."""
    folder = tmp_path / "prewarm"
    folder.mkdir()
    socket_path = folder / prewarm.SOCKET_NAME
    process = subprocess.Popen(
        prewarm.server_command(socket_path, os.getpid()), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    client = prewarm.write_client(folder, socket_path, dbt_executable())
    deadline = time.monotonic() + 30
    while not socket_path.exists():  # it listens before it imports dbt; a client before that runs the real dbt
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.05)
    yield process, str(client)
    for pid in _descendants(process.pid):
        os.kill(pid, signal.SIGKILL)
    process.kill()
    _, errors = process.communicate()
    assert b"Warning" not in errors, errors.decode(errors="replace")[-2000:]  # e.g. runpy's double import


def _env(project: Path) -> dict[str, str]:
    return {**os.environ, "DBT_PROFILES_DIR": str(project), "DBT_LOG_FORMAT": "json", "PYTHONUNBUFFERED": "1"}


def _run(executable: str, project: Path, *args: str, target: str = "target") -> tuple[int, list[dict], int]:
    env = {**_env(project), "DBT_TARGET_PATH": str(project / target)}
    process = subprocess.Popen(
        [executable, *args], cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out, _ = process.communicate(timeout=300)
    return process.returncode, _events(out), process.pid


def _events(out: bytes) -> list[dict]:
    events = []
    for line in out.decode(errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def _dbt_pids(events: list[dict]) -> set[int]:
    return {e["info"]["pid"] for e in events if "info" in e}


def test_a_command_runs_in_a_forked_dbt_with_the_real_dbts_result(project, server):
    _, client = server
    real_code, real_events, _ = _run(dbt_executable(), project, "build", target="real")
    code, events, client_pid = _run(client, project, "build", target="prewarmed")
    assert (code, real_code) == (0, 0)
    assert _dbt_pids(events) and client_pid not in _dbt_pids(events)  # ran in the server's fork
    assert [e["info"]["name"] for e in events] == [e["info"]["name"] for e in real_events]
    assert (project / "prewarmed" / "run_results.json").is_file()  # the client's environment: its target path


@pytest.mark.parametrize(
    ("model", "expected"),
    [("select * from {{ ref('no_such_model') }}", 2), ("select * from no_such_table", 1)],
    ids=["parse-error", "failing-model"],
)
def test_a_failing_command_ends_with_the_real_dbts_exit_code(project, server, model, expected):
    _, client = server
    (project / "models" / "one.sql").write_text(model)
    assert _run(dbt_executable(), project, "build")[0] == expected
    code, events, client_pid = _run(client, project, "build")
    assert code == expected
    assert client_pid not in _dbt_pids(events)


def _slow(client: str, project: Path) -> subprocess.Popen:
    process = subprocess.Popen(
        [client, "run-operation", "slow"],
        cwd=project,
        env=_env(project),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    time.sleep(6)  # dbt is in the query by now
    assert process.poll() is None
    return process


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _descendants(pid: int) -> list[int]:
    found = _children(pid)
    return found + [d for child in found for d in _descendants(child)]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def _gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _dbt_process(server_process: subprocess.Popen) -> int:
    """The forked dbt process: a child of a handler the server forked."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for handler in _children(server_process.pid):
            for dbt in _children(handler):
                return dbt
        time.sleep(0.1)
    raise AssertionError("no forked dbt process")


def test_sigint_to_the_client_cancels_the_dbt_command_as_it_cancels_dbt(project, server):
    server_process, client = server
    codes = []
    for executable in (dbt_executable(), client):
        slow = _slow(executable, project)
        dbt = _dbt_process(server_process) if executable == client else slow.pid
        slow.send_signal(signal.SIGINT)  # what dagster-dbt sends on cancellation
        slow.communicate(timeout=60)
        assert _gone(dbt)  # the dbt process itself ended
        codes.append(slow.returncode)
    assert codes[0] != 0 and codes[1] == codes[0]


def test_a_killed_dbt_process_ends_the_client_by_the_same_signal(project, server):
    server_process, client = server
    slow = _slow(client, project)
    os.kill(_dbt_process(server_process), signal.SIGKILL)
    slow.communicate(timeout=60)
    assert slow.returncode == -signal.SIGKILL


def test_a_client_that_goes_away_takes_its_dbt_process_with_it(project, server):
    server_process, client = server
    slow = _slow(client, project)
    dbt = _dbt_process(server_process)
    slow.kill()
    slow.wait()
    assert _gone(dbt)


def test_a_client_that_is_not_a_child_of_the_servers_parent_is_refused(project, server):
    """A process elsewhere (a fork's dbt python model that found a prod server's socket) gets no dbt
    forked by that server: the client, started here through a shell, runs the real dbt itself."""
    _, client = server
    done = subprocess.run(
        ["sh", "-c", f"{client} build; exit $?"], cwd=project, env=_env(project), capture_output=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert b"dpone: no pre-imported dbt answered (" in done.stderr  # refused: it ran the real dbt itself


def test_with_no_server_the_client_becomes_the_real_dbt(project, tmp_path):
    client = prewarm.write_client(tmp_path, tmp_path / "nobody-listens", dbt_executable())
    done = subprocess.run([str(client), "build"], cwd=project, env=_env(project), capture_output=True, timeout=300)
    assert done.returncode == 0
    assert b"dpone: no pre-imported dbt answered (FileNotFoundError); starting dbt itself" in done.stderr
    code, events, client_pid = _run(str(client), project, "build")
    assert code == 0
    assert _dbt_pids(events) == {client_pid}  # execv: the same process


def test_the_client_is_used_without_a_version_run_and_never_by_a_process_confined_since(monkeypatch, tmp_path):
    from dpone_dagster.integration.dbt.cli import InstalledDbtCliResource

    monkeypatch.setattr(prewarm, "_started", tmp_path)
    monkeypatch.setattr(prewarm, "_started_confined", None)
    monkeypatch.delenv("DPONE_CONFINED_WORKSPACE", raising=False)
    (tmp_path / "dbt_project.yml").write_text(PROJECT["dbt_project.yml"])
    resource = InstalledDbtCliResource(project_dir=str(tmp_path), dbt_executable=dbt_executable())
    assert prewarm.is_prewarmed_client(prewarm.prewarmed_client())
    assert resource._cli_version is not None  # no `--version` run of the client
    assert not prewarm.wanted({prewarm.OPT_OUT_ENV: "0"}) and prewarm.wanted({})
    monkeypatch.setenv("DPONE_CONFINED_WORKSPACE", "wm-fork-x")  # confined after the server started
    assert prewarm.prewarmed_client() is None


def test_the_server_ends_with_the_process_that_started_it(tmp_path):
    parent = (
        "import os, subprocess, sys, time\n"
        "from dpone_dagster.integration.dbt.prewarm import server_command\n"
        f"server = subprocess.Popen(server_command({str(tmp_path / 's')!r}, os.getpid()))\n"
        "print(server.pid, flush=True)\n"
        "time.sleep(2)\n"
    )
    done = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=60)
    server = int(done.stdout.split()[0])
    assert _gone(server, timeout=10)  # PR_SET_PDEATHSIG: no server outlives its process


_IMPORT_PROBE = """
import sys
sys.argv = {argv!r}
import dpone_dagster.integration.dbt  # noqa: F401  (the package's import starts it, or not)
from dpone_dagster.integration.dbt import prewarm
print(prewarm.prewarmed_client() is not None, "dagster_dbt" in sys.modules)
"""


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["dagster", "asset", "materialize"], {}, "True False"),  # started before dagster-dbt is imported
        (["dagster", "api", "execute_run"], {}, "True False"),
        (["dagster", "api", "execute_step"], {}, "False False"),  # a step worker: most steps run no dbt
        (["dagster", "api", "grpc"], {}, "False False"),  # a code server executes no run itself
        (["dagster", "asset", "materialize"], {prewarm.OPT_OUT_ENV: "0"}, "False False"),
        (["worker.py", "api", "execute_run", CONTROL_FLAG, "3,4"], {}, "False False"),  # starts once loaded
    ],
    ids=["materialize", "run-worker", "step-worker", "code-server", "turned-off", "warm-worker"],
)
def test_importing_the_dbt_integration_starts_it_only_in_a_process_that_executes_runs(argv, env, expected):
    assert prewarm.WARM_WORKER_FLAG == CONTROL_FLAG
    probe = _IMPORT_PROBE.format(argv=argv)
    done = subprocess.run(
        [sys.executable, "-c", probe], env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == expected
