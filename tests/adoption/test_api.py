"""`dpone_dagster.api` (issue 18 item 6): the public surface works end to end on the embedded lake,
and the `dpone fork` commands go through it (not a second path)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dpone_dagster import api
from dpone_dagster.cli import app
from dpone_dagster.errors import DponeError, WorkspaceError


def test_create_connect_status_and_drop_a_fork_through_the_api() -> None:
    with api.connect("prod", targets=["orders"]) as conn:
        conn.execute("CREATE TABLE orders AS SELECT range AS id FROM range(5)")
    created = api.create_fork("wm-fork-api", owner="alice", ttl="2d")
    assert created.parent_id == "prod"
    assert "wm-fork-api" in [w.id for w in api.list_workspaces()]
    with api.connect("wm-fork-api", targets=["orders"]) as conn:  # the fork writes only its own namespace
        conn.execute("CREATE OR REPLACE TABLE orders AS SELECT range AS id FROM range(2)")
        assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 2
    with api.connect("prod") as conn:  # the parent is never written from a fork
        assert conn.execute("SELECT count(*) FROM orders").fetchone()[0] == 5
    assert api.resolve_lake("wm-fork-api").fork_mode
    assert [lake.lake for lake in api.fork_status("wm-fork-api").lakes] == ["main"]
    assert api.drop_fork("wm-fork-api", actor="alice").workspace_deleted
    assert "wm-fork-api" not in [w.id for w in api.list_workspaces() if not w.deleted]


def test_refusals_are_coded() -> None:
    with pytest.raises(DponeError) as refused:
        api.create_fork("wm-api-ttl", owner="alice", ttl="soon")
    assert refused.value.code == "config.invalid_duration"
    with pytest.raises(DponeError) as refused:
        api.drop_fork("prod", actor="alice")
    assert refused.value.code == "workspace.root_protected"


@pytest.mark.parametrize(
    ("function", "argv"),
    [
        ("create_fork", ["fork", "create", "wm-x", "--parent", "prod"]),
        ("drop_fork", ["fork", "drop", "wm-x"]),
        ("list_workspaces", ["fork", "list"]),
        ("fork_status", ["fork", "status", "wm-x"]),
        ("diff_fork", ["fork", "diff", "wm-x"]),
        ("promote_fork", ["fork", "promote", "wm-x", "t", "--diff-id", "d"]),
    ],
)
def test_the_cli_calls_the_api(monkeypatch, function, argv) -> None:
    def refuse(*args, **kwargs):
        raise WorkspaceError("through the api", code="workspace.error")

    monkeypatch.setattr(api, function, refuse)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 1
    assert "error [workspace.error]: through the api" in result.output


def test_the_api_inspects_releases_and_refuses_what_is_not_one(tmp_path) -> None:
    from dpone_dagster import api
    from dpone_dagster.errors import DponeError

    assert {"run_release", "inspect_release", "release_summary"} <= set(api.__all__)
    for location in (str(tmp_path), "s3://bucket/not-a-commit.json"):
        with pytest.raises(DponeError) as caught:
            api.inspect_release(location)
        assert caught.value.code == "release.not_a_release_location"
