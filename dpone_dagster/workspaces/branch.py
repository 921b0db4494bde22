"""Branch forks: a Dagster+ branch deployment, or a git branch, works in its own throwaway fork.

In a Dagster+ branch deployment (`DAGSTER_CLOUD_IS_BRANCH_DEPLOYMENT=1`, read by
`dpone_dagster.config`) the configured workspace *is* the branch's fork: `wm-fork-pr-<id>` for a
pull request, else `wm-fork-git-<branch>` (`contracts.workspace_ids.branch_fork_id`).
`ensure_for_deployment` creates it on first use from `forks.branch_parent` (default `prod`), and
is a no-op read afterwards; when `DAGSTER_CLOUD_PULL_REQUEST_STATUS` is CLOSED or MERGED it drops
the fork instead, through the normal guarded drop (`Workspaces.drop`, as the fork's owner — the
same path the TTL janitor takes). `ensure_for_git` does the same for the branch checked out in a
folder (`dpone fork ensure --from-git`).

What a reader could get wrong:
- "idempotent" means: an existing fork with the configured parent is kept as it is (never
  re-created, its data stays); an existing fork with *another* parent is refused
  (`workspace.branch_parent_mismatch`) rather than silently re-parented or used.
- two processes ensuring at once: the loser of the create sees `WorkspaceExistsError` and then
  finds the winner's fork, so both report it.
- branch forks are throwaway (`wm-fork-` ids): the TTL janitor also reaps a branch nobody used for
  its TTL; the next load or `dpone fork ensure` creates it again, empty (defers to the parent).
"""

from __future__ import annotations

import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from dpone_dagster.config import DponeConfig, load_config
from dpone_dagster.contracts.workspace_ids import branch_fork_id
from dpone_dagster.errors import WorkspaceError
from dpone_dagster.workspaces import repository as repo
from dpone_dagster.workspaces.service import WorkspaceExistsError, Workspaces

BRANCH_OWNER = "branch-deployment"
GIT_TIMEOUT_SECONDS = 10


class NotABranchDeploymentError(WorkspaceError):
    code = "workspace.not_a_branch_deployment"


class NotAGitCheckoutError(WorkspaceError):
    code = "workspace.not_a_git_checkout"


class GitBranchUnknownError(WorkspaceError):
    code = "workspace.git_branch_unknown"


class BranchParentMismatchError(WorkspaceError):
    code = "workspace.branch_parent_mismatch"


@dataclass(frozen=True)
class BranchFork:
    """What ensuring did: `created`, `exists`, `dropped` or `already_gone`."""

    workspace_id: str
    parent_id: str
    source: str
    branch: str | None
    pull_request_id: str | None
    action: str
    left_for_retry: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def current_git_branch(cwd: Path) -> str:
    """The branch checked out in `cwd` (`git rev-parse --abbrev-ref HEAD`); refuses outside a checkout."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--abbrev-ref", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
        )
    except (OSError, subprocess.TimeoutExpired):
        raise NotAGitCheckoutError("git could not be run here; --from-git needs git and a checkout") from None
    if done.returncode != 0:
        raise NotAGitCheckoutError("this folder is not inside a git checkout (or it has no commit yet)")
    branch = done.stdout.strip()
    if not branch or branch == "HEAD":
        raise GitBranchUnknownError("HEAD is detached: check out a branch, or name the fork with `dpone fork create`")
    return branch


def ensure_branch_fork(
    workspaces: Workspaces,
    *,
    fork_id: str,
    parent_id: str,
    source: str,
    branch: str | None = None,
    pull_request_id: str | None = None,
    owner: str = BRANCH_OWNER,
    gone: bool = False,
) -> BranchFork:
    """Create `fork_id` from `parent_id` unless it exists (then check its parent); with `gone`, drop it."""
    with workspaces.engine.connect() as conn:
        existing = repo.get_workspace(conn, fork_id)

    def report(action: str, left: int = 0) -> BranchFork:
        return BranchFork(fork_id, parent_id, source, branch, pull_request_id, action, left)

    if gone:
        if existing is None:
            return report("already_gone")
        result = workspaces.drop(fork_id, actor=existing.owner)
        return report("dropped", len(result.cleanup.leftovers))
    if existing is None:
        try:
            workspaces.create_fork(fork_id, parent_id, owner=owner)
            return report("created")
        except WorkspaceExistsError:
            with workspaces.engine.connect() as conn:
                existing = repo.get_workspace(conn, fork_id)
            if existing is None:
                raise
    if existing.parent_id != parent_id:
        raise BranchParentMismatchError(
            f"fork {fork_id!r} exists with parent {existing.parent_id!r}, not the configured "
            f"{parent_id!r}; drop it (`dpone fork drop`) or set forks.branch_parent"
        )
    return report("exists")


def ensure_for_deployment(config: DponeConfig | None = None, *, required: bool = False) -> BranchFork | None:
    """In a Dagster+ branch deployment: ensure (or, PR closed/merged, drop) its fork. Else None,
    or `workspace.not_a_branch_deployment` when `required`."""
    config = config or load_config()
    deployment = config.branch_deployment
    if deployment is None:
        if required:
            raise NotABranchDeploymentError(
                "not a Dagster+ branch deployment (DAGSTER_CLOUD_IS_BRANCH_DEPLOYMENT is not 1); "
                "use --from-git for the branch checked out here"
            )
        return None
    return ensure_branch_fork(
        Workspaces(config),
        fork_id=config.workspace,
        parent_id=config.forks.branch_parent,
        source="dagster_cloud",
        branch=deployment.branch,
        pull_request_id=deployment.pull_request_id,
        gone=deployment.pull_request_gone,
    )


def ensure_for_git(cwd: Path, config: DponeConfig | None = None, *, owner: str = BRANCH_OWNER) -> BranchFork:
    """Ensure the fork of the git branch checked out in `cwd` (OSS: `dpone fork ensure --from-git`)."""
    config = config or load_config()
    branch = current_git_branch(cwd)
    return ensure_branch_fork(
        Workspaces(config),
        fork_id=branch_fork_id(branch=branch),
        parent_id=config.forks.branch_parent,
        source="git",
        branch=branch,
        owner=owner,
    )
