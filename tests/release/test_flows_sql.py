"""The synthetic flows really run, the write scan finds what SQL writes, and quantities parse exactly."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpone_dagster.contracts.flows import FlowError, ResourceCeiling
from dpone_dagster.lake.duck import connect
from dpone_dagster.release.build.flow_sql import flow_sql_writes
from dpone_dagster.release.build.flows import capture_ordinary
from dpone_dagster.release.build.packs import cpu_millicores, memory_bytes
from dpone_dagster.release.source.snapshot import open_source

SYNTHETIC = Path(__file__).resolve().parents[2] / "dbt_project_synthetic"


def test_synthetic_flows_run_in_hook_then_runtime_order(tmp_path: Path) -> None:
    with open_source(SYNTHETIC, work_dir=tmp_path) as tree:
        capture = capture_ordinary(
            tree, resource_ceiling=ResourceCeiling(max_cpu_millicores=4000, max_memory_bytes=8 * 1024**3)
        )
        scripts = {
            w.pack_id: [tree.read_bytes(ref.path).decode() for ref in (*(h.sql for h in w.hooks), *w.sql)]
            for w in capture.workloads
        }
    connection = connect(extensions=())
    try:
        connection.execute("attach ':memory:' as orders_source")
        connection.execute(
            """
            create table orders_source.orders as
            select range as order_id, 1 + range % 37 as customer_id,
                   timestamp '2024-01-01' + to_hours(range * 7) as ordered_at,
                   ['placed', 'shipped', 'completed', 'returned'][1 + range % 4] as status,
                   500 + (range * 7919) % 20000 as amount_cents
            from range(400)
            """
        )
        for _ in range(2):
            for pack_id in ("orders_snapshot", "weekly_revenue", "customer_order_counts"):
                for script in scripts[pack_id]:
                    connection.execute(script)
        assert connection.execute("select count(*) from flow_staging.orders_snapshot").fetchone() == (400,)
        assert connection.execute("select sum(orders) from flow_marts.order_status_counts").fetchone() == (400,)
        assert connection.execute("select sum(orders) from flow_marts.weekly_revenue").fetchone() == (200,)
        assert connection.execute("select count(*), sum(orders) from flow_marts.customer_order_counts").fetchone() == (
            37,
            400,
        )
        written = {
            f"{schema}.{table}"
            for schema, table in connection.execute(
                "select schema_name, table_name from duckdb_tables() where database_name = current_database()"
            ).fetchall()
        }
        assert written == set(capture.logical_writes)
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("sql", "writes"),
    [
        ("create table if not exists s.t (a int);", {"s.t"}),
        ("CREATE OR REPLACE TABLE S.T AS SELECT 1;", {"s.t"}),
        ("create or replace view s.v as select 1;", {"s.v"}),
        ("create temp table scratch as select 1;", set()),
        ("insert or replace into s.t select 1;", {"s.t"}),
        ("with x as (select 1) insert into s.t select * from x;", {"s.t"}),
        ("merge into s.t using s.u on true when matched then delete;", {"s.t"}),
        ("update s.t set a = 1 where a = 2;", {"s.t"}),
        ("delete from s.t where a = 1;", {"s.t"}),
        ("truncate s.t;", {"s.t"}),
        ("drop table if exists s.t;", {"s.t"}),
        ("alter table s.t add column b int;", {"s.t"}),
        ('insert into "S"."T" select 1;', {"s.t"}),
        ("insert into lake.s.t select 1;", {"lake.s.t"}),
        ("select * from s.t; -- insert into s.u\n/* delete from s.v */ select 'update s.w set x = 1';", set()),
        ("create schema if not exists s;", set()),
    ],
)
def test_sql_write_scan(sql: str, writes: set[str]) -> None:
    assert flow_sql_writes(sql, "test.sql") == writes


RESERVED = frozenset(
    row[0]
    for row in duckdb.connect()
    .execute("select keyword_name from duckdb_keywords() where keyword_category = 'reserved'")
    .fetchall()
)
identifier = st.from_regex(r"[a-z_][a-z0-9_]{0,20}", fullmatch=True).filter(lambda name: name not in RESERVED)


@settings(max_examples=200, deadline=None)
@given(
    schema=identifier,
    table=identifier,
    verb=st.sampled_from(["create or replace table {} as select 1", "insert into {} select 1", "delete from {}"]),
)
def test_sql_write_scan_finds_any_qualified_target(schema: str, table: str, verb: str) -> None:
    relation = f"{schema}.{table}"
    assert flow_sql_writes(verb.format(relation) + ";", "p.sql") == {relation}
    assert flow_sql_writes("-- " + verb.format(relation) + "\nselect 1;", "p.sql") == frozenset()


@pytest.mark.parametrize(
    ("quantity", "value"), [("250m", 250), ("1", 1000), ("0.5", 500), ("1.25", 1250), ("4000m", 4000)]
)
def test_cpu_quantities(quantity: str, value: int) -> None:
    assert cpu_millicores(quantity) == value


@pytest.mark.parametrize(("quantity", "value"), [("256Mi", 256 * 2**20), ("1Gi", 2**30), ("512", 512), ("64Ki", 65536)])
def test_memory_quantities(quantity: str, value: int) -> None:
    assert memory_bytes(quantity) == value


@pytest.mark.parametrize("quantity", ["1.2345", "-1", "1e3", "0x10", "250M"])
def test_malformed_quantities_are_refused(quantity: str) -> None:
    with pytest.raises(FlowError):
        cpu_millicores(quantity) if "M" not in quantity else memory_bytes(quantity)
