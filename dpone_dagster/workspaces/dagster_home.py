"""One Dagster instance per workspace on the embedded default: where a workspace's DAGSTER_HOME is.

`prod` keeps `<state dir>/dagster_home`; every other workspace gets its own
`<state dir>/workspaces/<workspace segment>/dagster_home`, so a fork's UI never shows prod's runs,
materializations, sensor cursors or run tags as its own. `prepare_dagster_home` creates the home,
writes a `dagster.yaml` there (a missing one makes every Dagster start warn "No dagster instance
configuration file") and a marker naming the workspace the home belongs to. A fork's embedded
`dagster.yaml` also makes its runs start warm (`integration/warm/`, docs/warm-runs.md): runs are
launched when submitted (`SyncInMemoryRunCoordinator`, no queue) by `WarmRunLauncher`. A
`dagster.yaml` exactly as an earlier version wrote it is brought up to date; one edited by anyone is kept.

What a reader could get wrong: an explicitly set `DAGSTER_HOME` wins (a production deployment
points it at its own PostgreSQL-backed instance, see docs/production.md), but a home whose marker
names another workspace is refused (`workspace.dagster_home_of_another_workspace`): that is
exactly the shared instance that showed prod's materializations in a fork (and a home set that way
never gets its `dagster.yaml` rewritten: production homes are untouched). A home without a
marker (one you made yourself) is adopted and marked. The segment is the workspace id when that
is a plain name, else a sanitized id plus a hash (ids may contain `/`).

`remove_dagster_home` (called by a fork drop once its lake cleanup succeeded) deletes only the
dropped fork's own embedded home: never prod's, never a `DAGSTER_HOME` set in the environment
(it is not looked at), never a directory whose marker names another workspace.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dpone_dagster.config import DponeConfig
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE, check_workspace_id
from dpone_dagster.errors import WorkspaceError
from dpone_dagster.lake.resolution.naming import hash8

MARKER_FILE = ".dpone-workspace"
INSTANCE_FILE = "dagster.yaml"
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")

_INSTANCE_YAML = """\
# Dagster instance of dpone workspace {workspace!r} (embedded default), written by `dpone dev`.
# Runs, event logs and schedules are SQLite files in this directory; no other workspace uses it.
# For PostgreSQL-backed storage (one database or schema per deployment) see docs/production.md.
"""
WARM_RUNS_YAML = """\
# A fork's runs start warm (docs/warm-runs.md): the webserver launches a run as soon as it is
# submitted (no queue polled every few seconds) into a worker that already loaded the code location.
run_coordinator:
  module: dagster._core.run_coordinator.sync_in_memory_run_coordinator
  class: SyncInMemoryRunCoordinator
run_launcher:
  module: dpone_dagster.integration.warm.launcher
  class: WarmRunLauncher
"""
# Run monitoring (in the daemon) fails a warm run whose worker died after the process that launched it.
_RUN_MONITORING_YAML = """\
run_monitoring:
  enabled: true
  poll_interval_seconds: 30
"""


def instance_yaml(workspace: str, *, embedded: bool = True) -> str:
    """The `dagster.yaml` written into `workspace`'s home: a fork's embedded one also configures warm
    runs; a home named by `DAGSTER_HOME` (`embedded=False`) gets no launcher or coordinator from dpone."""
    text = _INSTANCE_YAML.format(workspace=workspace)
    return text + WARM_RUNS_YAML + _RUN_MONITORING_YAML if embedded and workspace != ROOT_WORKSPACE else text


class DagsterHomeOfAnotherWorkspaceError(WorkspaceError):
    code = "workspace.dagster_home_of_another_workspace"


@dataclass(frozen=True)
class DagsterHome:
    """The Dagster instance directory a workspace's processes use, and what preparing it did."""

    workspace: str
    path: Path
    explicit: bool
    wrote_instance_yaml: bool = False

    def as_json(self) -> dict[str, object]:
        return {
            "workspace": self.workspace,
            "dagster_home": str(self.path),
            "from_env": self.explicit,
            "wrote_dagster_yaml": self.wrote_instance_yaml,
        }


def workspace_segment(workspace: str) -> str:
    """A single path component naming `workspace` (plain ids as they are, others sanitized + hash)."""
    check_workspace_id(workspace)
    if _PLAIN.match(workspace):
        return workspace
    return re.sub(r"[^A-Za-z0-9_.-]", "_", workspace)[:80] + "-" + hash8(workspace)


def default_dagster_home(config: DponeConfig, workspace: str | None = None) -> Path:
    """The embedded default's home of `workspace` (default: the configured one)."""
    workspace = workspace or config.workspace
    if workspace == ROOT_WORKSPACE:
        return config.state_path / "dagster_home"
    return config.state_path / "workspaces" / workspace_segment(workspace) / "dagster_home"


def marked_workspace(home: Path) -> str | None:
    marker = home / MARKER_FILE
    return marker.read_text(encoding="utf-8").strip() if marker.is_file() else None


def prepare_dagster_home(config: DponeConfig, env: Mapping[str, str]) -> DagsterHome:
    """Create (or adopt) the configured workspace's Dagster home; refuse another workspace's home."""
    workspace = config.workspace
    explicit = bool(env.get("DAGSTER_HOME"))
    path = Path(env["DAGSTER_HOME"]).expanduser().resolve() if explicit else default_dagster_home(config)
    owner = marked_workspace(path)
    if owner is not None and owner != workspace:
        raise DagsterHomeOfAnotherWorkspaceError(
            f"DAGSTER_HOME is the Dagster instance of workspace {owner!r}, but this process acts for "
            f"{workspace!r}: its UI would show {owner!r}'s runs and materializations as this workspace's. "
            "Unset DAGSTER_HOME (each workspace then gets its own) or point it at this workspace's instance"
        )
    path.mkdir(parents=True, exist_ok=True)
    if owner is None:
        (path / MARKER_FILE).write_text(workspace + "\n", encoding="utf-8")
    instance_file = path / INSTANCE_FILE
    wrote = not explicit and _written_by_an_earlier_version(instance_file, workspace)
    wrote = wrote or not instance_file.exists()
    if wrote:
        instance_file.write_text(instance_yaml(workspace, embedded=not explicit), encoding="utf-8")
    return DagsterHome(workspace=workspace, path=path, explicit=explicit, wrote_instance_yaml=wrote)


def _written_by_an_earlier_version(instance_file: Path, workspace: str) -> bool:
    """True when the file is exactly what an earlier `dpone dev` wrote (before warm runs, or before run
    monitoring); a file anyone edited is never rewritten."""
    try:
        plain = _INSTANCE_YAML.format(workspace=workspace)
        text = instance_file.read_text(encoding="utf-8")
        return text in (plain, plain + WARM_RUNS_YAML) and text != instance_yaml(workspace)
    except OSError:
        return False


def private_temp_dir(config: DponeConfig, workspace: str) -> Path:
    """`<system temp>/dpone-<uid>-<hash>`: the temporary folder of `workspace`'s confined processes
    (their TMPDIR: dbt's and DuckDB's spill files), one per state dir and fork, owned by this user alone."""
    key = f"{config.state_path}\0{workspace}".encode()
    return Path(tempfile.gettempdir()) / f"dpone-{os.getuid()}-{hashlib.sha256(key).hexdigest()[:12]}"


def remove_private_temp_dir(config: DponeConfig, workspace: str) -> Path | None:
    """Delete the dropped fork's private temporary folder; return it when it was removed. A link, a
    file, or a folder another user owns at that name is left alone."""
    if workspace == ROOT_WORKSPACE:
        return None
    path = private_temp_dir(config, workspace)
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        return None
    shutil.rmtree(path)
    return path


def remove_dagster_home(config: DponeConfig, workspace: str) -> Path | None:
    """Delete the embedded home of the dropped fork `workspace`; return it when it was removed.

    Only `default_dagster_home(config, workspace)` is considered; prod's home and a home whose
    marker names another workspace are never removed."""
    if workspace == ROOT_WORKSPACE:
        return None
    path = default_dagster_home(config, workspace)
    if path == default_dagster_home(config, ROOT_WORKSPACE) or not path.is_dir():
        return None
    owner = marked_workspace(path)
    if owner is not None and owner != workspace:
        return None
    shutil.rmtree(path)
    return path
