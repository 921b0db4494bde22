"""Chain tracking read in one query: ownership across partitions, SCD2 marker, chain scoping."""

from __future__ import annotations

from dpone_dagster.control.store import open_store
from dpone_dagster.lake.resolution.owners import TrackedTable
from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.lake.state.tracking import read_chain_tracking, record_materialization


def _track(env, workspace, table, status, *, partition=None, columns=(("id", "BIGINT"),)):
    record_materialization(
        workspace,
        "main",
        "main",
        table,
        status=status,
        snapshot_id=1,
        columns=list(columns),
        partition=partition,
        config=env.config,
    )


def _read(env, ids):
    with open_store(env.config.control_store).connect() as conn:
        return read_chain_tracking(conn, ids, "main")


def test_a_table_is_owned_when_any_partition_last_materialized(embedded_lake):
    _track(embedded_lake, "prod", "mixed", "failed", partition="2026-01")
    _track(embedded_lake, "prod", "mixed", "materialized", partition="2026-02")
    _track(embedded_lake, "prod", "broken", "failed", partition="2026-01")
    _track(embedded_lake, "prod", "broken", "failed", partition="2026-02")
    _track(embedded_lake, "wm-fork-other", "elsewhere", "materialized")

    tables = _read(embedded_lake, ["prod"]).of("prod")
    assert {str(name): entry.materialized for name, entry in tables.items()} == {
        "main.mixed": True,
        "main.broken": False,
    }
    assert _read(embedded_lake, ["prod"]).of("wm-fork-other") == {}


def test_scd2_is_the_exact_is_current_column_in_any_case(embedded_lake):
    _track(embedded_lake, "prod", "history", "materialized", columns=[("id", "BIGINT"), ("IS_CURRENT", "BOOLEAN")])
    _track(embedded_lake, "prod", "lookalike", "materialized", columns=[("is_current_flag", "BOOLEAN")])
    _track(embedded_lake, "prod", "plain", "materialized")

    tables = _read(embedded_lake, ["prod"]).of("prod")
    assert {name.table: entry.is_scd2 for name, entry in tables.items()} == {
        "history": True,
        "lookalike": False,
        "plain": False,
    }
    assert tables[TableName("main", "history")].columns == (("id", "BIGINT"), ("IS_CURRENT", "BOOLEAN"))


def test_a_type_named_is_current_does_not_mark_scd2():
    entry = TrackedTable(True, '[["flag", "IS_CURRENT"]]')
    assert not entry.is_scd2 and TrackedTable(True, None).columns == ()
