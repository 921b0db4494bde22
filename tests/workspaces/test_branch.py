"""Branch forks on the embedded default: Dagster+ branch-deployment variables, and `dpone fork ensure --from-git`.

With the variables a Dagster+ branch deployment sets, the configured workspace is the pull
request's fork; ensuring creates it from the configured parent once, keeps it after (its data
stays), and drops it through the normal guarded drop once the pull request is closed or merged.
`--from-git` does the same for the branch checked out in a temporary git repository.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpone_dagster.cli import app
from dpone_dagster.config import load_config
from dpone_dagster.contracts.workspace_ids import branch_fork_id, is_throwaway_fork, is_valid_workspace_id
from dpone_dagster.control.store import reset_store_cache
from dpone_dagster.errors import ConfigError, DponeError
from dpone_dagster.integration.lake.resources import DuckLakeResource
from dpone_dagster.workspaces.branch import BranchParentMismatchError, ensure_for_deployment
from dpone_dagster.workspaces.service import Workspaces
from tests.lake.conftest import lake_env  # noqa: F401 (embedded and PostgreSQL + S3)

PR_FORK = "wm-fork-pr-42"


@pytest.fixture(autouse=True)
def _fresh_store():
    reset_store_cache()
    yield
    reset_store_cache()


@pytest.fixture
def branch_deployment(monkeypatch):
    monkeypatch.setenv("DAGSTER_CLOUD_IS_BRANCH_DEPLOYMENT", "1")
    monkeypatch.setenv("DAGSTER_CLOUD_GIT_BRANCH", "feature/orders")
    monkeypatch.setenv("DAGSTER_CLOUD_PULL_REQUEST_ID", "42")
    monkeypatch.setenv("DAGSTER_CLOUD_PULL_REQUEST_STATUS", "OPEN")
    return monkeypatch


def _ids() -> dict[str, str | None]:
    return {w.id: w.parent_id for w in Workspaces(load_config()).list() if not w.deleted}


def _invoke(*args: str):
    return CliRunner().invoke(app, ["fork", *args])


def test_fork_ids_are_stable_valid_throwaway_and_distinct_per_branch():
    names = ["main", "feature/x", "feature-x", "Feature/X", "a" * 300, "ünïcode/ß", "x.lock", "..", "-lead"]
    ids = [branch_fork_id(branch=n) for n in names]
    assert ids == [branch_fork_id(branch=n) for n in names]
    assert all(is_valid_workspace_id(i) and is_throwaway_fork(i) for i in ids)
    assert len(set(ids)) == len(ids)
    assert branch_fork_id(branch="main") == "wm-fork-git-main"
    assert branch_fork_id(branch="feature/x", pull_request_id="42") == PR_FORK
    with pytest.raises(DponeError):
        branch_fork_id(pull_request_id="42/../prod")
    with pytest.raises(DponeError):
        branch_fork_id(branch="  ")


def test_branch_deployment_variables_create_then_drop_the_fork(branch_deployment):
    config = load_config()
    assert config.workspace == PR_FORK and config.forks.branch_parent == "prod"
    first = ensure_for_deployment(config)
    assert (first.action, first.workspace_id, first.parent_id) == ("created", PR_FORK, "prod")
    assert _ids()[PR_FORK] == "prod"

    with DuckLakeResource().connect("main", targets=["orders"]) as conn:  # the deployment writes its fork
        conn.execute("CREATE OR REPLACE TABLE orders AS SELECT range AS id FROM range(3)")
        assert DuckLakeResource().record_materialization(conn, "orders")["fork_state"] == "fork_materialized"
    again = ensure_for_deployment(load_config())
    assert again.action == "exists"
    with DuckLakeResource().connect("main") as conn:  # kept as it was, not re-created empty
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (3,)

    branch_deployment.setenv("DAGSTER_CLOUD_PULL_REQUEST_STATUS", "MERGED")
    dropped = ensure_for_deployment(load_config())
    assert (dropped.action, dropped.left_for_retry) == ("dropped", 0)
    assert PR_FORK not in _ids()
    assert ensure_for_deployment(load_config()).action == "already_gone"
    with pytest.raises(DponeError):
        DuckLakeResource().resolve("main")


def test_the_cli_ensures_and_drops_from_the_variables(branch_deployment):
    created = _invoke("ensure", "--json")
    assert created.exit_code == 0, created.output
    assert json.loads(created.output) == {
        "workspace_id": PR_FORK,
        "parent_id": "prod",
        "source": "dagster_cloud",
        "branch": "feature/orders",
        "pull_request_id": "42",
        "action": "created",
        "left_for_retry": 0,
    }
    assert json.loads(_invoke("ensure", "--json").output)["action"] == "exists"
    branch_deployment.setenv("DAGSTER_CLOUD_PULL_REQUEST_STATUS", "closed")
    assert json.loads(_invoke("ensure", "--json").output)["action"] == "dropped"
    assert PR_FORK not in _ids()


def test_outside_a_branch_deployment_ensure_without_from_git_is_refused():
    done = _invoke("ensure")
    assert done.exit_code == 1 and "workspace.not_a_branch_deployment" in done.output
    assert ensure_for_deployment(load_config()) is None


def test_the_configured_parent_is_used_and_a_fork_with_another_parent_is_refused(branch_deployment, tmp_path):
    Workspaces(load_config()).create_fork("team-dev", "prod", owner="alice")
    (tmp_path / "dpone.yaml").write_text("forks:\n  branch_parent: team-dev\n")
    branch_deployment.setenv("DPONE_CONFIG", str(tmp_path / "dpone.yaml"))
    assert ensure_for_deployment(load_config()).parent_id == "team-dev"
    assert _ids()[PR_FORK] == "team-dev"
    branch_deployment.delenv("DPONE_CONFIG")
    with pytest.raises(BranchParentMismatchError) as refused:
        ensure_for_deployment(load_config())
    assert refused.value.code == "workspace.branch_parent_mismatch"


def test_a_deployment_naming_another_workspace_is_refused(branch_deployment):
    branch_deployment.setenv("DPONE_WORKSPACE", "prod")
    with pytest.raises(ConfigError) as refused:
        load_config()
    assert refused.value.code == "config.branch_workspace_conflict"
    branch_deployment.delenv("DPONE_WORKSPACE")
    branch_deployment.delenv("DAGSTER_CLOUD_PULL_REQUEST_ID")
    branch_deployment.delenv("DAGSTER_CLOUD_GIT_BRANCH")
    with pytest.raises(ConfigError) as unidentified:
        load_config()
    assert unidentified.value.code == "config.branch_unidentified"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=dev@example.invalid", "-c", "user.name=dev", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def checkout(tmp_path, monkeypatch) -> Path:
    repo = tmp_path / "checkout"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "README").write_text("x\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-q", "-m", "first")
    _git(repo, "checkout", "-q", "-b", "feature/login")
    monkeypatch.chdir(repo)
    return repo


def test_from_git_ensures_the_checked_out_branchs_fork(checkout):
    expected = branch_fork_id(branch="feature/login")
    done = _invoke("ensure", "--from-git", "--json", "--owner", "alice")
    assert done.exit_code == 0, done.output
    result = json.loads(done.output)
    assert (result["workspace_id"], result["branch"], result["source"], result["action"]) == (
        expected,
        "feature/login",
        "git",
        "created",
    )
    assert _ids()[expected] == "prod"
    assert json.loads(_invoke("ensure", "--from-git", "--json").output)["action"] == "exists"
    text = _invoke("ensure", "--from-git")
    assert text.exit_code == 0 and text.output.startswith(f"exists {expected} (parent prod, git)")


def test_from_git_outside_a_checkout_or_on_a_detached_head_is_refused(tmp_path, monkeypatch, checkout):
    _git(checkout, "checkout", "-q", "--detach")
    detached = _invoke("ensure", "--from-git")
    assert detached.exit_code == 1 and "workspace.git_branch_unknown" in detached.output
    plain = tmp_path / "not-a-checkout"
    plain.mkdir()
    monkeypatch.chdir(plain)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    refused = _invoke("ensure", "--from-git", "--json")
    assert refused.exit_code == 1 and "workspace.not_a_git_checkout" in refused.output
    assert _ids().keys() <= {"prod"}


def _rebuild_domains(lake, release) -> None:
    """Forget the domains' definitions built earlier in this process (the release jobs take their
    `dpone/workspace` tag when their module is imported; a real process loads them once). The lake
    domain's objects are built per workspace, and each domain's `build_defs()` builds anew."""
    import importlib

    for module in ("jobs", "operations", "sensors", "definitions"):
        importlib.reload(importlib.import_module(f"dpone_dagster.defs.release.{module}"))


def test_loading_the_code_location_in_a_branch_deployment_creates_its_fork(branch_deployment):
    import importlib

    from dpone_dagster.defs import lake, release

    assert PR_FORK not in _ids()
    try:
        import dpone_dagster.definitions as location  # a first import loads it; an earlier one is reloaded

        _rebuild_domains(lake, release)  # built once per process: an earlier test may have built them as prod's
        importlib.reload(location)
        assert location.BRANCH_FORK.workspace_id == PR_FORK and location.BRANCH_FORK.action in ("created", "exists")
        assert _ids()[PR_FORK] == "prod"
        jobs = location.defs.get_repository_def().get_all_jobs()
        tagged = {j.name: j.run_tags.get("dpone/workspace") for j in jobs if not j.name.startswith("__")}
        assert set(tagged.values()) == {PR_FORK}, sorted(n for n, w in tagged.items() if w != PR_FORK)
    finally:
        branch_deployment.delenv("DAGSTER_CLOUD_IS_BRANCH_DEPLOYMENT")
        _rebuild_domains(lake, release)
        importlib.reload(location)  # later tests get the location as it loads outside a branch deployment
    assert location.BRANCH_FORK is None


def test_a_closed_pull_requests_fork_is_dropped_with_its_namespaces_on_both_backends(lake_env):
    """Embedded and PostgreSQL + S3: the branch fork writes a table, then MERGED drops it and its data."""
    from dpone_dagster.config import BranchDeployment
    from tests.lake.lakes import fork_places, materialize, run_sql

    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(5)")
    deployment = BranchDeployment(branch="feature/orders", pull_request_id="42", pull_request_status="OPEN")
    config = lake_env.config.model_copy(update={"workspace": PR_FORK, "branch_deployment": deployment})
    assert ensure_for_deployment(config).action == "created"
    materialize(lake_env, PR_FORK, "orders", "SELECT range AS id FROM range(2)")
    namespaces, files = fork_places(lake_env, PR_FORK)
    assert namespaces and files
    gone = deployment.model_copy(update={"pull_request_status": "MERGED"})
    dropped = ensure_for_deployment(config.model_copy(update={"branch_deployment": gone}))
    assert (dropped.action, dropped.left_for_retry) == ("dropped", 0)
    assert fork_places(lake_env, PR_FORK) == ([], [])
    assert run_sql(lake_env, "prod", [], fetch="SELECT count(*) FROM lake_main.main.orders") == [(5,)]
