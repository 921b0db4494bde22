"""How the launcher hands over to the command it confined: `exec`, or this very interpreter.

A command that is one of this interpreter's own Python entry points — a console script of its
environment (`dagster`, `dg`, `dbt`, `dpone`), `python -m module`, `python script.py` — runs in the
launcher's process after confinement (`runpy`), so the modules the launcher already imported
(configuration, SQLAlchemy, pydantic) are not imported a second time by a fresh interpreter: that
was most of the launcher's cost (bench/bench_confinement.py). Anything else is `exec`ed.

What a reader could get wrong: running in-process is only done while this process has one thread
(a confined thread with an unconfined sibling would be a hole); otherwise it execs, which ends
every other thread. Either way the command sees the handed-on environment in `os.environ`, `argv`
as it would after an exec, and its exceptions and exit status are its own.
"""

from __future__ import annotations

import os
import runpy
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from dpone_dagster.errors import DponeError


class CommandNotFoundError(DponeError):
    code = "confinement.command_not_found"


def thread_count() -> int:
    """Threads of this process (0 when /proc cannot tell, which callers treat as "more than one")."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def _same_interpreter(path: str) -> bool:
    return os.path.realpath(path) == os.path.realpath(sys.executable)


def _console_script(path: str) -> bool:
    """A script whose `#!` line names this interpreter (what pip writes for an entry point)."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(512)
    except OSError:
        return False
    return first.startswith(b"#!") and _same_interpreter(first[2:].strip().decode(errors="replace"))


def in_process_target(command: Sequence[str], path_env: str | None) -> tuple[str, str, list[str]] | None:
    """('module' | 'path', what to run, argv) when `command` can run in this interpreter, else None."""
    found = shutil.which(command[0], path=path_env)
    if found is None:
        return None
    if _same_interpreter(found):
        if len(command) >= 3 and command[1] == "-m":
            return "module", command[2], [command[2], *command[3:]]
        if len(command) >= 2 and not command[1].startswith("-") and Path(command[1]).is_file():
            return "path", command[1], list(command[1:])
        return None
    if _console_script(found):
        return "path", found, [found, *command[1:]]
    return None


def hand_over(command: Sequence[str], env: Mapping[str, str]) -> None:
    """Become `command` with `env`: in this interpreter when possible and safe, else by `exec`."""
    target = in_process_target(command, env.get("PATH"))
    sys.stdout.flush()
    sys.stderr.flush()
    if target is None or thread_count() != 1:
        try:
            os.execvpe(command[0], list(command), dict(env))
        except FileNotFoundError:
            raise CommandNotFoundError(f"{Path(command[0]).name!r} was not found") from None
    kind, what, argv = target
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # computed before TMPDIR was handed on
    sys.argv = argv
    if kind == "module":
        runpy.run_module(what, run_name="__main__", alter_sys=True)
    else:
        sys.path[0] = str(Path(what).resolve().parent)
        runpy.run_path(what, run_name="__main__")
