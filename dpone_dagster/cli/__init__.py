"""The `dpone` command line: thin entry points over the same services the Dagster defs use.

Each command group lives in its own module and is owned by its domain: `fork` and `lake` (fork data
environments), `release` (inspection of development releases, and the operator operations recover /
repair-audit / rollback / gc over the configured platform's resources), and the top-level `init`
(make a dbt-duckdb project fork-aware), `dev`, `demo` and `prepare` commands. No command here
publishes or installs a development release, or turns a user-written file or flag into authority.
"""

from __future__ import annotations

import typer

from dpone_dagster.cli import demo, dev, fork, init, lake, release

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__.splitlines()[0])
app.add_typer(fork.app, name="fork", help="Create, inspect and drop fork data environments.")
app.add_typer(lake.app, name="lake", help="Inspect how a workspace attaches its DuckLakes.")
app.add_typer(
    release.app, name="release", help="Inspect and re-verify development releases; recover, repair-audit, rollback, gc."
)
demo.register(app)
app.command("dev")(dev.dev)
app.command("init")(init.init)


UNCONFINED_COMMANDS = frozenset({"prepare", "dev", "init", "release", "--help", "-h"})
"""Commands that do not act for the fork's data: `prepare` writes the dbt project's manifest, `dev`
confines itself once the manifest is prepared, `init` writes the project's files before there is a
project, `release` reads and operates the release platform."""


def main() -> None:
    """The `dpone` entry: in a fork, confine by the kernel before anything else (dpone_dagster/confinement)."""
    import sys

    if sys.argv[1:2] and sys.argv[1] not in UNCONFINED_COMMANDS:
        _confine_for_fork(sys.argv[1])
    app()


def _confine_for_fork(command: str) -> None:
    from dpone_dagster.confinement.launcher import confine_this_process
    from dpone_dagster.errors import DponeError

    try:
        if command == "demo":  # it parses a stale manifest into the project's target/, read-only once confined
            from dpone_dagster.config import load_config
            from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
            from dpone_dagster.integration.dbt.project import prepare_manifest

            if load_config().workspace != ROOT_WORKSPACE:
                prepare_manifest()
        confine_this_process()
    except DponeError as exc:
        typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
        raise SystemExit(2) from None
