"""`dpone dev`: `dagster dev` on the configured workspace's own Dagster instance, for any project
(what `make dev` runs): `-m module`, `-w workspace.yaml`, or the project's own (`cli/dev_location.py`),
each code location named `<name>@<workspace>`; `--port` (default 3000, or a free one when busy).

It prepares the workspace's DAGSTER_HOME (`dpone_dagster.workspaces.dagster_home`: prod's under
`.dpone/dagster_home`, a fork's under `.dpone/workspaces/<fork>/dagster_home`, each with its
`dagster.yaml`), prepares the dbt manifest, and in a fork records one observation per DuckLake
asset into that instance ("deferred to prod @ snapshot 7"), so the fork's UI shows from its first
page which tables it reads from an ancestor; then it records itself in that home
(`workspaces/dev_servers.py`, so `dpone fork drop` refuses while it runs) and replaces itself with
`dagster dev`.
`--dry-run` prepares and prints without starting; `--json` prints what was prepared as JSON.

What a reader could get wrong: the observations are a picture of the start; afterwards the fork's
own materializations (their metadata says `fork_materialized`) and `fork_state_sensor` (an
ancestor materialized) keep the latest event current. Nothing here reads or writes a lake.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import typer

from dpone_dagster.errors import DponeError


@dataclass(frozen=True)
class DevPreparation:
    home: object  # DagsterHome
    observed: dict[str, int]
    plan: object  # ServePlan

    @property
    def workspace_file(self) -> Path:
        return self.plan.workspace_file

    def as_json(self) -> dict[str, object]:
        return {
            **self.home.as_json(),
            "observed_fork_state": self.observed,
            "workspace_file": str(self.plan.workspace_file),
            "code_locations": list(self.plan.location_names),
        }


def prepare_dev(
    env: Mapping[str, str] | None = None, *, module: str | None = None, workspace_file: Path | None = None
) -> DevPreparation:
    """Prepare the configured workspace's Dagster home and what it serves; in a fork, record its fork
    state there (the DuckLake assets of every module location)."""
    from dagster import DagsterInstance

    from dpone_dagster.cli.dev_location import serve_plan
    from dpone_dagster.cli.location import ducklake_keys, load_location
    from dpone_dagster.config import load_config
    from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
    from dpone_dagster.integration.dbt.project import prepare_manifest
    from dpone_dagster.integration.lake.observations import record_fork_state
    from dpone_dagster.integration.lake.resources import DuckLakeResource
    from dpone_dagster.workspaces.dagster_home import prepare_dagster_home

    env = dict(os.environ if env is None else env)
    config = load_config(env)
    home = prepare_dagster_home(config, env)
    plan = serve_plan(config, home.path, module=module, workspace_file=workspace_file)
    observed: dict[str, int] = {}
    if config.workspace != ROOT_WORKSPACE:
        prepare_manifest()
        with _importable_from(plan.import_dirs):
            keys = sorted({key for name in plan.modules for key in ducklake_keys(load_location(name))}, key=str)
        with DagsterInstance.from_config(str(home.path)) as instance:
            observed = record_fork_state(instance, DuckLakeResource(), keys).counts()
    return DevPreparation(home=home, observed=observed, plan=plan)


@contextlib.contextmanager
def _importable_from(folders: tuple[Path, ...]) -> Iterator[None]:
    """The location modules' working directories first on sys.path while they are imported, as Dagster's
    code server has them (the `dpone` script's own sys.path has no project folder: a dg project's
    `shop.definitions` was "no location module")."""
    added = [str(folder) for folder in folders if str(folder) not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for folder in added:
            sys.path.remove(folder)


def _default_stop_signals() -> None:
    """SIGINT/SIGTERM back to their default before `dagster dev` replaces this process: a shell script's
    background job starts with SIGINT ignored, the ignore survives exec, and `dagster dev` maps SIGTERM
    to SIGINT's handler, so a `dpone fork drop --stop` SIGTERM was ignored (only its SIGKILL stopped it)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def confine_fork_dev() -> None:
    """In a fork: prepare the dbt manifest (the project's `target/` is read-only afterwards), then confine
    this process; `dagster dev` and all it starts inherit it (dpone_dagster/confinement)."""
    from dpone_dagster.config import load_config
    from dpone_dagster.confinement.launcher import confine_this_process
    from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
    from dpone_dagster.integration.dbt.project import prepare_manifest

    if load_config().workspace != ROOT_WORKSPACE:
        prepare_manifest()
        confine_this_process()


def dev(
    workspace: str = typer.Option(
        None, "--workspace", help="Serve this workspace (a fork id; default: DPONE_WORKSPACE, else prod)."
    ),
    module: str = typer.Option(None, "-m", "--module", help="Python module holding your Definitions."),
    workspace_file: Path = typer.Option(None, "-w", "--workspace-file", help="A Dagster workspace.yaml to serve."),
    port: int = typer.Option(
        None, help="Port of the webserver on 127.0.0.1 (default 3000, or a free one when 3000 is busy)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Prepare the instance and print it; do not start."),
    as_json: bool = typer.Option(False, "--json", help="Print what was prepared as JSON."),
) -> None:
    """Start `dagster dev` on this workspace's own Dagster instance (one instance per workspace)."""
    from dpone_dagster.cli.dev_location import pick_port
    from dpone_dagster.workspaces.dev_servers import record_dev_server

    if workspace:
        os.environ["DPONE_WORKSPACE"] = workspace  # before configuration is read; `dagster dev` inherits it
    try:
        confine_fork_dev()
        prepared = prepare_dev(module=module, workspace_file=workspace_file)
        port = pick_port(port)
    except DponeError as exc:
        typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
        raise typer.Exit(1) from None
    home = prepared.home
    if as_json:
        typer.echo(json.dumps(prepared.as_json(), indent=2))
    else:
        typer.echo(f"workspace {home.workspace!r}: DAGSTER_HOME={home.path}")
        typer.echo(f"  serving {', '.join(prepared.plan.location_names)} on http://127.0.0.1:{port}")
        if prepared.observed:
            counts = ", ".join(f"{n} {state}" for state, n in prepared.observed.items())
            typer.echo(f"  observed the fork state of its DuckLake assets ({counts})")
    if dry_run:
        return
    record_dev_server(home.path)  # this pid becomes `dagster dev`: a fork drop sees it (workspaces/dev_servers.py)
    dagster = str(Path(sys.executable).with_name("dagster"))
    command = [dagster, "dev", "-w", str(prepared.workspace_file), "-h", "127.0.0.1", "-p", str(port)]
    sys.stdout.flush()
    _default_stop_signals()
    os.execve(dagster, command, {**os.environ, "DAGSTER_HOME": str(home.path)})
