"""Binding a read source to the commit the platform configured: a checkout's HEAD, an archive's own record.

The configured commit (`release.source_commit`) is what the grant is checked against; without this
binding any checkout or archive would be accepted as "that commit". `bind_source_commit` refuses:

- a checkout directory whose `HEAD` (read with `git rev-parse`, no hooks, no fsmonitor, no pager)
  is another commit, or that is not inside a git checkout at all (`source.commit_unbound`);
- an archive that records another commit (`git archive` writes it as the pax global comment of a
  tar or the comment of a zip; `build_source_archive(commit=...)` writes it too), or that records
  none (`source.commit_unbound`): an archive cannot otherwise say which commit it holds.

What a reader could get wrong: HEAD equality binds the commit, not the working tree; uncommitted
edits in a checkout are still read into the snapshot (the snapshot digest, not the commit, names the
exact files). The synthetic embedded default has no real commit and is not bound (the caller skips
it). The grant carries no archive digest field, so an archive's SHA-256 is recorded (release
state), not checked against the grant.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from dpone_dagster.release.source.archive import fail
from dpone_dagster.release.source.snapshot import SourceTree

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_GIT_TIMEOUT_SECONDS = 10


def checkout_head(checkout: str | os.PathLike[str]) -> str | None:
    """The 40-hex commit of HEAD of the git checkout holding `checkout`; None when there is none."""
    git = shutil.which("git")
    if git is None:
        return None
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/nonexistent"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
    }
    command = [git, "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-C", str(checkout), "rev-parse", "--verify", "--quiet", "HEAD^{commit}"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=_GIT_TIMEOUT_SECONDS, env=environment, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    head = result.stdout.strip()
    return head if result.returncode == 0 and _COMMIT.match(head) else None


def bind_source_commit(location: str | os.PathLike[str], tree: SourceTree, commit: str) -> None:
    """Refuse unless the source read from `location` (into `tree`) is at `commit`."""
    if tree.archive_sha256 is None:
        head = checkout_head(Path(location))
        if head is None:
            raise fail("source.commit_unbound", "the source checkout is not a git checkout, so its commit cannot be bound")
        if head != commit.lower():
            raise fail("source.commit_mismatch", f"the source checkout is at {head[:12]}, not at the configured commit {commit[:12]}")
        return
    if tree.declared_commit is None:
        raise fail("source.commit_unbound", "the source archive records no commit (make it with git archive or build_source_archive(commit=...))")
    if tree.declared_commit != commit.lower():
        raise fail("source.commit_mismatch", f"the source archive records commit {tree.declared_commit[:12]}, not the configured commit {commit[:12]}")
