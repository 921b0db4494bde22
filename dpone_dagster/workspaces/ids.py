"""Workspace identifier rules, re-exported from `dpone_dagster.contracts.workspace_ids`.

What a reader could get wrong: the rules live in `contracts/` (pure, below every service) so that
`lake/` can apply them without importing `workspaces/`; this module only keeps the old import path.
"""

from __future__ import annotations

from dpone_dagster.contracts.workspace_ids import (
    MAX_WORKSPACE_ID_LENGTH,
    ROOT_WORKSPACE,
    THROWAWAY_FORK_PREFIX,
    InvalidWorkspaceIdError,
    check_workspace_id,
    is_throwaway_fork,
    is_valid_workspace_id,
)

__all__ = [
    "MAX_WORKSPACE_ID_LENGTH",
    "ROOT_WORKSPACE",
    "THROWAWAY_FORK_PREFIX",
    "InvalidWorkspaceIdError",
    "check_workspace_id",
    "is_throwaway_fork",
    "is_valid_workspace_id",
]
