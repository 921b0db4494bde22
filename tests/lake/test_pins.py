"""Pinned or live defer, on the embedded default and on PostgreSQL + S3.

A pinned fork reads each ancestor at the snapshot it had when the fork was created (a READ_ONLY
attach with `SNAPSHOT_VERSION`), a live fork reads the ancestor's current data; `repin` moves the
pin forward; the pin survives the parent expiring snapshots older than it; `oldest_pinned_snapshot`
is what maintenance stops at, and pins of dropped forks do not count.
"""

from __future__ import annotations

import json

import duckdb
import pytest
from typer.testing import CliRunner

from dpone_dagster.errors import LakeError
from dpone_dagster.lake.duck import connect
from dpone_dagster.lake.resolution.pins import built_from, oldest_pinned_snapshot, pins
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.workspaces.service import Workspaces

from .lakes import current_snapshot, materialize, rows, run_sql


def fork_snapshots(env, ws) -> int:
    return rows(env, ws, "SELECT max(snapshot_id) FROM lake_main.snapshots()")[0][0]


def test_pinned_fork_keeps_old_rows_live_fork_sees_new_ones_and_repin_moves_forward(lake_env, service):
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(5)")
    pinned_at = current_snapshot(lake_env)
    service.create_fork("wm-fork-pin", "prod", owner="alice", pin=True)
    service.create_fork("wm-fork-live", "prod", owner="alice")
    assert pins(lake_env.config, "wm-fork-pin", "main") == {"prod": pinned_at}
    assert pins(lake_env.config, "wm-fork-live", "main") == {}

    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(100, 103)")
    run_sql(lake_env, "prod", "INSERT INTO lake_main.orders VALUES (7)")
    assert rows(lake_env, "wm-fork-pin", "SELECT count(*), sum(id) FROM lake_main.orders") == [(5, 10)]
    assert rows(lake_env, "wm-fork-live", "SELECT count(*), sum(id) FROM lake_main.orders") == [(4, 310)]

    # steady state: the pinned defer view is not re-created (no new fork snapshot per run)
    before = fork_snapshots(lake_env, "wm-fork-pin")
    rows(lake_env, "wm-fork-pin", "SELECT 1")
    assert fork_snapshots(lake_env, "wm-fork-pin") == before

    moved = service.repin("wm-fork-pin", actor="alice")
    assert moved == {"main": {"prod": current_snapshot(lake_env)}} and moved["main"]["prod"] > pinned_at
    assert rows(lake_env, "wm-fork-pin", "SELECT count(*), sum(id) FROM lake_main.orders") == [(4, 310)]
    assert fork_snapshots(lake_env, "wm-fork-pin") == before  # same view SQL: repin costs no fork snapshot


def test_fork_materialize_records_what_it_built_from(lake_env, service):
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(5)")
    pinned_at = current_snapshot(lake_env)
    service.create_fork("wm-fork-pin", "prod", owner="alice", pin=True)
    service.create_fork("wm-fork-live", "prod", owner="alice")
    materialize(lake_env, "prod", "orders", "SELECT 1 AS id")
    now = current_snapshot(lake_env)
    for fork in ("wm-fork-pin", "wm-fork-live"):
        materialize(lake_env, fork, "mart.summary", "SELECT count(*) AS n FROM lake_main.orders")
    assert built_from(lake_env.config, "wm-fork-pin", "main", "mart.summary") == {"prod": pinned_at}
    assert built_from(lake_env.config, "wm-fork-live", "main", "mart.summary") == {"prod": now}
    assert rows(lake_env, "wm-fork-pin", "SELECT n FROM lake_main.mart.summary") == [(5,)]


def _expire_older_than(env, snapshot: int) -> None:
    """DuckLake's own maintenance on the parent: expire every snapshot older than `snapshot`, then
    delete the files no remaining snapshot reads."""
    older = [
        r[0] for r in rows(env, "prod", f"SELECT snapshot_id FROM lake_main.snapshots() WHERE snapshot_id < {snapshot}")
    ]
    run_sql(
        env,
        "prod",
        [
            f"CALL ducklake_expire_snapshots('lake_main', versions => {older})",
            "CALL ducklake_cleanup_old_files('lake_main', cleanup_all => true)",
        ],
    )


def test_pin_survives_parent_expiring_older_snapshots_but_not_its_own(lake_env, service):
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(5)")
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(6)")
    service.create_fork("wm-fork-pin", "prod", owner="alice", pin=True)
    pin = pins(lake_env.config, "wm-fork-pin", "main")["prod"]
    materialize(lake_env, "prod", "orders", "SELECT 1 AS id")
    assert oldest_pinned_snapshot(lake_env.config, "prod", "main") == pin

    _expire_older_than(lake_env, pin)  # what maintenance does: stop at the oldest pin
    assert rows(lake_env, "prod", "SELECT min(snapshot_id) FROM lake_main.snapshots()") == [(pin,)]
    assert rows(lake_env, "wm-fork-pin", "SELECT count(*) FROM lake_main.orders") == [(6,)]

    # what would happen otherwise: expiring the pinned snapshot too (and cleaning its files) leaves
    # the pinned fork nothing to read; its ancestor attach fails and the table reads as absent
    _expire_older_than(lake_env, pin + 1)
    resolved = resolve("wm-fork-pin", config=lake_env.config)
    conn = connect(extensions=resolved.extensions)
    try:
        warnings = resolved.apply(conn)
        with pytest.raises(duckdb.BinderException) as gone:
            conn.execute("SELECT count(*) FROM lake_main.orders").fetchall()
    finally:
        conn.close()
    assert any("ancestor 'prod'" in w and "could not be attached" in w for w in warnings), warnings
    assert "__wm_dl_main_prod" in str(gone.value) and "does not exist" in str(
        gone.value
    )  # the view outlives its ancestor


def _mark_dropping(env, workspace_id: str) -> None:
    from dpone_dagster.control.store import open_store
    from dpone_dagster.control.workspace_tables import DROPPING, incarnation_state, set_incarnation_state

    with open_store(env.config.control_store).begin() as conn:
        incarnation, _ = incarnation_state(conn, workspace_id)
        set_incarnation_state(conn, workspace_id, incarnation, DROPPING, "2026-01-01T00:00:00+00:00")


def test_oldest_pin_ignores_live_and_dropped_forks(lake_env, service):
    materialize(lake_env, "prod", "orders", "SELECT 1 AS id")
    service.create_fork("wm-fork-old", "prod", owner="alice", pin=True)
    old = pins(lake_env.config, "wm-fork-old", "main")["prod"]
    materialize(lake_env, "prod", "orders", "SELECT 2 AS id")
    service.create_fork("wm-fork-new", "prod", owner="alice", pin=True)
    service.create_fork("wm-fork-live", "prod", owner="alice")
    new = pins(lake_env.config, "wm-fork-new", "main")["prod"]
    assert old < new and oldest_pinned_snapshot(lake_env.config, "prod", "main") == old
    _mark_dropping(lake_env, "wm-fork-old")  # a drop has started: that fork reads nothing any more
    assert oldest_pinned_snapshot(lake_env.config, "prod", "main") == new
    service.drop("wm-fork-old", actor="alice")
    assert pins(lake_env.config, "wm-fork-old", "main") == {}  # the drop deleted its pins
    assert oldest_pinned_snapshot(lake_env.config, "prod", "main") == new
    service.drop("wm-fork-new", actor="alice")
    assert oldest_pinned_snapshot(lake_env.config, "prod", "main") is None


def test_lake_setting_pins_and_cli_reports_pin(embedded_lake, service, monkeypatch):
    materialize(embedded_lake, "prod", "orders", "SELECT 1 AS id")
    lake = embedded_lake.lake.model_copy(update={"defer": "pinned"})
    config = embedded_lake.config.model_copy(update={"lakes": (lake,)})
    Workspaces(config).create_fork("wm-fork-cfg", "prod", owner="alice")
    assert pins(config, "wm-fork-cfg", "main") == {"prod": current_snapshot(embedded_lake)}


def test_repin_of_unknown_workspace_and_unreadable_pin_are_refused(embedded_lake, service):
    from dpone_dagster.errors import WorkspaceError

    with pytest.raises(WorkspaceError) as err:
        service.repin("wm-fork-none", actor="alice")
    assert err.value.code == "workspace.unknown"
    service.create_fork("wm-fork-a", "prod", owner="alice")
    with pytest.raises(LakeError) as err:  # prod's catalog was never created: nothing to pin
        service.repin("wm-fork-a", "main", actor="alice")
    assert err.value.code == "lake.pin_unavailable"
    assert pins(embedded_lake.config, "wm-fork-a", "main") == {}


def test_cli_create_pin_repin_and_status_json(embedded_lake):
    """The CLI uses the configured (embedded default) lake, as `dpone` does."""
    from dpone_dagster.cli.fork import app

    materialize(embedded_lake, "prod", "orders", "SELECT 1 AS id")
    runner = CliRunner()
    created = runner.invoke(app, ["create", "wm-fork-cli", "--parent", "prod", "--owner", "alice", "--pin"])
    assert created.exit_code == 0, created.output
    first = pins(embedded_lake.config, "wm-fork-cli", "main")["prod"]
    materialize(embedded_lake, "prod", "orders", "SELECT 2 AS id")
    status = runner.invoke(app, ["status", "wm-fork-cli", "--json"])
    assert status.exit_code == 0, status.output
    (lake,) = json.loads(status.output)["staleness"]
    assert lake["mode"] == "pinned" and lake["pins"] == {"prod": first}
    assert lake["deferred"][0]["table"] == "main.orders" and lake["deferred"][0]["table_changed"] is True
    text = runner.invoke(app, ["status", "wm-fork-cli"])
    assert f"defer: pinned (pinned at prod@{first})" in text.output
    moved = runner.invoke(app, ["repin", "wm-fork-cli", "--json", "--as", "alice"])
    assert moved.exit_code == 0, moved.output
    assert json.loads(moved.output)["pins"] == {"main": {"prod": first + 1}}
    refused = runner.invoke(app, ["repin", "wm-fork-none", "--as", "alice"])
    assert refused.exit_code == 1 and "workspace.unknown" in refused.output


def test_a_table_created_after_the_pin_is_absent_in_the_pinned_fork_and_not_missing_in_its_owner(lake_env, service):
    from dpone_dagster.lake.state.tracking import fork_state

    materialize(lake_env, "prod", "orders", "SELECT 1 AS id")
    service.create_fork("wm-fork-pin", "prod", owner="alice", pin=True)
    service.create_fork("wm-fork-live", "prod", owner="alice")
    materialize(lake_env, "prod", "later", "SELECT 5 AS x")
    assert rows(lake_env, "wm-fork-pin", "SELECT count(*) FROM duckdb_views() WHERE view_name = 'later'") == [(0,)]
    assert fork_state("wm-fork-live", "main", "main", "later", lake_env.config).state == "deferred"
    assert rows(lake_env, "wm-fork-live", "SELECT x FROM lake_main.later") == [(5,)]
