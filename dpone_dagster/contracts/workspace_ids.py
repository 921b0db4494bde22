"""Workspace identifiers: what a valid id is, and which ids are throwaway forks (pure rules).

They sit in `contracts/` because both the lake services and the workspaces service apply them, and
`lake/` must not import `workspaces/`.

Ids are git-branch-safe (the `git check-ref-format --branch` rules) and may contain `/`. The root
workspace is `prod`; throwaway forks start with `wm-fork-`. What a reader could get wrong: a
`wm-fork-` id is a fork even when it has no parent any more (an orphaned fork stays isolated), so
"is this a fork" is never just "does it have a parent".
"""

from __future__ import annotations

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
