"""dpone-dagster's public Python API: the semver surface. Import from here in scripts, notebooks,
CI jobs and tests; everything else in the package may move between minor versions.

    from dpone_dagster import api

    config = api.load()                                   # the project's configuration (dpone.yaml)
    api.create_fork("wm-alice", parent="prod", owner="alice", shared_lakes=["raw"], ttl="3d")
    with api.connect("wm-alice") as conn:                 # the fork's view of the `main` lake
        conn.execute("SELECT count(*) FROM analytics.orders").fetchone()
    api.fork_status("wm-alice")                           # per lake: mode, namespace, table states
    diff = api.diff_fork("wm-alice", ["analytics.orders"])          # run as the fork's process
    api.promote_fork("wm-alice", ["analytics.orders"], diff.diff_id)  # run as the parent's process
    api.drop_fork("wm-alice", actor="alice", stop_servers=True)

Every function raises a typed `DponeError` with a stable code (docs/errors.md) and nothing else by
design. The `dpone fork` and `dpone release show/verify` commands call these functions, and
`dpone demo` runs its release through `run_release`:

    location = dagster.Definitions.load_from(...)        # or your code location's `defs`
    summary = api.run_release(location, dagster.DagsterInstance.get())   # its release_job, in process
    inspected = api.inspect_release(".dpone/release_cache/dev/deployments/<hex>")  # verified, read-only
    api.release_summary(inspected)                        # what `dpone release show` prints

Semver: names and signatures here change only in a major version; returned
objects' documented attributes are part of it, their other attributes are not.

What a reader could get wrong: `connect(workspace)` attaches that workspace's view as this process
(no Dagster run, so no run binding); a fork's processes should use their own workspace. `diff_fork`
reads in the fork's process and `promote_fork` publishes in the parent's (`DPONE_WORKSPACE`), as
`dpone fork diff` / `promote` do.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

from dpone_dagster.config import DponeConfig, load_config, parse_duration
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE

if TYPE_CHECKING:
    import dagster

    from dpone_dagster.config import StorageConfig
    from dpone_dagster.lake.lifecycle.diff import ForkDiff
    from dpone_dagster.lake.lifecycle.promote import PromotionResult
    from dpone_dagster.lake.resolution.apply import ResolvedLake
    from dpone_dagster.release.inspection import Inspected
    from dpone_dagster.release.run_summary import ReleaseRunSummary
    from dpone_dagster.workspaces.service import DropResult, WorkspaceSummary
    from dpone_dagster.workspaces.status import WorkspaceStatus

__all__ = [
    "ROOT_WORKSPACE",
    "connect",
    "create_fork",
    "diff_fork",
    "drop_fork",
    "fork_status",
    "list_workspaces",
    "load",
    "inspect_release",
    "promote_fork",
    "release_summary",
    "resolve_lake",
    "run_release",
]


def load(env: Mapping[str, str] | None = None) -> DponeConfig:
    """The project's configuration (dpone.yaml / [tool.dpone] found upward, then the environment)."""
    return load_config(env)


def _workspaces(config: DponeConfig | None):
    from dpone_dagster.workspaces.service import Workspaces

    return Workspaces(config or load_config())


def _ttl(ttl: str | timedelta | None) -> timedelta | None:
    return parse_duration(ttl) if isinstance(ttl, str) and ttl.strip() else (ttl or None)


def resolve_lake(
    workspace: str | None = None, lake: str = "main", *, targets: Sequence[str] = (), config: DponeConfig | None = None
) -> ResolvedLake:
    """How `workspace` (default: the configured one) attaches `lake`: catalog, data path, defer plan."""
    from dpone_dagster.lake.resolution.seam import resolve

    config = config or load_config()
    return resolve(workspace or config.workspace, lake, config=config, targets=targets)


@contextmanager
def connect(
    workspace: str | None = None, lake: str = "main", *, targets: Sequence[str] = (), config: DponeConfig | None = None
) -> Iterator:
    """A DuckDB connection on `workspace`'s view of `lake`, every statement through the SQL guard;
    `targets` are the tables this connection may write (in a fork: into its own namespace)."""
    from dpone_dagster.lake import duck
    from dpone_dagster.lake.guard.connection import GuardedConnection
    from dpone_dagster.lake.guard.statement import quote_ident

    resolved = resolve_lake(workspace, lake, targets=targets, config=config)
    conn = duck.connect()
    try:
        resolved.apply(conn)
        conn.execute(f"USE {quote_ident(resolved.alias)}")
        yield GuardedConnection.for_lake(conn, resolved)
    finally:
        conn.close()


def create_fork(
    fork_id: str,
    *,
    parent: str = ROOT_WORKSPACE,
    owner: str,
    shared_lakes: Sequence[str] = (),
    shared_with: str | None = None,
    pin: bool = False,
    ttl: str | timedelta | None = None,
    config: DponeConfig | None = None,
):
    """Create fork `fork_id` of `parent`; every lake isolated but `shared_lakes` (the root's)."""
    return _workspaces(config).create_fork(
        fork_id, parent, owner=owner, shared_lakes=shared_lakes, shared_with=shared_with, ttl=_ttl(ttl), pin=pin
    )


def drop_fork(fork_id: str, *, actor: str, stop_servers: bool = False, config: DponeConfig | None = None) -> DropResult:
    """Drop a fork and clean its namespaces (`workspace.in_use` while its `dpone dev` runs, unless
    `stop_servers`); call again to retry a partial cleanup."""
    return _workspaces(config).drop(fork_id, actor=actor, stop_servers=stop_servers)


def list_workspaces(config: DponeConfig | None = None) -> list[WorkspaceSummary]:
    """Every workspace, with deleted ones whose cleanup is pending."""
    return _workspaces(config).list()


def fork_status(fork_id: str, config: DponeConfig | None = None) -> WorkspaceStatus:
    """Per lake: mode, namespace, data path and every tracked table's fork_state and owner."""
    from dpone_dagster.workspaces.status import workspace_status

    return workspace_status(fork_id, config)


def diff_fork(
    fork_id: str,
    tables: Sequence[str] = (),
    *,
    lake: str = "main",
    key: Sequence[str] | None = None,
    since_pin: bool = False,
    config: DponeConfig | None = None,
) -> ForkDiff:
    """The fork's own tables against its parent's (row counts, keyed changes, samples, a diff id)."""
    from dpone_dagster.lake.lifecycle.diff import fork_diff

    return fork_diff(fork_id, tables, lake=lake, key=key, since_pin=since_pin, config=config)


def promote_fork(
    fork_id: str, tables: Sequence[str], diff_id: str, *, lake: str = "main", config: DponeConfig | None = None
) -> PromotionResult:
    """Publish reviewed fork tables into the parent in one transaction (refused if the diff moved on)."""
    from dpone_dagster.lake.lifecycle.promote import promote

    return promote(fork_id, tables, diff_id, lake=lake, config=config)


def run_release(location: dagster.Definitions, instance: dagster.DagsterInstance) -> ReleaseRunSummary:
    """Run `location`'s `release_job` in process on `instance` and summarize what its stages reported;
    a refusal raises `ReleaseRunError` under the refusal's own code. The very job the UI launches."""
    from dpone_dagster.api_release import run_release_job

    return run_release_job(location, instance)


def inspect_release(location: str, *, storage: StorageConfig | None = None) -> Inspected:
    """Open an installed deployment, a registry commit object (local or `s3://`, read with `storage`)
    or a release directory, verifying every byte; refused with `release.not_a_release_location` or the
    verification's own code. Read-only."""
    from dpone_dagster.release.inspection import inspect_release as inspect

    return inspect(location, storage=storage)


def release_summary(inspected: Inspected) -> dict[str, object]:
    """What `dpone release show --json` prints for an inspected release (now: the authority expiry check)."""
    from datetime import UTC, datetime

    from dpone_dagster.release.inspection import release_summary as summarize

    return summarize(inspected, datetime.now(UTC))
