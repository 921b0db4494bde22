"""Confine, then exec: the root of every process tree that acts for a fork.

    python -m dpone_dagster.confinement.launcher -- dagster asset materialize -m my_location --select ...
    python -m dpone_dagster.confinement.launcher -- dg launch --assets ...
    python -m dpone_dagster.confinement.launcher -- dbt build

With the configured workspace a fork (`DPONE_WORKSPACE`), the launcher computes the fork's policy
(`policy.py`), creates its folders and its Dagster home, restricts itself with Landlock and then
hands over to the command (`handover.py`: exec, or this interpreter for its own Python entry points)
with `TMPDIR`, `DBT_TARGET_PATH`, `DBT_LOG_PATH`, `DAGSTER_HOME` and the marker
`DPONE_CONFINED_WORKSPACE` set: the command and everything it starts (webserver, daemon, code
servers, run and step workers, dbt and its python models) write only the fork's own trees. For
`prod` it execs the command unchanged. `confine_this_process()` is the same for a process that
confines itself (the `dpone` CLI): it restricts in place, and re-execs its own command line when
another thread already runs.

Where confinement is impossible (`confinement.unavailable`: no Landlock; `confinement.cannot_confine`
and its sub-codes: the configuration puts the fork's files beside the parent's) it warns once with
that code and runs unconfined, or, with `forks.require_confinement`, refuses (`confinement.required`,
exit status 2). What a reader could get wrong: the restriction binds the calling thread only; the
`exec` (or the single-thread check) is what makes it cover the whole process, never skip it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, Sequence

from dpone_dagster.config import DponeConfig, load_config
from dpone_dagster.confinement.handover import CommandNotFoundError, hand_over, thread_count
from dpone_dagster.confinement.landlock import ConfinementUnavailableError, restrict_self
from dpone_dagster.confinement.status import ConfinementRequiredError, create_probe, is_confined, warn_once
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
from dpone_dagster.errors import DponeError

USAGE = "usage: python -m dpone_dagster.confinement.launcher -- <command> [arguments...]"


def confine(config: DponeConfig, environ: Mapping[str, str]) -> dict[str, str] | None:
    """Restrict the calling thread for `config.workspace`; the environment to hand on, or None when
    nothing was restricted (the root; or, warned, a fork that cannot be confined)."""
    from dpone_dagster.confinement.policy import CannotConfineError, fork_policy, prepare_policy
    from dpone_dagster.workspaces.dagster_home import prepare_dagster_home

    if config.workspace == ROOT_WORKSPACE:
        return None
    try:
        policy = fork_policy(config, environ)
        prepare_dagster_home(config, environ)  # the fork's own instance; refuses another workspace's home
        prepare_policy(policy, config)
        create_probe(config)
        restrict_self(policy.rules())
    except (ConfinementUnavailableError, CannotConfineError) as exc:
        if config.forks.require_confinement:
            raise ConfinementRequiredError(
                f"{exc.message}; forks.require_confinement is set, so this process does not act for "
                f"fork {config.workspace!r} unconfined"
            ) from None
        warn_once(exc.code, f"{exc.message}; running UNCONFINED: the parent's files are not protected by the kernel")
        return None
    return dict(policy.env)


def confine_this_process(config: DponeConfig | None = None) -> bool:
    """Confine this very process for the configured fork (no-op for prod or when already confined).

    Sets the handed-on environment in `os.environ`; when any other thread runs, re-execs the
    process's own command line, confined, so that no unconfined thread survives. Returns whether
    this process is confined now."""
    config = config or load_config()
    if config.workspace == ROOT_WORKSPACE or is_confined(config):
        return config.workspace != ROOT_WORKSPACE
    extra = confine(config, os.environ)
    if extra is None:
        return False
    os.environ.update(extra)  # DAGSTER_HOME too: unset, Dagster writes `~/.dagster/logs` (read-only here)
    tempfile.tempdir = None  # forget the temp folder computed before TMPDIR was set
    if thread_count() != 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    return True


def confined_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Confine this process for the configured workspace; the environment to hand to the command."""
    env = dict(os.environ if environ is None else environ)
    env.update(confine(load_config(env), env) or {})
    return env


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--"]:
        args = args[1:]
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        env = confined_environment()
    except DponeError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 2
    try:
        hand_over(args, env)  # execs, or runs the command in this interpreter (its exit is its own)
    except CommandNotFoundError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 127
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
