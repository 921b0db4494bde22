"""Binding a read source to the commit the platform configured: a checkout's HEAD, an archive's own record.

The configured commit (`release.source_commit`) is what the grant is checked against; without this
binding any checkout or archive would be accepted as "that commit". `bind_source_commit` refuses:

- a checkout directory whose `HEAD` (read with `git rev-parse`, no hooks, no fsmonitor, no pager)
  is another commit, or that is not inside a git checkout at all (`source.commit_unbound`);
- an archive that records another commit (`git archive` writes it as the pax global comment of a
  tar or the comment of a zip; `build_source_archive(commit=...)` writes it too), or that records
  none (`source.commit_unbound`): an archive cannot otherwise say which commit it holds.

A checkout is read as the commit's files only (`open_bound_source`): `git ls-tree` lists them, the
reader skips every other file (untracked or ignored ones such as dbt's `.user.yml` are never read),
and each file read must have the commit's git blob id, so an uncommitted edit or a committed file
deleted from the working tree refuses (`source.checkout_not_commit`): what is delivered is exactly
the commit, whatever else lies in the folder.

What a reader could get wrong: the build folders `open_source` excludes (`target`, `logs`,
`dbt_packages`, ...) are excluded from the commit's list too, at any depth. The synthetic embedded
default has no real commit and is not bound (the caller skips it). The grant carries no archive
digest field, so an archive's SHA-256 is recorded (release state), not checked against the grant.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from dpone_dagster.release.source.archive import fail
from dpone_dagster.release.source.snapshot import DEFAULT_CHECKOUT_EXCLUDES, SourceTree, open_source

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_GIT_TIMEOUT_SECONDS = 10


def _git(checkout: str | os.PathLike[str], *args: str) -> str | None:
    """stdout of one git command in `checkout` (no hooks, no fsmonitor, no pager); None when it fails."""
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
    command = [git, "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-C", str(checkout), *args]
    try:
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_SECONDS,
            env=environment,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout if result.returncode == 0 else None


def checkout_head(checkout: str | os.PathLike[str]) -> str | None:
    """The 40-hex commit of HEAD of the git checkout holding `checkout`; None when there is none."""
    head = (_git(checkout, "rev-parse", "--verify", "--quiet", "HEAD^{commit}") or "").strip()
    return head if _COMMIT.match(head) else None


def committed_files(
    checkout: str | os.PathLike[str], commit: str, exclude: frozenset[str] = DEFAULT_CHECKOUT_EXCLUDES
) -> dict[str, str]:
    """Path (relative to `checkout`) -> git blob id of every file `commit` holds below `checkout`,
    without paths through an `exclude`d name. A symlink or submodule in the commit refuses."""
    listing = _git(checkout, "ls-tree", "-r", "-z", commit, "--", ".")
    if listing is None:
        raise fail("source.commit_unbound", "the configured commit cannot be listed in the source checkout")
    files: dict[str, str] = {}
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        mode, kind, blob = meta.split(" ")
        if exclude.intersection(path.split("/")):
            continue
        if kind != "blob" or mode not in ("100644", "100755"):
            raise fail(
                "source.checkout_not_commit",
                "the commit holds a symlink or a submodule, which a release source cannot carry",
            )
        files[path] = blob
    return files


def git_blob_id(data: bytes, *, sha256: bool = False) -> str:
    """The id git gives a file of these bytes: SHA-1 (or, in a SHA-256 repository, SHA-256) of
    `blob <size>\\0` + bytes."""
    header = b"blob %d\0" % len(data)
    if sha256:
        return hashlib.sha256(header + data).hexdigest()
    return hashlib.sha1(header + data, usedforsecurity=False).hexdigest()


def open_bound_source(
    location: str | os.PathLike[str], commit: str, *, work_dir: str | os.PathLike[str] | None = None
) -> SourceTree:
    """The source at `location` read as `commit` and bound to it: a checkout's committed files only
    (each verified against the commit), an archive whole (bound by the commit it records)."""
    if not os.path.isdir(location):
        tree = open_source(location, work_dir=work_dir)
        expected = None
    else:
        _require_head(location, commit)
        expected = committed_files(location, commit.lower())
        tree = open_source(location, work_dir=work_dir, only=frozenset(expected))
    try:
        bind_source_commit(location, tree, commit, expected=expected)
    except BaseException:
        tree.close()
        raise
    return tree


def _require_head(checkout: str | os.PathLike[str], commit: str) -> None:
    head = checkout_head(Path(checkout))
    if head is None:
        raise fail("source.commit_unbound", "the source checkout is not a git checkout, so its commit cannot be bound")
    if head != commit.lower():
        raise fail(
            "source.commit_mismatch",
            f"the source checkout is at {head[:12]}, not at the configured commit {commit[:12]}",
        )


def _require_commit_files(tree: SourceTree, expected: dict[str, str]) -> None:
    sha256 = any(len(blob) == 64 for blob in expected.values())
    read = {item.path: git_blob_id(tree.read_bytes(item.path), sha256=sha256) for item in tree.snapshot.files}
    extra = sorted(set(read) - set(expected))
    missing = sorted(set(expected) - set(read))
    changed = sorted(path for path in set(read) & set(expected) if read[path] != expected[path])
    if extra or missing or changed:
        counts = f"{len(changed)} changed, {len(missing)} missing, {len(extra)} not in the commit"
        example = (changed + missing + extra)[0]
        raise fail(
            "source.checkout_not_commit",
            f"the source checkout is not exactly the configured commit ({counts}; for example {example!r}): "
            "commit or discard the changes, or deliver from a clean clone",
        )


def bind_source_commit(
    location: str | os.PathLike[str], tree: SourceTree, commit: str, *, expected: dict[str, str] | None = None
) -> None:
    """Refuse unless the source read from `location` (into `tree`) is exactly `commit`: a checkout
    at that HEAD whose files are the commit's (`expected`, default: listed again), an archive
    recording it."""
    if tree.archive_sha256 is None:
        _require_head(location, commit)
        _require_commit_files(tree, committed_files(location, commit.lower()) if expected is None else expected)
        return
    if tree.declared_commit is None:
        raise fail(
            "source.commit_unbound",
            "the source archive records no commit (make it with git archive or build_source_archive(commit=...))",
        )
    if tree.declared_commit != commit.lower():
        raise fail(
            "source.commit_mismatch",
            f"the source archive records commit {tree.declared_commit[:12]}, not the configured commit {commit[:12]}",
        )
