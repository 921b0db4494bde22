"""Tracking for a dbt run started from a terminal: what it built is recorded when the dbt process exits.

A `dbt build` (or run, seed, snapshot) typed in a terminal, in prod or in a fork, records every
model, seed and snapshot it built in the lake exactly as the Dagster dbt asset does after dbt exits
(`lake/state/built_tables.py`), so a fork defers to what prod built by hand and `dpone fork diff` /
`promote` see what a fork built by hand. The plugin (`lake/dbt_plugin.py`) registers
`record_at_exit` once per process; at exit it reads this invocation's `run_results.json` and
`manifest.json`, lets go of dbt's DuckDB instance and records on a session of its own.

What a reader could get wrong:
- a dbt process the Dagster asset started does not record (`DPONE_DBT_RECORDER=dagster`, set by
  `integration/dbt/run.dbt_subprocess_env`): the asset records on its own, with the Output metadata.
- only a run whose `run_results.json` carries this process's invocation id is recorded (a run that
  died before writing its results leaves an older file, never read as this run's), and only nodes of
  this plugin's lake (the profile's `database`) that dbt reports as `success` (recorded
  `materialized`) or `error` (recorded `failed`); compile, parse, test and run-operation record nothing.
- recording happens after dbt printed its summary; a failure to record is printed as
  `dpone: [code] ...` on stderr and makes the process exit non-zero (the tables are built, not tracked).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpone_dagster.config import load_config
from dpone_dagster.errors import DponeError, LakeError
from dpone_dagster.lake import duck
from dpone_dagster.lake.resolution.naming import lake_alias
from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.lake.state.built_tables import record_built_table

RECORDER_ENV = "DPONE_DBT_RECORDER"
DAGSTER_RECORDS = "dagster"
"""`DPONE_DBT_RECORDER=dagster`: the caller records what this dbt process builds (the Dagster asset)."""
BUILDING_COMMANDS = frozenset({"build", "run", "seed", "snapshot"})
_BUILDING_NODES = frozenset({"model", "seed", "snapshot"})
_registered: set[str] = set()


class DbtRecordingError(LakeError):
    code = "lake.dbt_recording_failed"


@dataclass(frozen=True)
class TerminalRun:
    """The tables of one lake a finished dbt invocation built (`built`) or failed to build (`failed`)."""

    built: tuple[TableName, ...]
    failed: tuple[TableName, ...]


def tables_of_run(run_results: Mapping[str, Any], manifest: Mapping[str, Any], alias: str) -> TerminalRun:
    """Split the run's model, seed and snapshot results on `alias` (the lake's catalog) into built and failed."""
    nodes = manifest.get("nodes", {})
    built, failed = set(), set()
    for result in run_results.get("results", []):
        node = nodes.get(result.get("unique_id", ""), {})
        if node.get("resource_type") not in _BUILDING_NODES or node.get("database") != alias:
            continue
        if (node.get("config") or {}).get("materialized") == "ephemeral":
            continue
        name = TableName(node["schema"], node.get("alias") or node["name"])
        if result.get("status") == "success":
            built.add(name)
        elif result.get("status") == "error":
            failed.add(name)
    return TerminalRun(tuple(sorted(built)), tuple(sorted(failed - built)))


def record_at_exit(lake: str) -> None:
    """Register the exit-time recorder of `lake` for this dbt process (once; not under Dagster)."""
    if os.environ.get(RECORDER_ENV) == DAGSTER_RECORDS or lake in _registered:
        return
    _registered.add(lake)
    atexit.register(_record_terminal_run, lake)


def _record_terminal_run(lake: str) -> None:
    try:
        recorded = record_finished_invocation(lake)
    except DponeError as exc:
        print(f"dpone: [{exc.code}] {exc}; the tables were built but not tracked", file=sys.stderr)
        os._exit(2)
    except Exception as exc:  # an unexpected failure at exit: say so rather than exit 0 silently
        print(f"dpone: [{DbtRecordingError.code}] recording the dbt run failed ({type(exc).__name__})", file=sys.stderr)
        os._exit(2)
    if recorded is not None and (recorded.built or recorded.failed):
        workspace = load_config().workspace
        print(
            f"dpone: recorded {len(recorded.built)} built and {len(recorded.failed)} failed table(s) of lake "
            f"{lake!r} in workspace {workspace!r}",
            file=sys.stderr,
        )


def record_finished_invocation(lake: str) -> TerminalRun | None:
    """Record this process's finished dbt invocation; None when it built nothing to record."""
    from dbt.flags import get_flags
    from dbt_common.invocation import get_invocation_id

    flags = get_flags()
    if str(getattr(flags, "WHICH", "") or "") not in BUILDING_COMMANDS:
        return None
    project = Path(getattr(flags, "PROJECT_DIR", None) or os.getcwd())
    target = Path(getattr(flags, "TARGET_PATH", None) or os.environ.get("DBT_TARGET_PATH") or "target")
    target = target if target.is_absolute() else project / target
    run_results = _read_json(target / "run_results.json")
    if run_results is None or (run_results.get("metadata") or {}).get("invocation_id") != get_invocation_id():
        return None  # dbt stopped before writing this run's results: nothing of it is known
    manifest = _read_json(target / "manifest.json")
    if manifest is None:
        raise DbtRecordingError("dbt wrote run_results.json but no manifest.json in its target folder")
    run = tables_of_run(run_results, manifest, lake_alias(lake))
    if run.built or run.failed:
        _release_dbt_instance()
        _record(lake, run)
    return run


def _record(lake: str, run: TerminalRun) -> None:
    config = load_config()
    names = [str(name) for name in (*run.built, *run.failed)]
    resolved = resolve(config.workspace, lake, config=config, targets=names, reads=())
    conn = duck.connect()
    try:
        resolved.apply(conn)
        for status, tables in (("materialized", run.built), ("failed", run.failed)):
            for table in tables:
                record_built_table(
                    conn,
                    workspace=config.workspace,
                    lake=lake,
                    alias=resolved.alias,
                    table=table,
                    status=status,
                    config=config,  # type: ignore[arg-type]
                )
    finally:
        conn.close()


def _release_dbt_instance() -> None:
    """Close dbt-duckdb's DuckDB instance: an embedded catalog is a file one instance at a time may attach."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    with DuckDBConnectionManager._LOCK:
        environment = DuckDBConnectionManager._ENV
        DuckDBConnectionManager._ENV = None
    if environment is not None:
        environment.close()


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
