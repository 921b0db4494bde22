"""Where the synthetic runtime runs delivered SQL: a DuckDB sandbox, in a child process the kernel confines.

Two floors below the SQL reader (`release.build.flow_sql`), each enough on its own to keep a task
inside its lake directory:

- `sandbox_connection(lake_dir)`: an in-memory DuckDB on which, before any statement of a task runs,
  the temp directory is put inside the lake, `allowed_directories` = the lake only,
  `enable_external_access = false` (no file outside, no extension install or load, no replacement
  scan of a host file) and then `lock_configuration = true`, in that order (DuckDB refuses to widen
  `allowed_directories` once external access is off); autoload/autoinstall are off from the start.
  `SANDBOX_SETTINGS` is what a locked sandbox reports, `sandbox_settings(conn)` reads it back.
- `run_sandboxed(run)`: executes a `SandboxRun` (attachments, statements, written relations) in a
  fresh `python -m dpone_dagster.release.runtime.sandbox_worker` process that first restricts
  itself with Linux Landlock (`confinement.landlock`, the mechanism that confines a fork's
  processes) so that it may create, write or delete only beneath the lake directory, then opens the
  sandbox connection. A fresh process because Landlock binds the calling thread and its later
  children, and a Dagster step process already runs threads. Where the kernel has no Landlock the
  worker runs with the DuckDB sandbox only and the result says `kernel_confined: False` (logged as
  a warning with code `confinement.unavailable`).

What a reader could get wrong: errors come back as `(code, message)` of the standard runtime's own
codes (`runtime.statement_failed`, `runtime.connection_unavailable`), not as exceptions, so the
caller (`runtime.ports.SandboxWriter`) raises them with its error class; `runtime.sandbox_failed` is
this module's own, for a worker that did not answer. Writing inside the lake stays possible: that is
the synthetic runtime's own data.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpone_dagster.contracts.coded import CodedError

if TYPE_CHECKING:
    import duckdb

log = logging.getLogger(__name__)

TEMP_SUBDIRECTORY = ".tmp"
WORKER_MODULE = "dpone_dagster.release.runtime.sandbox_worker"
WORKER_TIMEOUT_SECONDS = 3600
SANDBOX_SETTINGS = {
    "enable_external_access": "false",
    "lock_configuration": "true",
    "autoload_known_extensions": "false",
    "autoinstall_known_extensions": "false",
    "allow_community_extensions": "false",
}
"""What `duckdb_settings()` reports on a sandbox connection (besides `allowed_directories`)."""


class SandboxError(CodedError):
    codes = {
        "runtime.sandbox_failed": (
            "The confined process that runs a synthetic task's SQL did not answer (it crashed, "
            "was killed or timed out); nothing it wrote outside its lake can exist, retry the "
            "task."
        ),
    }


@dataclass(frozen=True)
class SandboxRun:
    """One task's statements: databases of the lake to attach (alias, file name, read-only), the
    alias written into, `(member path, SQL text)` per file, and the relations whose rows are counted."""

    lake_dir: str
    attachments: list[tuple[str, str, bool]]
    writer: str
    statements: list[tuple[str, str]]
    logical_writes: list[str] = field(default_factory=list)


def sandbox_connection(lake_dir: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory connection confined to `lake_dir` and locked (see the module docstring)."""
    import duckdb

    lake = Path(lake_dir).absolute()
    allowed = sorted({f"{lake}/", f"{lake.resolve()}/"})
    conn = duckdb.connect(
        ":memory:",
        config={
            "autoload_known_extensions": False,
            "autoinstall_known_extensions": False,
            "allow_community_extensions": False,
        },
    )
    try:
        conn.execute("SET temp_directory = ?", [str(lake / TEMP_SUBDIRECTORY)])
        conn.execute("SET allowed_directories = ?", [allowed])
        conn.execute("SET enable_external_access = false")
        conn.execute("SET lock_configuration = true")
    except BaseException:
        conn.close()
        raise
    return conn


def sandbox_settings(conn: Any) -> dict[str, Any]:
    """The sandbox-relevant settings of `conn` as DuckDB reports them; `allowed_directories` as a list."""
    rows = conn.execute(
        "SELECT name, value FROM duckdb_settings() WHERE name IN (SELECT unnest(?))", [list(SANDBOX_SETTINGS)]
    ).fetchall()
    allowed = conn.execute("SELECT current_setting('allowed_directories')").fetchone()[0]
    return {**dict(rows), "allowed_directories": list(allowed)}


def run_sandboxed(run: SandboxRun) -> dict[str, Any]:
    """`execute(run)` in a Landlock-confined worker process.

    Returns `{"statements", "rows", "kernel_confined"}` or `{"error": [code, message]}`.
    """
    try:
        completed = subprocess.run(
            [sys.executable, "-m", WORKER_MODULE],
            input=json.dumps(asdict(run)).encode("utf-8"),
            capture_output=True,
            timeout=WORKER_TIMEOUT_SECONDS,
            check=False,
        )
        answer = json.loads(completed.stdout.decode("utf-8").strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        raise SandboxError("runtime.sandbox_failed", "the confined worker did not answer") from None
    if not isinstance(answer, dict) or not ("error" in answer or "statements" in answer):
        raise SandboxError("runtime.sandbox_failed", "the confined worker gave no result")
    if answer.get("error", [None])[0] == "runtime.sandbox_failed":
        raise SandboxError("runtime.sandbox_failed", str(answer["error"][1]))
    if answer.get("kernel_confined") is False:
        log.warning(
            (
                "[confinement.unavailable] the synthetic task ran in the DuckDB sandbox only: this kernel offers no "
                "Landlock"
            )
        )
    return answer


def execute(run: SandboxRun) -> dict[str, Any]:
    """Run `run` on a sandbox connection in this process (the worker's half; see `run_sandboxed`)."""
    import duckdb

    lake = Path(run.lake_dir)
    with sandbox_connection(lake) as conn:
        for alias, database, read_only in run.attachments:
            quoted = str(lake / database).replace("'", "''")
            try:
                conn.execute(f"ATTACH '{quoted}' AS {alias}" + (" (READ_ONLY)" if read_only else ""))
            except duckdb.Error as error:
                return {
                    "error": [
                        "runtime.connection_unavailable",
                        f"connection {alias!r} cannot be opened ({type(error).__name__})",
                    ]
                }
        conn.execute(f"USE {run.writer}")
        for path, sql in run.statements:
            try:
                conn.execute(sql)
            except duckdb.Error as error:
                return {
                    "error": ["runtime.statement_failed", f"{path.split('/', 2)[-1]} failed ({type(error).__name__})"]
                }
        rows = {}
        for relation in run.logical_writes:
            schema, table = relation.split(".")
            found = conn.execute(
                (
                    "select count(*) from information_schema.tables where table_catalog = ? and table_schema = ? and "
                    "table_name = ?"
                ),
                [run.writer, schema, table],
            ).fetchone()[0]
            if found:
                rows[relation] = conn.execute(f'select count(*) from "{run.writer}"."{schema}"."{table}"').fetchone()[0]
    return {"statements": len(run.statements), "rows": rows}
