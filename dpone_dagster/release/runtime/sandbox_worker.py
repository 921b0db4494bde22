"""`python -m dpone_dagster.release.runtime.sandbox_worker`: one synthetic task's SQL, in a process the kernel confines.

Reads a `SandboxRun` as JSON on stdin, restricts this fresh (single-threaded) process with Landlock
so it may create, write or delete only beneath the run's lake directory, then runs the statements
on a DuckDB sandbox connection (`sandbox.execute`) and prints one JSON line: the result with
`kernel_confined`, or `{"error": [code, message]}`. Started only by `sandbox.run_sandboxed`.

What a reader could get wrong: the restriction comes first, before duckdb is imported or any file
is opened, and it cannot be lifted; reading stays allowed everywhere (the DuckDB sandbox is what
keeps a statement from reading host files). Without Landlock it still runs, DuckDB sandbox only,
and says so (`kernel_confined: false`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dpone_dagster.confinement.landlock import ConfinementUnavailableError, Rule, restrict_self
from dpone_dagster.errors import DponeError
from dpone_dagster.release.runtime.sandbox import SandboxRun, execute


def main() -> int:
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    run = SandboxRun(
        lake_dir=request["lake_dir"],
        attachments=[tuple(item) for item in request["attachments"]],
        writer=request["writer"],
        statements=[tuple(item) for item in request["statements"]],
        logical_writes=list(request["logical_writes"]),
    )
    try:
        confined = confine(Path(run.lake_dir))
    except DponeError as error:
        print(json.dumps({"error": ["runtime.sandbox_failed", f"the task could not be confined ({error.code})"]}))
        return 0
    print(json.dumps({**execute(run), "kernel_confined": confined}))
    return 0


def confine(lake: Path) -> bool:
    """Restrict this process to creating, writing and deleting beneath `lake` only; False without Landlock."""
    lake.mkdir(parents=True, exist_ok=True)
    try:
        restrict_self([Rule(lake.resolve())])
    except ConfinementUnavailableError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
