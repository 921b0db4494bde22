"""A warm run worker: a process that loaded the code location before its run was launched.

`WarmRunLauncher` (`integration/warm/launcher.py`) starts it with the code location's own interpreter,
working directory and environment, as `python -m dpone_dagster.integration.warm.worker api execute_run
--warm-control <in>,<out>`, and talks to it over two pipes (one JSON object a line):

1. launcher -> worker: `{"origin", "instance_ref"}` (the repository origin runs of the location carry,
   serialized by Dagster). The worker opens the instance, loads the repository exactly as a run worker
   would (`recon_repository_from_origin(origin).get_definition()`), takes its `CodeFingerprint`, and
   answers `{"ready": pid}` (or `{"failed": reason}` and exits).
2. launcher -> worker: `{"run_id", "instance_ref"}`. If the code changed since it loaded, the worker
   answers `{"stale": file}` and exits (the launcher takes the default path); else it answers
   `{"started": pid}` and executes the run with Dagster's own body of `dagster api execute_run`
   (`_execute_run_command_body`: the same "Started process" / "Process for run exited" engine
   events, run status transitions, failure and cancellation handling), then exits. One run per process.

End of input at any point (the launcher's process went away) ends an idle worker.

What a reader could get wrong: the command line says `api execute_run` on purpose: code that asks
whether it runs in a run worker (`integration/dbt/project.py` `in_run_worker`: a run worker never runs
`dbt parse` while loading the definitions) must get the same answer as in `dagster api execute_run`.
SIGINT (what `terminate` sends) and SIGTERM are captured as Dagster's interrupts from the moment the
worker says "started", so a cancellation ends the run CANCELED, not the process.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import IO, Any

CONTROL_FLAG = "--warm-control"
COMMAND = ("api", "execute_run")


def _send(outbox: IO[str], message: dict[str, Any]) -> None:
    outbox.write(json.dumps(message) + "\n")
    outbox.flush()


def _receive(inbox: IO[str]) -> dict[str, Any] | None:
    line = inbox.readline()
    return json.loads(line) if line.strip() else None


def _dbt_project() -> Path | None:
    """The configured dbt project (its shape is part of the fingerprint); None outside a dpone project."""
    from dpone_dagster.config import load_config
    from dpone_dagster.errors import DponeError

    try:
        config = load_config()
        return config.dbt_project_path if config.dbt_project_dir is not None else None
    except DponeError:
        return None


def serve(inbox: IO[str], outbox: IO[str]) -> int:
    """Load, wait for one run, execute it (see the module docstring); the process's exit code."""
    from dagster import DagsterInstance
    from dagster._cli.api import _execute_run_command_body
    from dagster._core.instance.ref import InstanceRef
    from dagster._core.origin import RepositoryPythonOrigin
    from dagster._serdes import deserialize_value
    from dagster._utils.hosted_user_process import recon_repository_from_origin
    from dagster._utils.interrupts import capture_interrupts

    from dpone_dagster.integration.warm.fingerprint import CodeFingerprint

    hello = _receive(inbox)
    if hello is None:
        return 0
    try:
        origin = deserialize_value(hello["origin"], RepositoryPythonOrigin)
        instance = DagsterInstance.from_ref(deserialize_value(hello["instance_ref"], InstanceRef))
    except Exception as exc:  # reported to the launcher, which then never hands this worker a run
        _send(outbox, {"failed": f"the warm worker could not open the instance ({type(exc).__name__})"})
        return 1
    with instance:
        try:
            recon_repository_from_origin(origin).get_definition()
            fingerprint = CodeFingerprint.take(_dbt_project())
            if "dpone_dagster.integration.dbt" in sys.modules:  # a dbt imported before the run needs it
                from dpone_dagster.integration.dbt.prewarm import start_for_warm_worker

                start_for_warm_worker()
        except Exception as exc:
            _send(outbox, {"failed": f"the warm worker could not load the code location ({type(exc).__name__})"})
            return 1
        _send(outbox, {"ready": os.getpid()})
        order = _receive(inbox)
        if order is None:
            return 0
        changed = fingerprint.changed_file()
        if changed is not None:
            _send(outbox, {"stale": changed})
            return 0
        if order.get("instance_ref") != hello["instance_ref"]:
            _send(outbox, {"failed": "the run belongs to another Dagster instance than the warm worker opened"})
            return 0
        with capture_interrupts():
            _send(outbox, {"started": os.getpid()})
            return _execute_run_command_body(order["run_id"], instance, lambda _event: None, False)


def main(argv: list[str]) -> int:
    if tuple(argv[1:3]) != COMMAND or len(argv) != 5 or argv[3] != CONTROL_FLAG:
        sys.stderr.write(f"usage: python -m {__spec__.name} api execute_run {CONTROL_FLAG} <in>,<out>\n")
        return 2
    read_fd, write_fd = (int(fd) for fd in argv[4].split(","))
    inbox, outbox = os.fdopen(read_fd, "r", encoding="utf-8"), os.fdopen(write_fd, "w", encoding="utf-8")
    try:
        return serve(inbox, outbox)
    except BrokenPipeError:
        return 0  # the launcher's process went away before this worker was handed a run
    finally:
        inbox.close()
        with contextlib.suppress(OSError):
            outbox.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
