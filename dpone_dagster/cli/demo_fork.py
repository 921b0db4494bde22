"""The fork part of `dpone demo`: what forks are for, shown on the lake the demo just built.

After the release part, prod's demo process (1) recreates the throwaway fork `wm-fork-demo` of prod
(dropped first when an earlier demo left it, so a second `make demo` works the same way), every lake
isolated, with a one-day TTL for the janitor; (2) builds one model, `main/marts/fct_orders`, in it
through the same Dagster path the demo uses for prod (`dpone demo --fork-step <asset key>` in a
child process whose `DPONE_WORKSPACE` is the fork: it confines itself like any `dpone demo` in a
fork, loads the same code location and materializes that one asset, its upstreams deferred to
prod); (3) prints the fork's status exactly as `dpone fork status` does (the model
`fork_materialized`, every other tracked table deferred to prod); (4) says how to open the fork's
UI and drop it.

What a reader could get wrong: the build runs in a child process on purpose. This process acts for
prod and has loaded the code location with prod's configuration (a location keeps the
configuration of its import); the fork's build must be a process of the fork, confined to the
fork's files. Nothing here writes prod's catalog or data: the create and drop write the control
store and the fork's own namespace only. A fork UI still running on the demo fork makes the
recreation refuse with `workspace.in_use` (stop it or `dpone fork drop wm-fork-demo --stop`);
the demo never stops a server it did not start.
"""

from __future__ import annotations

import os
import subprocess
import sys

import typer

from dpone_dagster.config import DponeConfig
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE

DEMO_FORK = "wm-fork-demo"
DEMO_FORK_MODEL = "main/marts/fct_orders"
"""The one model the demo builds in its fork: a mart whose upstreams (staging views, raw tables) stay in prod."""
DEMO_FORK_TTL = "1d"
_CHILD_ENTRY = "from dpone_dagster.cli import main; main()"
_PARENT_ONLY_ENV = ("DAGSTER_HOME", "DBT_TARGET_PATH", "DBT_LOG_PATH", "DPONE_CONFINED_WORKSPACE")
"""Settings of prod's process the fork's child must not inherit: it gets its own home and dbt paths."""


class DemoForkError(CodedError):
    codes = {
        "demo.fork_build_failed": "The fork part of `dpone demo` could not build its model in wm-fork-demo; "
        "its output is printed above, and `dpone fork drop wm-fork-demo` removes the fork.",
        "demo.fork_step_misplaced": "`dpone demo --fork-step` (the fork part's internal child) ran outside the "
        "demo fork wm-fork-demo; run plain `dpone demo`.",
    }


def recreate_demo_fork(config: DponeConfig) -> bool:
    """Create `wm-fork-demo` of prod, dropping an earlier one first; True when one was dropped."""
    from dpone_dagster import api
    from dpone_dagster.cli.fork import _current_user

    user = _current_user()
    existing = any(w.id == DEMO_FORK and not w.deleted for w in api.list_workspaces(config))
    if existing:
        api.drop_fork(DEMO_FORK, actor=user, config=config)  # workspace.in_use while its UI runs: refused, shown
    api.create_fork(DEMO_FORK, parent=ROOT_WORKSPACE, owner=user, ttl=DEMO_FORK_TTL, config=config)
    return existing


def build_in_fork(asset_key: str = DEMO_FORK_MODEL) -> list[str]:
    """Run `dpone demo --fork-step <asset_key>` as the demo fork's process; its stdout lines."""
    env = {k: v for k, v in os.environ.items() if k not in _PARENT_ONLY_ENV}
    env["DPONE_WORKSPACE"] = DEMO_FORK
    done = subprocess.run(
        [sys.executable, "-c", _CHILD_ENTRY, "demo", "--fork-step", asset_key],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )  # its stderr (dbt, Dagster warnings, a confinement warning) goes straight to ours
    if done.returncode != 0:
        raise DemoForkError(
            "demo.fork_build_failed",
            f"building {asset_key} in fork {DEMO_FORK!r} failed (exit status {done.returncode}); "
            f"its output is above; `dpone fork drop {DEMO_FORK}` removes the fork",
        )
    return done.stdout.splitlines()


def show_fork(config: DponeConfig) -> None:
    """The fork part of the demo: recreate the demo fork, build one model in it, print its status."""
    from dpone_dagster.cli.fork import status

    typer.echo("")
    typer.echo(f"fork: {DEMO_FORK}, a throwaway data environment of prod (prod is never written from it)")
    dropped = recreate_demo_fork(config)
    again = " (the previous demo's fork dropped first)" if dropped else ""
    typer.echo(f"  created {DEMO_FORK} (parent {ROOT_WORKSPACE}, every lake isolated, TTL {DEMO_FORK_TTL}){again}")
    typer.echo(f"  building {DEMO_FORK_MODEL} in {DEMO_FORK}; its upstreams are read from prod (deferred)")
    for line in build_in_fork():
        typer.echo(f"  {line}")
    typer.echo(f"$ dpone fork status {DEMO_FORK}")
    status(DEMO_FORK, as_json=False)
    typer.echo(f"open its UI:  dpone dev --workspace {DEMO_FORK}   (beside prod's `make dev`, on another port)")
    typer.echo(f"drop it:      dpone fork drop {DEMO_FORK}   (the next `make demo` recreates it)")
