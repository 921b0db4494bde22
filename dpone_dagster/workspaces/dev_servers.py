"""Which Dagster processes serve a workspace's own Dagster home, so a fork drop never pulls the home
from under a running UI (issue 18: every page answered Internal Server Error afterwards).

`dpone dev` records itself in the home it serves (`record_dev_server`: `<home>/dpone-dev.pid`, the
pid and the process's start time) and then becomes `dagster dev` (`execve` keeps the pid); `dagster
dev` starts the webserver, the daemon and the code servers as its descendants. `serving_processes`
finds that recorded process alive (same pid *and* same start time, so a reused pid is not mistaken
for it) and names it and its descendants by role. `require_home_idle` is what a drop calls first:
`workspace.in_use` naming them, or with `stop=True` a SIGTERM to the recorded process's group and its
descendants, SIGKILL after a grace period, and a refusal (`workspace.in_use`) if any still lives.

What a reader could get wrong: only servers started by `dpone dev` are seen (a hand-started `dagster
dev` with `DAGSTER_HOME` set to the fork's home writes no pid file, and a home set explicitly in the
environment is not the fork's embedded home, which is the only one a drop removes). Liveness and
descendants come from /proc (Linux); elsewhere the recorded pid's liveness alone is checked.
A stale pid file (its process gone) blocks nothing and is removed by the next check.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from dpone_dagster.config import DponeConfig
from dpone_dagster.errors import WorkspaceError
from dpone_dagster.workspaces.dagster_home import default_dagster_home

PID_FILE = "dpone-dev.pid"
_PROC = Path("/proc")
_ROLES = (
    ("dagster-webserver", "webserver"),
    ("dagster_webserver", "webserver"),
    ("dagster-daemon", "daemon"),
    ("dagster._daemon", "daemon"),
    ("api grpc", "code server"),
    ("code-server", "code server"),
)


class WorkspaceInUseError(WorkspaceError):
    code = "workspace.in_use"


@dataclass(frozen=True)
class ServingProcess:
    pid: int
    role: str

    def __str__(self) -> str:
        return f"{self.role} (pid {self.pid})"


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22); None if gone."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def record_dev_server(home: Path, pid: int | None = None) -> Path:
    """Write `<home>/dpone-dev.pid` for `pid` (default: this process, which then execs `dagster dev`)."""
    pid = os.getpid() if pid is None else pid
    path = home / PID_FILE
    path.write_text(json.dumps({"pid": pid, "start": _start_ticks(pid)}) + "\n", encoding="utf-8")
    return path


def _recorded(home: Path) -> int | None:
    path = home / PID_FILE
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        pid, start = int(entry["pid"]), entry.get("start")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if _alive(pid) and (start is None or not _PROC.is_dir() or _start_ticks(pid) == start):
        return pid
    path.unlink(missing_ok=True)  # stale: the recorded process is gone (or its pid was reused)
    return None


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for entry in _PROC.glob("[0-9]*/stat") if _PROC.is_dir() else ():
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.parent.name))
    return found


def _role(pid: int, default: str) -> str:
    try:
        command = (_PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return default
    return next((role for marker, role in _ROLES if marker in command), default)


def serving_processes(home: Path) -> list[ServingProcess]:
    """The live `dpone dev` recorded in `home` and its descendants, each named by its role."""
    root = _recorded(home)
    if root is None:
        return []
    found, queue = [ServingProcess(root, _role(root, "dagster dev"))], [root]
    while queue:
        for child in _children(queue.pop()):
            found.append(ServingProcess(child, _role(child, "dagster process")))
            queue.append(child)
    return found


def _signal(processes: list[ServingProcess], signum: int) -> None:
    for process in processes:
        try:
            os.kill(process.pid, signum)
        except ProcessLookupError:
            continue


def stop_serving(home: Path, *, grace_seconds: float = 20.0) -> list[ServingProcess]:
    """SIGTERM the recorded `dpone dev` and its descendants, SIGKILL what outlives the grace period;
    return what was running. `workspace.in_use` if anything still lives afterwards."""
    running = serving_processes(home)
    _signal(running, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline and _living(running):
        time.sleep(0.2)
    if _living(running):
        _signal(_living(running), signal.SIGKILL)
        time.sleep(0.5)
    left = _living(running)
    if left:
        raise WorkspaceInUseError(f"could not stop {', '.join(map(str, left))}; nothing was dropped")
    (home / PID_FILE).unlink(missing_ok=True)
    return running


def _living(processes: list[ServingProcess]) -> list[ServingProcess]:
    """The processes still running (a zombie awaiting its parent's wait has stopped)."""
    return [p for p in processes if _alive(p.pid) and not _zombie(p.pid)]


def _zombie(pid: int) -> bool:
    try:
        return (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def require_home_idle(config: DponeConfig, workspace_id: str, *, stop: bool = False) -> list[ServingProcess]:
    """Before a drop: refuse (`workspace.in_use`) while the fork's own Dagster processes run, or with
    `stop` stop them first; return what was stopped."""
    home = default_dagster_home(config, workspace_id)
    running = serving_processes(home) if home.is_dir() else []
    if not running:
        return []
    if not stop:
        raise WorkspaceInUseError(
            f"workspace {workspace_id!r} is served by a running `dpone dev`: {', '.join(map(str, running))}; "
            "stop it first, or drop with --stop to stop it cleanly"
        )
    return stop_serving(home)
