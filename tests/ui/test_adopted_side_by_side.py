"""Issue 18 "Done when": prod's and a fork's UI side by side from `dpone dev` on an adopted project, and a
fork drop against the running fork UI.

tests/fixtures/shop (a dg project + a dbt-duckdb shop) is copied to an empty folder, `dpone init`ed, prod
is built with a terminal `dbt build`, and a fork is created; all from this repository's venv (the wheel
path is tests/adoption/test_wheel_adoption.py). Then `dpone dev` serves prod and `dpone dev --workspace
<fork>` serves the fork, each on its own port and Dagster home, both at once; headless Chromium finds
`shop@prod` on prod's screen and `shop@<fork>` on the fork's (and neither on the other's).
`dpone fork drop <fork>` is refused with `workspace.in_use` naming the fork's webserver while it runs,
and the fork's UI still answers afterwards (its home is still there); `dpone fork drop <fork> --stop`
stops it (SIGTERM: `dagster dev` logs its clean shutdown) and drops: no process of the fork's server
group is left, and its output holds no traceback.

What a reader could get wrong: both `dpone dev` are started the way a shell script's background job is,
with SIGINT ignored (inherited through exec); `dagster dev` maps SIGTERM to SIGINT's handler, so without
`dpone dev` restoring the default a SIGTERM is ignored and only --stop's SIGKILL ends it, not cleanly.
Every server group is killed in a finally. Chromium is the system one (`bench.screenshots.CHROMIUM`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.screenshots import CHROMIUM, DagsterWebserver, _stop, _wait_for_http, free_port
from tests.ui.test_fork_deployment_ui import _browser, _text

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed"),
]

REPO_ROOT = Path(__file__).resolve().parents[2]
SHOP = REPO_ROOT / "tests" / "fixtures" / "shop"
FORK = "wm-fork-side"
PROD_LOCATION, FORK_LOCATION = "shop@prod", f"shop@{FORK}"
BIN = Path(sys.executable).parent
CLEAN_SHUTDOWN = "Dagster services shut down."

_RUNS = "{ runsOrError(limit: 1) { __typename } }"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DPONE_", "DAGSTER_", "VIRTUAL_ENV"))}
    return {**env, "PATH": f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}"}


def _run(*args: str, cwd: Path, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(BIN / args[0]), *args[1:]], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600, check=False
    )
    if ok:
        assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _as_a_background_job() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what `cmd &` in a shell script gives the command


@contextlib.contextmanager
def _dpone_dev(root: Path, log_path: Path, *args: str) -> Iterator[DagsterWebserver]:
    """`dpone dev` on a free port in its own process group, until every location loaded; killed at exit."""
    port = free_port()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(BIN / "dpone"), "dev", "--port", str(port), *args],
            cwd=root,
            env=_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_as_a_background_job,
        )
    server = DagsterWebserver(base_url=f"http://127.0.0.1:{port}", process=process, log_path=log_path)
    try:
        _wait_for_http(server, 300)
        server.locations = tuple(server.wait_until_loaded(300))
        yield server
    finally:
        _stop(process)


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:300]
    except OSError:
        return "(gone)"


def _group(pgid: int) -> list[int]:
    """Live (non-zombie) processes of the process group `pgid`, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(stat.parent.name))
    return found


def _answers(server: DagsterWebserver, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(server.base_url + path, timeout=60) as response:
        return response.status, response.read().decode(errors="replace")


def test_prod_and_fork_ui_side_by_side_and_a_drop_against_the_running_fork_ui(tmp_path) -> None:
    root = tmp_path / "empty" / "shop"
    shutil.copytree(SHOP, root)
    _run("dpone", "init", cwd=root)
    _run("dbt", "build", "--profiles-dir", ".", cwd=root / "shop_dbt")
    _run("dpone", "fork", "create", FORK, "--parent", "prod", cwd=root)
    fork_home = root / ".dpone" / "workspaces" / FORK / "dagster_home"

    with (
        _dpone_dev(root, tmp_path / "prod.log") as prod,
        _dpone_dev(root, tmp_path / "fork.log", "--workspace", FORK) as fork,
    ):
        assert set(prod.locations) == {PROD_LOCATION} and set(fork.locations) == {FORK_LOCATION}
        with _browser(prod) as prod_page:
            fork_page = prod_page.context.new_page()
            prod_screen = _text(prod_page, prod, "/locations", PROD_LOCATION)
            fork_screen = _text(fork_page, fork, "/locations", FORK_LOCATION)
            assert PROD_LOCATION in prod_screen and FORK_LOCATION not in prod_screen, prod_screen[:2000]
            assert FORK_LOCATION in fork_screen and PROD_LOCATION not in fork_screen, fork_screen[:2000]

            refused = _run("dpone", "fork", "drop", FORK, cwd=root, ok=False)
            assert refused.returncode != 0 and "workspace.in_use" in refused.stderr, refused.stdout + refused.stderr
            assert "webserver (pid" in refused.stderr, refused.stderr
            assert fork_home.is_dir() and FORK in _run("dpone", "fork", "list", cwd=root).stdout
            for path in ("/server_info", "/locations", "/runs"):
                status, body = _answers(fork, path)
                assert status == 200 and "Internal Server Error" not in body, (path, status, body[:500])
            assert fork.graphql(_RUNS)["runsOrError"]["__typename"] == "Runs"
            fork_screen = _text(fork_page, fork, "/locations", FORK_LOCATION)
            assert FORK_LOCATION in fork_screen and "Internal Server Error" not in fork_screen, fork_screen[:2000]

        fork_group = _group(fork.process.pid)
        assert len(fork_group) >= 4, fork_group  # dagster dev, its webserver, daemon and code server(s)
        stopped = _run("dpone", "fork", "drop", FORK, "--stop", cwd=root)
        assert f"deleted workspace {FORK}" in stopped.stdout, stopped.stdout
        fork.process.wait(timeout=60)
        left = {pid: _command_line(pid) for pid in _group(fork.process.pid)}
        assert not left, f"a server process of the dropped fork is left: {left}"
        assert not fork_home.exists()
        fork_output = fork.log_path.read_text(errors="replace")
        assert "Traceback" not in fork_output, fork_output[-3000:]
        assert CLEAN_SHUTDOWN in fork_output, fork_output[-3000:]  # SIGTERM, not --stop's SIGKILL fallback

        assert prod.location_statuses()[PROD_LOCATION]["loadStatus"] == "LOADED"  # prod's UI is untouched
        assert FORK not in _run("dpone", "fork", "list", cwd=root).stdout.split()
