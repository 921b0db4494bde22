"""Workspaces service and `dpone fork` / `dpone lake` CLI: creation, permissions, listing, status."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dpone_dagster.cli import app
from dpone_dagster.config import load_config
from dpone_dagster.contracts.workspace_ids import InvalidWorkspaceIdError, check_workspace_id
from dpone_dagster.control.store import reset_store_cache
from dpone_dagster.errors import WorkspaceError
from dpone_dagster.workspaces.service import Workspaces
from dpone_dagster.workspaces.status import workspace_status


@pytest.fixture
def config(tmp_path, monkeypatch):
    reset_store_cache()
    lakes = tmp_path / "dpone.yaml"
    lakes.write_text(
        "lakes:\n"
        "  - name: main\n"
        f"    catalog: {tmp_path}/lakes/main.ducklake\n"
        f"    data_path: {tmp_path}/lakes/storage/main/\n"
        "  - name: analytics\n"
        f"    catalog: {tmp_path}/lakes/analytics.ducklake\n"
        f"    data_path: {tmp_path}/lakes/storage/analytics/\n"
    )
    monkeypatch.setenv("DPONE_CONFIG", str(lakes))
    return load_config()


@pytest.fixture
def service(config):
    return Workspaces(config)


def code_of(excinfo) -> str:
    return excinfo.value.code


@pytest.mark.parametrize(
    "bad", ["", "a b", "a..b", "-x", "x/", "/x", "a//b", "x.lock", "a/.b", "x~1", "a:b", "x" * 201, "x\x00"]
)
def test_workspace_ids_must_be_git_branch_safe(bad):
    with pytest.raises(InvalidWorkspaceIdError):
        check_workspace_id(bad)


def test_fork_clones_settings_isolated_by_default_and_strips_shared_stamps(service, config):
    service.create_fork("wm-fork-a", "prod", owner="alice", shared_lakes=["analytics"])
    service.create_fork("wm-fork-a/b", "wm-fork-a", owner="bob")
    modes = {lake.lake: lake.mode for lake in workspace_status("wm-fork-a", config).lakes}
    assert modes == {"main": "isolated", "analytics": "shared"}
    modes = {lake.lake: lake.mode for lake in workspace_status("wm-fork-a/b", config).lakes}
    assert modes == {"main": "isolated", "analytics": "isolated"}
    assert {lake.mode for lake in workspace_status("prod", config).lakes} == {"root"}


def test_creation_refusals(service):
    service.create_fork("wm-fork-a", "prod", owner="alice")
    with pytest.raises(WorkspaceError) as caught:
        service.create_fork("wm-fork-a", "prod", owner="alice")
    assert code_of(caught) == "workspace.exists"
    with pytest.raises(WorkspaceError) as caught:
        service.create_fork("wm-fork-b", "nope", owner="alice")
    assert code_of(caught) == "workspace.unknown"
    with pytest.raises(WorkspaceError) as caught:
        service.create_fork("wm-fork-b", "prod", owner="alice", shared_lakes=["lake_that_is_not"])
    assert code_of(caught) == "workspace.unknown_lake"
    with pytest.raises(WorkspaceError) as caught:
        service.create_fork("prod", "wm-fork-a", owner="alice")
    assert code_of(caught) == "workspace.root_protected"


def test_chains_are_capped(service):
    parent = "prod"
    for depth in range(19):
        child = f"wm-fork-d{depth}"
        service.create_fork(child, parent, owner="alice")
        parent = child
    with pytest.raises(WorkspaceError) as caught:
        service.create_fork("wm-fork-too-deep", parent, owner="alice")
    assert code_of(caught) == "workspace.chain_too_deep"


def test_drop_permissions(service):
    service.create_fork("wm-fork-a", "prod", owner="alice")
    with pytest.raises(WorkspaceError) as caught:
        service.drop("wm-fork-a", actor="mallory")
    assert code_of(caught) == "workspace.permission_denied"
    service.grant_admin("prod", "root-admin", granted_by="root-admin")
    with pytest.raises(WorkspaceError):
        service.grant_admin("prod", "mallory", granted_by="mallory")
    service.create_fork("team-dev", "prod", owner="carol")
    with pytest.raises(WorkspaceError) as caught:
        service.drop("team-dev", actor="carol")
    assert code_of(caught) == "workspace.permission_denied"
    assert service.drop("team-dev", actor="root-admin").workspace_deleted
    assert service.drop("wm-fork-a", actor="alice").workspace_deleted
    with pytest.raises(WorkspaceError) as caught:
        service.drop("prod", actor="root-admin")
    assert code_of(caught) == "workspace.root_protected"


def test_parent_with_attached_dev_workspaces_cannot_be_dropped_but_throwaways_are_orphaned(service):
    service.grant_admin("prod", "admin", granted_by="admin")
    service.create_fork("team-dev", "prod", owner="carol")
    service.create_fork("team-dev/feature", "team-dev", owner="carol")
    service.create_fork("wm-fork-t", "team-dev", owner="dave")
    with pytest.raises(WorkspaceError) as caught:
        service.drop("team-dev", actor="admin")
    assert code_of(caught) == "workspace.dev_workspaces_attached"
    service.drop("team-dev/feature", actor="admin")
    result = service.drop("team-dev", actor="admin")
    assert result.orphaned == ("wm-fork-t",)
    listed = {w.id: w for w in service.list()}
    assert listed["wm-fork-t"].orphaned and listed["wm-fork-t"].parent_id is None
    assert "team-dev" not in listed


def test_cli_round_trip(config, monkeypatch):
    runner = CliRunner()
    created = runner.invoke(
        app, ["fork", "create", "wm-fork-cli", "--parent", "prod", "--owner", "alice", "--shared", "analytics"]
    )
    assert created.exit_code == 0, created.output
    listed = runner.invoke(app, ["fork", "list"])
    assert "wm-fork-cli" in listed.output and "shared: analytics" in listed.output
    status = runner.invoke(app, ["fork", "status", "wm-fork-cli", "--json"])
    data = json.loads(status.output)
    assert {lake["lake"]: lake["mode"] for lake in data["lakes"]} == {"main": "isolated", "analytics": "shared"}
    main = next(lake for lake in data["lakes"] if lake["lake"] == "main")
    assert main["namespace"].startswith("wm_fork_") and "__wm_forks" in main["data_path"]

    sql = runner.invoke(app, ["lake", "sql", "wm-fork-cli", "main", "--target", "orders"])
    assert sql.exit_code == 0 and "ATTACH 'ducklake:" in sql.output and main["namespace"] in sql.output

    refused = runner.invoke(app, ["fork", "drop", "wm-fork-cli", "--as", "mallory"])
    assert refused.exit_code == 1 and "workspace.permission_denied" in refused.output
    dropped = runner.invoke(app, ["fork", "drop", "wm-fork-cli", "--as", "alice"])
    assert dropped.exit_code == 0 and "deleted workspace wm-fork-cli" in dropped.output
    unknown = runner.invoke(app, ["fork", "drop", "wm-fork-cli", "--as", "alice"])
    assert unknown.exit_code == 1 and "workspace.unknown" in unknown.output


def test_every_workspace_stays_droppable_by_a_root_admin_after_its_parent_is_dropped(service):
    service.grant_admin("prod", "root-admin", granted_by="root-admin")
    service.create_fork("wm-fork-p", "prod", owner="alice")
    service.create_fork("wm-fork-q", "wm-fork-p", owner="bob")
    service.create_fork("dev/x", "wm-fork-q", owner="carol")
    assert service.drop("wm-fork-p", actor="alice").orphaned == ("wm-fork-q",)

    with pytest.raises(WorkspaceError) as caught:
        service.drop("dev/x", actor="carol")
    assert code_of(caught) == "workspace.permission_denied"
    service.grant_admin("wm-fork-q", "dave", granted_by="root-admin")
    with pytest.raises(WorkspaceError) as caught:
        service.grant_admin("wm-fork-q", "eve", granted_by="mallory")
    assert code_of(caught) == "workspace.permission_denied"
    assert service.drop("dev/x", actor="root-admin").workspace_deleted
    assert service.drop("wm-fork-q", actor="root-admin").workspace_deleted
    assert [w.id for w in service.list() if not w.deleted] == ["prod"]


def test_sharing_below_a_fork_needs_the_root_named(service, config):
    service.create_fork("wm-fork-a", "prod", owner="alice")
    with pytest.raises(WorkspaceError) as caught:
        service.create_fork("wm-fork-a/b", "wm-fork-a", owner="bob", shared_lakes=["main"])
    assert code_of(caught) == "workspace.shared_is_root" and "'prod'" in str(caught.value)
    with pytest.raises(WorkspaceError) as caught:
        service.create_fork("wm-fork-a/b", "wm-fork-a", owner="bob", shared_lakes=["main"], shared_with="wm-fork-a")
    assert code_of(caught) == "workspace.shared_is_root"
    service.create_fork("wm-fork-a/c", "wm-fork-a", owner="bob")
    with pytest.raises(WorkspaceError) as caught:
        service.set_lake_shared("wm-fork-a/c", "main", True, actor="bob")
    assert code_of(caught) == "workspace.shared_is_root"

    service.create_fork("wm-fork-a/b", "wm-fork-a", owner="bob", shared_lakes=["main"], shared_with="prod")
    modes = {lake.lake: lake.mode for lake in workspace_status("wm-fork-a/b", config).lakes}
    assert modes["main"] == "shared"
    service.set_lake_shared("wm-fork-a/c", "main", True, actor="bob", shared_with="prod")

    runner = CliRunner()
    refused = runner.invoke(
        app, ["fork", "create", "wm-fork-a/d", "--parent", "wm-fork-a", "--owner", "bob", "--shared", "main"]
    )
    assert refused.exit_code == 1 and "workspace.shared_is_root" in refused.output
    named = runner.invoke(
        app,
        [
            "fork",
            "create",
            "wm-fork-a/d",
            "--parent",
            "wm-fork-a",
            "--owner",
            "bob",
            "--shared",
            "main",
            "--shared-with",
            "prod",
        ],
    )
    assert named.exit_code == 0, named.output
