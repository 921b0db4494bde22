"""A small ctypes binding of Linux Landlock: make every tree read-only except the ones named.

Three system calls (`landlock_create_ruleset`, `landlock_add_rule`, `landlock_restrict_self`,
numbers 444-446 on every architecture) and `prctl(PR_SET_NO_NEW_PRIVS)`. `restrict_self(rules)`
builds a ruleset that *handles* every write-like right the running kernel's ABI knows (write,
truncate, make reg/dir/sym/fifo/sock/char/block, remove file/dir, refer = rename or link across
directories), adds one rule per writable directory tree or file, and restricts the calling
thread. Reading and executing are left unhandled: allowed everywhere. `abi_version()` is 0 where
the kernel (or a container's seccomp profile) offers no Landlock; `restrict_self` then raises
`ConfinementUnavailableError` and changes nothing.

What a reader could get wrong: a Landlock domain binds the *calling thread* and what it starts
afterwards (threads, children, across `exec`); threads that already run stay free, and it can never
be lifted. So restrict first thing in a fresh process, or restrict and then `exec` (the launcher):
`exec` ends every other thread. A rule is per directory *tree*: granting a folder grants everything
beneath it, so a file that must stay read-only cannot sit under a writable folder. A rule on a
regular file may only carry file rights (write, truncate); creating or deleting a file always needs
a rule on its directory. ABI 1 handles no `refer`, so there a rename across directories is denied
even inside writable trees.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from dpone_dagster.errors import DponeError

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

WRITE_FILE = 1 << 1
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3

_WRITE_RIGHTS_BY_ABI = (
    (
        1,
        WRITE_FILE
        | REMOVE_DIR
        | REMOVE_FILE
        | MAKE_CHAR
        | MAKE_DIR
        | MAKE_REG
        | MAKE_SOCK
        | MAKE_FIFO
        | MAKE_BLOCK
        | MAKE_SYM,
    ),
    (2, REFER),
    (3, TRUNCATE),
)
FILE_RIGHTS = WRITE_FILE | TRUNCATE
"""The only handled rights a rule on a regular file (or a device) may carry."""


class ConfinementUnavailableError(DponeError):
    """The kernel offers no Landlock (macOS, Linux before 5.13, a container blocking the calls)."""

    code = "confinement.unavailable"


class ConfinementFailedError(DponeError):
    """Landlock is there, but the ruleset could not be built or applied (nothing was restricted)."""

    code = "confinement.failed"


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@dataclass(frozen=True)
class Rule:
    """A tree (directory: everything beneath it) or one file the confined process may write."""

    path: Path
    is_file: bool = False


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


@lru_cache(maxsize=1)
def abi_version() -> int:
    """The Landlock ABI the running kernel offers; 0 when it offers none (or is not Linux)."""
    if not os.uname().sysname == "Linux":
        return 0
    try:
        version = _libc().syscall(
            _SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
        )
    except (OSError, AttributeError):
        return 0
    return int(version) if version > 0 else 0


def handled_rights(abi: int) -> int:
    """Every write-like right `abi` knows (asking for an unknown one makes the kernel refuse)."""
    rights = 0
    for since, bits in _WRITE_RIGHTS_BY_ABI:
        if abi >= since:
            rights |= bits
    return rights


def _fail(what: str) -> ConfinementFailedError:
    return ConfinementFailedError(f"Landlock refused to {what} ({errno.errorcode.get(ctypes.get_errno(), 'error')})")


def restrict_self(rules: Sequence[Rule]) -> int:
    """Restrict the calling thread (and all it starts later) to writing only beneath `rules`.

    Returns the ABI used. Every rule's path must exist. Raises `ConfinementUnavailableError` when the
    kernel has no Landlock and `ConfinementFailedError` when a step fails; in both cases the
    process is exactly as before (the restriction is the last step, all or nothing)."""
    abi = abi_version()
    if abi < 1:
        raise ConfinementUnavailableError(
            "this kernel offers no Landlock (it needs Linux 5.13+ with Landlock enabled, and no "
            "container profile blocking its system calls)"
        )
    handled = handled_rights(abi)
    libc = _libc()
    attr = _RulesetAttr(handled)
    ruleset = libc.syscall(
        _SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0)
    )
    if ruleset < 0:
        raise _fail("create a ruleset")
    try:
        for rule in rules:
            _add_rule(libc, int(ruleset), rule, handled)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _fail("set no_new_privs")
        if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(int(ruleset)), ctypes.c_uint32(0)) != 0:
            raise _fail("restrict this process")
    finally:
        os.close(int(ruleset))
    return abi


def _add_rule(libc: ctypes.CDLL, ruleset: int, rule: Rule, handled: int) -> None:
    try:
        fd = os.open(rule.path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfinementFailedError(
            f"a tree the confined process may write cannot be opened ({errno.errorcode.get(exc.errno, 'error')})"
        ) from None
    try:
        allowed = handled & (FILE_RIGHTS if rule.is_file else handled)
        beneath = _PathBeneathAttr(allowed, fd)
        if (
            libc.syscall(
                _SYS_ADD_RULE,
                ctypes.c_int(ruleset),
                ctypes.c_int(_RULE_PATH_BENEATH),
                ctypes.byref(beneath),
                ctypes.c_uint32(0),
            )
            != 0
        ):
            raise _fail("add a rule")
    finally:
        os.close(fd)
