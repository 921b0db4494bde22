"""Who holds a registry lease, and whether that process is provably gone.

`this_process()` describes the calling process for a new lease (`contracts.registry_leases`);
`holder_status(process)` answers, from this machine, one of:

- `alive`: same host, boot and pid namespace, and that pid runs with that start time;
- `gone`: same host and pid namespace, and either the host rebooted since (another boot id), no
  process has that pid, the pid belongs to a later process (another start time), or it is a zombie;
- `unverifiable`: another host or pid namespace, a lease that names no process (version 1), or a
  system without `/proc` — nothing here can see that process.

What a reader could get wrong: `gone` is a proof only on Linux and only as good as what the lease
says about its writer; `unverifiable` is never treated as gone (fail closed). A host name that does
not fit an identifier is recorded as a digest of itself, so two such hosts are still told apart.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from pathlib import Path
from typing import Literal

from dpone_dagster.contracts.registry_leases import LeaseHolderProcess

HolderStatus = Literal["alive", "gone", "unverifiable"]
PROC = Path("/proc")
_IDENTIFIER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,255}$")


def this_process() -> LeaseHolderProcess:
    """The calling process as a lease holder (start time 0 and `unknown` ids where `/proc` is absent)."""
    pid = os.getpid()
    return LeaseHolderProcess(
        host=_host(),
        boot_id=_read(PROC / "sys/kernel/random/boot_id") or "unknown",
        pid_namespace=_pid_namespace() or "unknown",
        pid=pid,
        start_ticks=_start_ticks(pid) or 0,
    )


def holder_status(process: LeaseHolderProcess | None) -> HolderStatus:
    """Whether the process a lease names runs, is provably gone, or cannot be seen from here."""
    if process is None:
        return "unverifiable"
    here = this_process()
    if "unknown" in (here.boot_id, here.pid_namespace, process.boot_id, process.pid_namespace):
        return "unverifiable"
    if process.host != here.host or process.pid_namespace != here.pid_namespace:
        return "unverifiable"
    if process.boot_id != here.boot_id:
        return "gone"
    stat = _stat_fields(process.pid)
    if stat is None:
        return "gone"
    state, start = stat
    if state in ("Z", "X") or start != process.start_ticks:
        return "gone"
    return "alive"


def _host() -> str:
    name = socket.gethostname()
    return name if _IDENTIFIER.match(name) else "host-" + hashlib.sha256(name.encode()).hexdigest()[:32]


def _pid_namespace() -> str | None:
    try:
        link = os.readlink(PROC / "self/ns/pid")
    except OSError:
        return None
    match = re.fullmatch(r"pid:\[([0-9]+)\]", link)
    return f"pid-{match.group(1)}" if match else None


def _start_ticks(pid: int) -> int | None:
    stat = _stat_fields(pid)
    return stat[1] if stat is not None else None


def _stat_fields(pid: int) -> tuple[str, int] | None:
    """(state, start time in ticks) of `pid`, or None when no such process is visible."""
    text = _read(PROC / str(pid) / "stat")
    if text is None:
        return None
    fields = text.rpartition(")")[2].split()  # the command name may hold spaces and ')'
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def _read(path: Path) -> str | None:
    try:
        value = path.read_text().strip()
    except OSError:
        return None
    return value if _IDENTIFIER.match(value) or path.name == "stat" else None
