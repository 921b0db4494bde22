"""Is this process, acting for a fork, confined by the kernel? Checked, never taken on trust.

The launcher (`confinement/launcher.py`) marks what it confined with `DPONE_CONFINED_WORKSPACE=<fork>`
in the environment every descendant inherits. An environment variable can be forged, so
`is_confined(config)` also asks the kernel: the probe file `<state>/.confinement-probe` (created
before confining, writable by this user, outside every tree a fork may write) must refuse to open
for writing although the user's permissions allow it. Opening without writing changes nothing, so
the probe is harmless in an unconfined process.

`check_fork_process(config)` is what code acting for a fork calls before it touches a lake (fork
resolution, the code location's workspace binding): unconfined, it warns once per process with the
code `confinement.unconfined`, or refuses (`confinement.required`) when `forks.require_confinement`
is set. What a reader could get wrong: "confined" means confined for *this* workspace; a process
confined for another fork counts as unconfined here (its writes into this fork's trees would fail
anyway). And this module imports nothing of the lake: the lake's resolution calls it.
"""

from __future__ import annotations

import errno
import logging
import os
from functools import lru_cache
from pathlib import Path

from dpone_dagster.config import DponeConfig
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
from dpone_dagster.errors import DponeError

MARKER_ENV = "DPONE_CONFINED_WORKSPACE"
PROBE_FILE = ".confinement-probe"

log = logging.getLogger("dpone_dagster.confinement")
_WARNED: set[str] = set()


class ConfinementRequiredError(DponeError):
    """`forks.require_confinement` is set and this process, acting for a fork, is not confined."""

    code = "confinement.required"


def probe_path(config: DponeConfig) -> Path:
    return config.state_path / PROBE_FILE


def create_probe(config: DponeConfig) -> Path:
    """The probe file (created once, empty, mode 0600): what a confined process cannot open to write."""
    path = probe_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_RDONLY | os.O_CLOEXEC, 0o600))
    return path


def kernel_refuses_writing(path: Path) -> bool:
    """True when the user's permissions allow writing `path` but opening it to write is refused."""
    if not path.is_file() or not os.access(path, os.W_OK):
        return False
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError as exc:
        return exc.errno in (errno.EACCES, errno.EPERM)
    os.close(fd)
    return False


def marked_workspace(environ: dict[str, str] | None = None) -> str | None:
    """The workspace the launcher says it confined this process tree for (a claim, not a proof)."""
    return (os.environ if environ is None else environ).get(MARKER_ENV) or None


@lru_cache(maxsize=8)
def _confined(workspace: str, probe: Path, marked: str | None) -> bool:
    return marked == workspace and kernel_refuses_writing(probe)


def is_confined(config: DponeConfig) -> bool:
    """Confined for `config.workspace`: the launcher's marker names it AND the kernel refuses the probe."""
    return _confined(config.workspace, probe_path(config), marked_workspace())


def warn_once(code: str, message: str) -> None:
    """Log `message` with its code at WARNING, once per process and code."""
    if code not in _WARNED:
        _WARNED.add(code)
        log.warning("[%s] %s", code, message)


def check_fork_process(config: DponeConfig) -> None:
    """Warn once (or refuse, with `forks.require_confinement`) when acting for a fork unconfined."""
    if config.workspace == ROOT_WORKSPACE or is_confined(config):
        return
    what = (
        f"this process acts for fork {config.workspace!r} but the kernel does not confine it: its own "
        "Python, dbt python models and SQL could write the parent's files"
    )
    if config.forks.require_confinement:
        raise ConfinementRequiredError(
            f"{what}; forks.require_confinement is set, so it refuses to act for the fork. Start it "
            "through `python -m dpone_dagster.confinement.launcher -- <command>` or `dpone dev`"
        )
    warn_once("confinement.unconfined", f"{what} (start it through the launcher or `dpone dev`; see docs/forks.md)")
