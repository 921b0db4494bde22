"""Tombstones as a user sees them: `dpone fork list` shows a dropped PostgreSQL fork's swept prefix
until `dpone fork sweep` (or any later drop) retires it after the grace period; the embedded
default leaves none (its catalog drop proves no connection had the fork attached)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from typer.testing import CliRunner

from dpone_dagster.cli import app
from dpone_dagster.lake.lifecycle.cleanup import TOMBSTONE_GRACE
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.workspaces.service import Workspaces

FORK = "wm-fork-t"


def _cli(monkeypatch, env, now):
    service = Workspaces(env.config, clock=lambda: now[0])
    monkeypatch.setattr("dpone_dagster.cli.fork._service", lambda: service)
    monkeypatch.setattr("dpone_dagster.api._workspaces", lambda config=None: service)  # drop/list go through the API
    runner = CliRunner()
    return service, lambda *args: runner.invoke(app, ["fork", *args])


def test_fork_list_shows_a_tombstone_until_a_sweep_after_the_grace_period(pg_s3_lake, monkeypatch):
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    service, fork = _cli(monkeypatch, pg_s3_lake, now)
    service.create_fork(FORK, "prod", owner="alice")
    resolve(FORK, config=pg_s3_lake.config)  # registers the fork's location in the ledger

    dropped = fork("drop", FORK, "--as", "alice")
    assert dropped.exit_code == 0, dropped.output
    assert f"swept {FORK} lake main" in dropped.output
    listed = fork("list")
    assert f"{FORK}\tparent=prod" in listed.output and "1 swept prefix(es)" in listed.output

    early = fork("sweep")
    assert early.exit_code == 0 and "1 tombstone(s) still pending, 0 retired" in early.output
    now[0] += TOMBSTONE_GRACE + timedelta(seconds=1)
    late = fork("sweep")
    assert late.exit_code == 0 and f"retired tombstone {FORK} lake main" in late.output
    assert FORK not in fork("list").output


def test_the_embedded_default_leaves_no_tombstone(embedded_lake, monkeypatch):
    service, fork = _cli(monkeypatch, embedded_lake, [datetime(2026, 1, 1, tzinfo=UTC)])
    service.create_fork(FORK, "prod", owner="alice")
    resolve(FORK, config=embedded_lake.config)
    assert fork("drop", FORK, "--as", "alice").exit_code == 0
    assert FORK not in fork("list").output
    assert "0 tombstone(s) still pending" in fork("sweep").output
