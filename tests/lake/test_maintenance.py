"""`dpone lake maintain`: DuckLake maintenance of the root lake that cannot break a fork.

Every test runs on the embedded default and on PostgreSQL + S3 (`lake_env`). The clock is injected
(moved past the retention and the file grace) instead of sleeping. Each test can fail: it asserts
that maintenance really deleted something of prod's (an expired snapshot, an old file, a planted
orphan) next to what it must never touch (fork files, a pinned snapshot).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dpone_dagster.control.store import open_store
from dpone_dagster.lake.lifecycle import maintenance as maint
from dpone_dagster.lake.lifecycle.maintenance import maintain
from dpone_dagster.lake.resolution.attach import absolute_data_path
from dpone_dagster.lake.resolution.naming import FORK_DATA_DIR, split_storage_root
from dpone_dagster.workspaces.service import Workspaces

from .lakes import attached, materialize, run_sql

FORK = "wm-fork-maint"
LATER = timedelta(days=30)


def later() -> datetime:
    return datetime.now(UTC) + LATER


def no_pins(engine, owner, lake):
    return None


def forks_root(env) -> str:
    root, _ = split_storage_root(absolute_data_path(env.lake.data_path, env.config.project_root))
    return f"{root}/{FORK_DATA_DIR}/"


def prod_files(env) -> list[str]:
    return env.list_files(absolute_data_path(env.lake.data_path, env.config.project_root))


def snapshot_ids(env) -> list[int]:
    return [r[0] for r in run_sql(env, "prod", [], fetch="SELECT snapshot_id FROM lake_main.snapshots() ORDER BY 1")]


def plant_orphan(env) -> str:
    """A parquet file under prod's data path that prod's catalog does not know."""
    path = absolute_data_path(env.lake.data_path, env.config.project_root) + "main/stray_orphan.parquet"
    with attached(env, "prod") as conn:
        conn.execute(f"COPY (SELECT 42 AS x) TO '{path}' (FORMAT parquet)")
    return path


def prod_with_history_and_a_fork(env) -> None:
    for value in (1, 2, 3):  # three overwrites: old snapshots and old files to clean
        materialize(env, "prod", "orders", f"SELECT range + {value} AS id FROM range(5)")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    materialize(env, FORK, "fork_only", "SELECT 7 AS id")  # fork files under __wm_forks/
    # an untracked parquet file in the fork's prefix: an orphan to *anyone* who would scan it
    with attached(env, FORK) as conn:
        conn.execute("CREATE TABLE lake_main.main.scratch AS SELECT 1 AS id")


def test_maintain_deletes_prod_garbage_but_never_a_fork_file(lake_env):
    prod_with_history_and_a_fork(lake_env)
    orphan = plant_orphan(lake_env)
    fork_before = lake_env.list_files(forks_root(lake_env))
    prod_before = prod_files(lake_env)
    assert fork_before and orphan in prod_before
    snapshots_before = snapshot_ids(lake_env)

    dry = maintain(config=lake_env.config, clock=later, pins=no_pins, dry_run=True)
    assert dry.expired_snapshots and orphan in dry.orphaned_files
    assert (snapshot_ids(lake_env), prod_files(lake_env)) == (snapshots_before, prod_before), (
        "a dry run changes nothing"
    )

    report = maintain(config=lake_env.config, clock=later, pins=no_pins)

    assert report.expired_snapshots, "old prod snapshots are expired (else this test proves nothing)"
    assert set(snapshot_ids(lake_env)) == set(snapshots_before) - set(report.expired_snapshots)
    assert orphan in report.orphaned_files and orphan not in prod_files(lake_env)
    assert len(prod_files(lake_env)) < len(prod_before) - 1, "old prod files were deleted too"
    assert lake_env.list_files(forks_root(lake_env)) == fork_before, "no fork file was touched"
    assert not any(FORK_DATA_DIR in p for p in report.old_files + report.orphaned_files)
    # the fork still reads its own table and prod's current one through its defer view
    assert run_sql(lake_env, FORK, [], fetch="SELECT count(*) FROM lake_main.main.orders") == [(5,)]
    assert run_sql(lake_env, FORK, [], fetch="SELECT id FROM lake_main.main.fork_only") == [(7,)]


def test_never_expires_a_pinned_snapshot(embedded_lake):
    """An injected pin reader (the real pins: the last test, on both backends)."""
    lake_env = embedded_lake
    materialize(lake_env, "prod", "orders", "SELECT 1 AS id")
    pinned = materialize(lake_env, "prod", "orders", "SELECT 2 AS id")
    materialize(lake_env, "prod", "orders", "SELECT 3 AS id")
    seen = []

    def pin_at(engine, owner, lake):
        seen.append((owner, lake))
        return pinned

    report = maintain(config=lake_env.config, clock=later, pins=pin_at)

    assert seen == [("prod", "main")]
    assert pinned in snapshot_ids(lake_env)
    rows = run_sql(lake_env, "prod", [], fetch=f"SELECT id FROM lake_main.main.orders AT (VERSION => {pinned})")
    assert rows == [(2,)], "the pinned snapshot still reads, its files were not cleaned"
    assert report.expired_snapshots and all(s < pinned for s in report.expired_snapshots)
    assert pinned in report.held_by_pin and report.oldest_pin == pinned
    assert any("oldest pin" in note for note in report.notes)


def _wide_config(env):
    """A second lake whose data path is the storage root that holds `main`'s forks root."""
    root, _ = split_storage_root(absolute_data_path(env.lake.data_path, env.config.project_root))
    wide = env.lake.model_copy(update={"name": "wide", "data_path": root + "/"})
    if env.kind == "embedded":
        wide = wide.model_copy(update={"catalog": str(env.config.state_path / "lakes" / "wide.ducklake")})
    else:
        wide = wide.model_copy(update={"attach_args": {**env.lake.attach_args, "METADATA_SCHEMA": "wide_lake"}})
    return env.config.model_copy(update={"lakes": (*env.config.lakes, wide)})


def test_refuses_a_data_path_that_contains_the_forks_root(lake_env, monkeypatch):
    """Both guards, each alone: with the data-path check disabled, DuckLake's own orphan listing
    names the fork files and `maintain` refuses it before deleting anything; with it in place, the
    data path is refused before anything is attached."""
    prod_with_history_and_a_fork(lake_env)
    fork_before = lake_env.list_files(forks_root(lake_env))
    config = _wide_config(lake_env)

    with monkeypatch.context() as patched:
        patched.setattr(maint, "check_data_path", lambda data_path, roots: None)
        with pytest.raises(maint.ForkFileListedError) as listed:
            maintain("wide", config=config, clock=later, pins=no_pins)
    assert listed.value.code == "lake.maintain_fork_file_listed"
    assert lake_env.list_files(forks_root(lake_env)) == fork_before

    with pytest.raises(maint.ForksUnderDataPathError) as refused:
        maintain("wide", config=config, clock=later, pins=no_pins)
    assert refused.value.code == "lake.maintain_forks_under_data_path"
    assert lake_env.list_files(forks_root(lake_env)) == fork_before


def test_refuses_to_run_outside_the_root_deployment(embedded_lake):
    config = embedded_lake.config.model_copy(update={"workspace": FORK})
    with pytest.raises(maint.NotRootWriterError) as refused:
        maintain(config=config, pins=no_pins)
    assert refused.value.code == "lake.maintain_not_root"


def test_without_readable_pins_nothing_is_expired(embedded_lake, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pins_module(name, *args, **kwargs):
        if name == "dpone_dagster.lake.resolution.pins":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    materialize(embedded_lake, "prod", "orders", "SELECT 1 AS id")
    materialize(embedded_lake, "prod", "orders", "SELECT 2 AS id")
    before = snapshot_ids(embedded_lake)
    monkeypatch.setattr(builtins, "__import__", no_pins_module)
    with pytest.raises(maint.PinsUnavailableError):
        maintain(config=embedded_lake.config, clock=later)
    assert snapshot_ids(embedded_lake) == before


def test_forks_roots_cover_every_ledger_row(lake_env):
    Workspaces(lake_env.config).create_fork(FORK, "prod", owner="alice")
    materialize(lake_env, FORK, "t", "SELECT 1 AS id")
    roots = maint.forks_roots(lake_env.config, open_store(lake_env.config.control_store))
    assert roots == {forks_root(lake_env)}


def test_the_maintenance_job_runs_it_and_reports(embedded_lake):
    from dpone_dagster.integration.lake.maintenance import build_lake_maintenance_job

    materialize(embedded_lake, "prod", "orders", "SELECT 1 AS id")
    result = build_lake_maintenance_job().execute_in_process(
        run_config={"ops": {"maintain_lake_op": {"config": {"lake": "main", "dry_run": True}}}}
    )
    assert result.success
    outputs = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    assert outputs and "expired_snapshots" in outputs[0].event_specific_data.metadata


def test_a_real_pinned_fork_keeps_its_snapshot_through_maintenance(lake_env):
    """Kept last: the pin comes from `dpone fork create --pin` (lake/resolution/pins.py), not an injected reader."""
    materialize(lake_env, "prod", "orders", "SELECT 1 AS id")
    materialize(lake_env, "prod", "orders", "SELECT 2 AS id")
    Workspaces(lake_env.config).create_fork(FORK, "prod", owner="alice", pin=True)
    pinned = snapshot_ids(lake_env)[-1]
    materialize(lake_env, "prod", "orders", "SELECT 3 AS id")
    materialize(lake_env, "prod", "orders", "SELECT 4 AS id")

    report = maintain(config=lake_env.config, clock=later)

    assert pinned in snapshot_ids(lake_env)
    assert run_sql(lake_env, FORK, [], fetch="SELECT id FROM lake_main.main.orders") == [(2,)]
    assert report.oldest_pin == pinned and pinned in report.held_by_pin
    assert report.expired_snapshots and max(report.expired_snapshots) < pinned
    assert run_sql(lake_env, "prod", [], fetch="SELECT id FROM lake_main.main.orders") == [(4,)]


def test_cli_dry_run_json(embedded_lake):
    import json

    from typer.testing import CliRunner

    from dpone_dagster.cli.lake import app

    materialize(embedded_lake, "prod", "orders", "SELECT 1 AS id")
    materialize(embedded_lake, "prod", "orders", "SELECT 2 AS id")
    result = CliRunner().invoke(
        app, ["maintain", "main", "--dry-run", "--json", "--retention", "1s", "--file-grace", "1s"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["dry_run"] is True and report["lake"] == "main" and report["current_snapshot"] >= 2
    bad = CliRunner().invoke(app, ["maintain", "main", "--retention", "forever"])
    assert bad.exit_code == 1 and "config.invalid_duration" in bad.output
