"""Workspace identifiers: what a valid id is, and which ids are throwaway forks (pure rules).

They sit in `contracts/` because both the lake services and the workspaces service apply them, and
`lake/` must not import `workspaces/`.

Ids are git-branch-safe (the `git check-ref-format --branch` rules) and may contain `/`. The root
workspace is `prod`; throwaway forks start with `wm-fork-`. What a reader could get wrong: a
`wm-fork-` id is a fork even when it has no parent any more (an orphaned fork stays isolated), so
"is this a fork" is never just "does it have a parent".
"""

from __future__ import annotations

import hashlib
import re

from dpone_dagster.errors import WorkspaceError

ROOT_WORKSPACE = "prod"
THROWAWAY_FORK_PREFIX = "wm-fork-"
MAX_WORKSPACE_ID_LENGTH = 200

_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


class InvalidWorkspaceIdError(WorkspaceError):
    code = "workspace.invalid_id"


def _refusal(workspace_id: str) -> str | None:
    if not workspace_id:
        return "is empty"
    if len(workspace_id) > MAX_WORKSPACE_ID_LENGTH:
        return f"is longer than {MAX_WORKSPACE_ID_LENGTH} characters"
    if _FORBIDDEN.search(workspace_id):
        return "contains a space, a control character or one of ~ ^ : ? * [ \\"
    if ".." in workspace_id or "@{" in workspace_id or "//" in workspace_id:
        return "contains '..', '@{' or '//'"
    if workspace_id.startswith(("/", "-")) or workspace_id.endswith(("/", ".")):
        return "starts with '/' or '-', or ends with '/' or '.'"
    if workspace_id == "@":
        return "is '@'"
    for component in workspace_id.split("/"):
        if component.startswith(".") or component.endswith(".lock"):
            return "has a path component starting with '.' or ending with '.lock'"
    return None


def check_workspace_id(workspace_id: str) -> str:
    """Return `workspace_id` unchanged if it is a valid (git-branch-safe) id, else refuse."""
    if not isinstance(workspace_id, str):
        raise InvalidWorkspaceIdError("a workspace id must be a string")
    problem = _refusal(workspace_id)
    if problem is not None:
        shown = workspace_id if len(workspace_id) <= 80 else workspace_id[:77] + "..."
        raise InvalidWorkspaceIdError(f"workspace id {shown!r} is not git-branch-safe: it {problem}")
    return workspace_id


def is_valid_workspace_id(workspace_id: str) -> bool:
    return isinstance(workspace_id, str) and _refusal(workspace_id) is None


def is_throwaway_fork(workspace_id: str) -> bool:
    return workspace_id.startswith(THROWAWAY_FORK_PREFIX)


PULL_REQUEST_FORK_PREFIX = THROWAWAY_FORK_PREFIX + "pr-"
GIT_BRANCH_FORK_PREFIX = THROWAWAY_FORK_PREFIX + "git-"
_PULL_REQUEST_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_SLUG_MAX = 80


def branch_fork_id(*, branch: str | None = None, pull_request_id: str | None = None) -> str:
    """The throwaway fork a git branch or pull request works in: stable, valid, and distinct per branch.

    A pull request id wins (`wm-fork-pr-<id>`: it survives a renamed branch); else the branch
    (`wm-fork-git-<branch>`, where a branch with characters other than letters, digits, `_` and `-`
    — `feature/x` — is flattened and suffixed with a hash of its exact name, so `feature/x` and
    `feature-x` never share a fork)."""
    if pull_request_id is not None and pull_request_id.strip():
        number = pull_request_id.strip()
        if not _PULL_REQUEST_ID.match(number):
            raise InvalidWorkspaceIdError("a pull request id is letters, digits, '_' and '-' only (at most 64)")
        return check_workspace_id(PULL_REQUEST_FORK_PREFIX + number)
    if branch is None or not branch.strip():
        raise InvalidWorkspaceIdError("a branch fork needs a git branch name or a pull request id")
    name = branch.strip()
    slug = _SLUG_UNSAFE.sub("-", name).strip("-")[:_SLUG_MAX].strip("-")
    if slug != name:
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
        slug = f"{slug}-{digest}" if slug else digest
    return check_workspace_id(GIT_BRANCH_FORK_PREFIX + slug)
