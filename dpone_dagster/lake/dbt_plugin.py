"""The dbt-duckdb plugin that makes every connection dbt opens offline-safe and lake-attached.

dbt_project_synthetic's profile lists this module under `plugins:`. dbt-duckdb calls
`configure_connection` once per DuckDB instance it opens, after `duckdb.connect()` and before any
model SQL; the plugin then

1. runs `duck.configure()` (project-local extension directory, autoinstall and autoload off,
   extensions loaded from their wheels), and
2. attaches the lake through `resolve(workspace, lake, targets=...)` -> `ResolvedLake.apply()`, so
   a fork's dbt run writes its own namespace exactly like every other DuckLake access, and
3. puts `dpone_dagster.lake.guard.checker` in front of every SQL text dbt sends: dbt-core and
   dbt-duckdb run all model, hook, test, seed and run-operation SQL through
   `handle.cursor().execute(...)`, and every such cursor is a `DuckDBCursorWrapper` built by dbt-duckdb's
   local environment; `initialize` makes that class wrap its cursor in a `GuardedConnection`.
   This reaches into dbt-duckdb internals, so it is checked against the reviewed releases
   (`GUARDED_DBT_DUCKDB`, exactly pyproject's declared dbt-duckdb range) and the plugin refuses to
   start on any other (`lake.dbt_duckdb_unsupported`) or when the cursor path moved
   (`lake.dbt_guard_unavailable`).
   dbt-duckdb's `external` materialization and hooks write files with `COPY … TO` through that same
   cursor, so their locations obey the guard's file rules: only the lake's own data path or the
   temp folder (`lake.file_write_outside_namespace`). dbt *python* models are user Python and
   beyond any SQL guard (kernel confinement covers them on the embedded default).

The workspace is the configured one (`DPONE_WORKSPACE`, through `dpone_dagster.config`). The
targets are the tables this dbt invocation will write; the Dagster dbt asset hands them over in
`DPONE_DBT_TARGETS` (comma-separated `schema.table`), because dbt offers no other channel from the
caller into a plugin that does not also invalidate dbt's partial parsing. The tables the selection
reads come the same way in `DPONE_DBT_READS` (a fork then creates only those defer views; unset, as
for a plain `dbt build` by hand, every table is deferred: `lake/resolution/reads.py`). When the dbt
sources changed after the op's own manifest was parsed, the op sends `DPONE_DBT_READS_FROM_INVOCATION=1`
instead, and the plugin takes the read set from the manifest *this* dbt invocation parsed
(`invocation_reads`): dbt writes it to its target path before it opens the first connection, and its
`invocation_id` proves it is this invocation's. So an edited model costs no second `dbt parse`.

What a reader could get wrong: the profile's `database` must be the alias `resolve()` attaches
(`lake_<lake>`), and the profile's `attach:` entry with that alias is only a declaration for
dbt-duckdb (it lets `database` name the alias and switches on DuckLake-specific SQL). The plugin
attaches first, so dbt-duckdb's own `ATTACH IF NOT EXISTS` never runs against the lake; the plugin
refuses to start when the two names disagree, rather than letting dbt write somewhere else.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin

from dpone_dagster.config import DEFAULT_LAKE, load_config
from dpone_dagster.errors import LakeError
from dpone_dagster.lake import duck
from dpone_dagster.lake.dbt_handover import READS_FROM_INVOCATION_ENV, targets_from_env
from dpone_dagster.lake.dbt_reads import dbt_reads
from dpone_dagster.lake.dbt_recording import record_at_exit
from dpone_dagster.lake.guard.checker import SqlGuard
from dpone_dagster.lake.guard.connection import GuardedConnection
from dpone_dagster.lake.resolution.apply import ResolvedLake
from dpone_dagster.lake.resolution.reads import reads_from_env
from dpone_dagster.lake.resolution.seam import resolve

log = logging.getLogger(__name__)

GUARDED_DBT_DUCKDB = ("1.11.0", "1.11.1")
"""The dbt-duckdb releases whose cursor path was reviewed (every SQL through DuckDBCursorWrapper;
1.11.0 and 1.11.1 differ there only in how a registered-frame check drains its result).
pyproject.toml declares exactly this range (`>=1.11.0,<1.11.2`); a release is added here only after
its cursor path is re-read, and the adoption tests run the lowest and highest
(tests/adoption/test_version_ranges.py). 1.10.x is left out: its cursor wrapper has no `rollback`."""

_ACTIVE_GUARD: SqlGuard | None = None


class DbtGuardUnavailableError(LakeError):
    code = "lake.dbt_guard_unavailable"


class DbtDuckdbUnsupportedError(DbtGuardUnavailableError):
    code = "lake.dbt_duckdb_unsupported"


class ProfileMismatchError(LakeError):
    code = "lake.dbt_profile_mismatch"


def invocation_reads(targets: Sequence[str], environ: Mapping[str, str] | None = None) -> list[str] | None:
    """What `targets` read, from the manifest the running dbt invocation parsed (in its target path,
    `DBT_TARGET_PATH`); None (every table) when that manifest is missing or not this invocation's."""
    from dbt_common.invocation import get_invocation_id  # inside dbt: this invocation's id

    environ = os.environ if environ is None else environ
    target_path = Path(environ.get("DBT_TARGET_PATH") or "target")
    if not target_path.is_absolute():
        target_path = Path(environ.get("DBT_PROJECT_DIR") or os.getcwd()) / target_path
    try:
        manifest = json.loads((target_path / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None
    if not isinstance(manifest, dict) or (manifest.get("metadata") or {}).get("invocation_id") != get_invocation_id():
        log.warning("dpone: no manifest of this dbt invocation in %s; every upstream table is deferred", target_path)
        return None
    return dbt_reads(manifest, targets)


def resolve_for_dbt(lake: str, environ: Mapping[str, str] | None = None) -> ResolvedLake:
    """What the plugin attaches: the configured workspace's `lake`, with this run's targets and read set."""
    config = load_config(environ)
    targets = targets_from_env(environ)
    reads = reads_from_env(environ)
    if (os.environ if environ is None else environ).get(READS_FROM_INVOCATION_ENV) == "1":
        if reads is not None:
            raise LakeError(f"{READS_FROM_INVOCATION_ENV} and a read set were both given", code="lake.invalid_read")
        reads = invocation_reads(targets, environ)
    return resolve(config.workspace, lake, config=config, targets=targets, reads=reads)


def install_cursor_guard() -> None:
    """Make every `DuckDBCursorWrapper` dbt-duckdb builds wrap its cursor in a `GuardedConnection`
    (idempotent). Fails closed when dbt-duckdb is not the reviewed version or has changed shape."""
    import inspect

    from dbt.adapters.duckdb.__version__ import version
    from dbt.adapters.duckdb.environments import local

    if version not in GUARDED_DBT_DUCKDB:
        raise DbtDuckdbUnsupportedError(
            f"dbt-duckdb {version} is installed, but the SQL guard supports dbt-duckdb "
            f"{', '.join(GUARDED_DBT_DUCKDB)} only; install one of those (pip install 'dbt-duckdb>=1.11.0,<1.11.2')"
        )
    wrapper = getattr(local, "DuckDBCursorWrapper", None)
    if getattr(wrapper, "_dpone_guarded", False):
        return
    if (
        wrapper is None
        or not hasattr(local, "DuckDBConnectionWrapper")
        or list(inspect.signature(wrapper.__init__).parameters) != ["self", "cursor"]
    ):
        raise DbtGuardUnavailableError("dbt-duckdb's cursor wrapper is not where the SQL guard expects it")
    original_init = wrapper.__init__

    def guarded_init(self, cursor) -> None:
        if _ACTIVE_GUARD is None:
            raise DbtGuardUnavailableError("a dbt cursor was opened before the lake was attached")
        if not isinstance(cursor, GuardedConnection):
            cursor = GuardedConnection(cursor, _ACTIVE_GUARD)
        original_init(self, cursor)

    wrapper.__init__ = guarded_init
    wrapper._dpone_guarded = True


class Plugin(BasePlugin):
    """dbt-duckdb plugin; profile config: `lake` (default `main`)."""

    def initialize(self, plugin_config: dict[str, Any]) -> None:
        self.lake = str(plugin_config.get("lake") or DEFAULT_LAKE)
        self.resolved: ResolvedLake | None = None
        if getattr(self.creds, "remote", None) or getattr(self.creds, "is_motherduck", False):
            raise DbtGuardUnavailableError("only dbt-duckdb's local environment is guarded")
        install_cursor_guard()
        record_at_exit(self.lake)  # a terminal run's built tables are tracked at exit (lake/dbt_recording.py)

    def configure_connection(self, conn) -> None:
        duck.configure(conn)
        resolved = resolve_for_dbt(self.lake)
        database = getattr(self.creds, "database", None)
        if database != resolved.alias:
            raise ProfileMismatchError(
                f"the dbt profile's database is {database!r}, but lake {self.lake!r} is attached as "
                f"{resolved.alias!r}; set `database: {resolved.alias}` and the matching attach alias"
            )
        global _ACTIVE_GUARD
        resolved.apply(conn)
        self.resolved = resolved
        _ACTIVE_GUARD = SqlGuard.for_lake(resolved)
