"""dbt_project_synthetic materialized through Dagster into the embedded DuckLake, read back.

One materialization for the session (`built_prod_lake` in conftest.py); every test reads that
lake, and the last one runs `dpone demo` on it twice more (its fork part: `wm-fork-demo`, dropped
at the end so the other tests sharing this lake see no fork of it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from dbt_lakes import MODEL_TABLES


@pytest.fixture
def built(built_prod_lake):
    return built_prod_lake


def test_every_dbt_asset_materializes_and_every_dbt_test_passes(built):
    _, result = built
    assert result.success
    keys = {
        e.asset_key.path[0] + "/" + ".".join(e.asset_key.path[1:]) for e in result.get_asset_materialization_events()
    }
    assert keys == {f"main/{schema}.{table}" for schema, table in MODEL_TABLES}
    checks = result.get_asset_check_evaluations()
    assert len(checks) >= 30
    assert [c.check_name for c in checks if not c.passed] == []


def test_tables_land_in_the_main_lake_with_real_rows(built):
    setup, _ = built
    listed = setup.rows(
        "SELECT table_schema, table_name FROM information_schema.tables "
        "WHERE table_catalog = 'lake_main' AND table_type = 'BASE TABLE' ORDER BY 1, 2"
    )
    assert tuple(listed) == MODEL_TABLES
    (customers, orders, payments) = setup.rows(
        "SELECT (SELECT count(*) FROM lake_main.raw.raw_customers), "
        "(SELECT count(*) FROM lake_main.raw.raw_orders), (SELECT count(*) FROM lake_main.raw.raw_payments)"
    )[0]
    assert customers == 2000
    assert orders == 61 * 150
    assert orders < payments < 2 * orders
    (net, checked) = setup.rows(
        "SELECT sum(net_amount), sum(amount_paid - amount_refunded) FROM lake_main.marts.fct_orders"
    )[0]
    assert net == checked and net > 0


def test_every_table_is_stored_in_parquet_files_not_inlined(built):
    setup, _ = built
    data_root = Path(setup.config().embedded_main_lake().data_path)
    conn = setup.connect()
    try:
        for schema, table in MODEL_TABLES:
            files = [
                row[0]
                for row in conn.execute(
                    "SELECT data_file FROM ducklake_list_files('lake_main', ?, schema => ?) WHERE delete_file IS NULL",
                    [table, schema],
                ).fetchall()
            ]
            assert files, f"{schema}.{table} has no data file"
            assert all(Path(f).is_file() and Path(f).is_relative_to(data_root) for f in files)
            (in_files,) = conn.execute("SELECT count(*) FROM read_parquet(?)", [files]).fetchone()
            (in_table,) = conn.execute(f"SELECT count(*) FROM lake_main.{schema}.{table}").fetchone()
            assert in_files == in_table > 10, f"{schema}.{table}: rows outside its parquet files"
    finally:
        conn.close()


def test_scd2_dimension_starts_with_one_current_version_per_customer(built):
    setup, _ = built
    (versions, current, customers, open_rows) = setup.rows(
        "SELECT count(*), count(*) FILTER (WHERE is_current), count(DISTINCT customer_id), "
        "count(*) FILTER (WHERE valid_to IS NULL) FROM lake_main.marts.dim_customers_scd2"
    )[0]
    assert versions == current == customers == open_rows == 2000


def test_materializations_are_recorded_and_carry_lake_metadata(built):
    from dpone_dagster.control.store import open_store
    from dpone_dagster.lake.resolution.plan import TableName
    from dpone_dagster.lake.state.tracking import read_chain_tracking

    setup, result = built
    with open_store(setup.config().control_store).connect() as conn:
        tracked = read_chain_tracking(conn, ["prod"], "main").of("prod")
    snapshots = set()
    conn = setup.connect()
    try:
        for event in result.get_asset_materialization_events():
            metadata = {k: v.value for k, v in event.materialization.metadata.items()}
            _, schema, table = event.asset_key.path
            assert metadata["unique_id"].startswith("model.dbt_project_synthetic.")
            assert metadata["workspace"] == "prod" and metadata["fork_state"] == "own"
            assert metadata["table"] == f"{schema}.{table}"
            (rows,) = conn.execute(f"SELECT count(*) FROM lake_main.{schema}.{table}").fetchone()
            assert metadata["dagster/row_count"] == rows
            snapshots.add(metadata["snapshot_id"])
            assert tracked[TableName(schema, table)].materialized
        (latest,) = conn.execute("SELECT max(snapshot_id) FROM lake_main.snapshots()").fetchone()
    finally:
        conn.close()
    assert tracked[TableName("marts", "dim_customers_scd2")].is_scd2
    assert snapshots == {latest}


def _prod_fingerprint(setup) -> dict[str, str]:
    """sha256 of prod's catalog file(s) and of every file under prod's data path (names included)."""
    lake = setup.config().embedded_main_lake()
    catalog = Path(lake.catalog)
    files = [p for p in catalog.parent.glob(catalog.name + "*") if p.is_file()]
    files += sorted(p for p in Path(lake.data_path).rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _fork_part(lines: list[str]) -> list[str]:
    starts = [i for i, line in enumerate(lines) if line.startswith("fork: wm-fork-demo")]
    assert len(starts) == 1, "the demo printed no fork part"
    return lines[starts[0] :]


@pytest.mark.slow  # the whole demo twice, each with its fork part (~2-4 min)
def test_dpone_demo_runs_again_on_the_built_lake_prints_every_table_and_shows_a_fork(built, monkeypatch):
    """The full demo twice on the built lake: every table printed, then the fork part (recreated the
    second time) leaves prod's catalog and data files byte-identical."""
    from typer.testing import CliRunner

    from dpone_dagster import api
    from dpone_dagster.cli import app
    from dpone_dagster.cli import demo as demo_module

    setup, _ = built
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    for key, value in setup.env.items():
        monkeypatch.setenv(key, value)
    real_show_fork = demo_module.show_fork
    prod_across_fork_part: list[tuple[dict, dict]] = []

    def show_fork_watching_prod(config):
        before = _prod_fingerprint(setup)
        try:
            real_show_fork(config)
        finally:
            prod_across_fork_part.append((before, _prod_fingerprint(setup)))

    monkeypatch.setattr(demo_module, "show_fork", show_fork_watching_prod)
    try:
        first = CliRunner().invoke(app, ["demo"])
        assert first.exit_code == 0, first.output[-3000:]
        again = CliRunner().invoke(app, ["demo"])
        assert again.exit_code == 0, again.output[-3000:]
        status = api.fork_status("wm-fork-demo", config=setup.config())
    finally:
        if any(w.id == "wm-fork-demo" and not w.deleted for w in api.list_workspaces(setup.config())):
            api.drop_fork("wm-fork-demo", actor=_fork_owner(setup), config=setup.config())

    lines = first.output.splitlines()
    assert "materialized 10 dbt assets" in lines
    assert "lake 'main' for workspace 'prod' (attached as lake_main)" in lines
    assert any(line.strip().startswith("catalog: duckdb") for line in lines)
    printed = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[2] == "rows":
            printed[parts[0]] = int(parts[1])
    assert set(printed) == {f"{schema}.{table}" for schema, table in MODEL_TABLES}
    for name, rows in printed.items():
        assert setup.rows(f"SELECT count(*) FROM lake_main.{name}") == [(rows,)]

    assert len(prod_across_fork_part) == 2
    for before, after in prod_across_fork_part:
        assert before and after == before, "the fork part changed prod's catalog or data files"
    tables = {schema + "." + table for schema, table in MODEL_TABLES}
    for run, recreated in ((first, False), (again, True)):
        part = _fork_part(run.output.splitlines())
        created = [line for line in part if line.strip().startswith("created wm-fork-demo (parent prod")]
        assert len(created) == 1 and created[0].endswith("dropped first)") == recreated
        assert "  materialized 1 dbt asset(s) in wm-fork-demo" in part
        states = {}
        for line in part:
            name, _, state = line.strip().partition(": ")
            if name in tables:
                states[name] = state
        assert states.pop("marts.fct_orders") == "fork_materialized"
        assert set(states) == tables - {"marts.fct_orders"}
        assert set(states.values()) == {"deferred (owner prod)"}
        assert "open its UI:  dpone dev --workspace wm-fork-demo" in " ".join(part)
        assert "drop it:      dpone fork drop wm-fork-demo" in " ".join(part)
    (main,) = [lake for lake in status.lakes if lake.lake == "main"]
    assert main.mode == "isolated"
    assert {t.table: t.fork_state for t in main.tables}["marts.fct_orders"] == "fork_materialized"


def _fork_owner(setup) -> str:
    from dpone_dagster import api

    return next(w.owner for w in api.list_workspaces(setup.config()) if w.id == "wm-fork-demo" and not w.deleted)
