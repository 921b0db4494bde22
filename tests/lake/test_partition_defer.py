"""Per-partition defer: a fork that built one of three day-partitions reads the other two from prod.

Partitions are written the way a partitioned managed materialize writes them (plain SQL through the
resolved attach, delete+insert of one day, then tracking with the partition key and column): prod at
the table's own name, a fork at the hidden `<table>__fork`, with the table's own name a union view.
Expected rows are computed by independent queries (prod read as prod, the fork's hidden table read
directly), never through the view under test. Runs on the embedded default and PostgreSQL + S3.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from dpone_dagster.lake.resolution.partitions import fork_table
from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.lake.state.tracking import record_materialization
from dpone_dagster.workspaces.service import Workspaces
from dpone_dagster.workspaces.status import workspace_status

from .lakes import attached, fingerprint, fork_places, run_sql

FORK = "wm-fork-parts"
TABLE = TableName("marts", "daily")
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
COLUMN = "order_date"


def _rows_sql(day: str, base: int) -> str:
    """Three rows for `day`; `base` tells a prod row (0) from a fork row (1000)."""
    return f"SELECT DATE '{day}' AS {COLUMN}, {base} + range AS amount FROM range(3)"


def build_partition(env, workspace: str, day: str, *, base: int, fork: bool, status: str = "materialized") -> None:
    """delete+insert of one day into the physical table, then the partition's tracking row."""
    physical = fork_table(TABLE) if fork else TABLE
    with attached(env, workspace, targets=[str(physical)]) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS lake_main.{TABLE.schema}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS lake_main.{physical.schema}.{physical.table} AS {_rows_sql(day, base)} LIMIT 0"
        )
        conn.execute(f"DELETE FROM lake_main.{physical.schema}.{physical.table} WHERE {COLUMN} = DATE '{day}'")
        conn.execute(f"INSERT INTO lake_main.{physical.schema}.{physical.table} {_rows_sql(day, base)}")
        snapshot = conn.execute("SELECT max(snapshot_id) FROM lake_main.snapshots()").fetchone()[0]
    record_materialization(
        workspace,
        "main",
        TABLE.schema,
        TABLE.table,
        status=status,
        snapshot_id=snapshot,
        columns=[(COLUMN, "DATE"), ("amount", "BIGINT")],
        partition=day,
        partition_by=COLUMN,
        config=env.config,
    )


def _fork_snapshot(env) -> int:
    return run_sql(env, FORK, [], fetch="SELECT max(snapshot_id) FROM lake_main.snapshots()")[0][0]


def test_the_fork_reads_its_partition_and_the_parents_others_exactly(lake_env):
    env = lake_env
    for day in DAYS:
        build_partition(env, "prod", day, base=0, fork=False)
    run_sql(env, "prod", "INSERT INTO lake_main.marts.daily VALUES (NULL, 7)", targets=["marts.daily"])  # no day
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    prod_before = fingerprint(env, "prod")

    build_partition(env, FORK, DAYS[1], base=1000, fork=True)
    order = f"ORDER BY {COLUMN}, amount"
    seen = run_sql(env, FORK, [], fetch=f"SELECT {COLUMN}::VARCHAR, amount FROM lake_main.marts.daily {order}")
    kind = run_sql(
        env,
        FORK,
        [],
        fetch="SELECT table_type FROM information_schema.tables WHERE table_catalog = 'lake_main' "
        "AND table_schema = 'marts' AND table_name = 'daily'",
    )
    parent_rows = run_sql(
        env,
        "prod",
        [],
        fetch=(
            f"SELECT {COLUMN}::VARCHAR, amount FROM lake_main.marts.daily WHERE {COLUMN} IS DISTINCT FROM DATE "
            f"'{DAYS[1]}' {order}"
        ),
    )
    fork_rows = run_sql(
        env, FORK, [], fetch=f"SELECT {COLUMN}::VARCHAR, amount FROM lake_main.marts.daily__fork {order}"
    )

    assert kind == [("VIEW",)]
    assert sorted(seen, key=str) == sorted(parent_rows + fork_rows, key=str)
    assert (
        len(seen) == 10
        and (None, 7) in seen
        and {d for d, _ in fork_rows} == {DAYS[1]}
        and all(a >= 1000 for _, a in fork_rows)
    )
    assert {d for d, _ in parent_rows} == {DAYS[0], DAYS[2], None} and all(a < 1000 for _, a in parent_rows)
    assert fingerprint(env, "prod") == prod_before

    # steady state: resolving again lays no view, so the fork gets no new snapshot
    snapshot = _fork_snapshot(env)
    assert resolve(FORK, "main", config=env.config).views == ()
    assert _fork_snapshot(env) == snapshot

    status = workspace_status(FORK, env.config)
    tables = {t.table: t for t in status.lakes[0].tables}
    assert tables["marts.daily"].partitions == [DAYS[1]]
    assert tables["marts.daily"].fork_state == "fork_materialized"
    assert json.loads(json.dumps(status.as_dict()))["lakes"][0]["tables"][0]["partitions"] == [DAYS[1]]

    result = Workspaces(env.config).drop(FORK, actor="alice")
    assert result.cleanup.complete
    assert fork_places(env, FORK) == ([], [])
    assert fingerprint(env, "prod") == prod_before


def test_a_failed_partition_reads_the_parent_and_an_empty_one_hides_it(embedded_lake):
    """Tracking decides which side a day comes from, not the rows in the hidden table."""
    env = embedded_lake
    for day in DAYS:
        build_partition(env, "prod", day, base=0, fork=False)
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    build_partition(env, FORK, DAYS[0], base=1000, fork=True)
    build_partition(env, FORK, DAYS[2], base=1000, fork=True, status="failed")
    with attached(env, FORK, targets=["marts.daily__fork"]) as conn:  # the fork's day 2 built empty
        conn.execute(f"DELETE FROM lake_main.marts.daily__fork WHERE {COLUMN} = DATE '{DAYS[1]}'")
    record_materialization(
        FORK,
        "main",
        "marts",
        "daily",
        status="materialized",
        snapshot_id=None,
        columns=[],
        partition=DAYS[1],
        partition_by=COLUMN,
        config=env.config,
    )
    seen = run_sql(
        env,
        FORK,
        [],
        fetch=(
            f"SELECT {COLUMN}::VARCHAR, count(*), min(amount), max(amount) FROM lake_main.marts.daily GROUP BY 1 "
            "ORDER BY 1"
        ),
    )
    assert seen == [(DAYS[0], 3, 1000, 1002), (DAYS[2], 3, 0, 2)]  # day 3's failed fork rows stay hidden
    assert workspace_status(FORK, env.config).lakes[0].tables[0].partitions == [DAYS[0], DAYS[1]]


def test_a_table_no_ancestor_owns_reads_the_forks_partitions_only(embedded_lake):
    env = embedded_lake
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    build_partition(env, FORK, DAYS[0], base=1000, fork=True)
    seen = run_sql(env, FORK, [], fetch="SELECT count(*), min(amount) FROM lake_main.marts.daily")
    assert seen == [(3, 1000)]


def test_fork_status_json_lists_the_forks_partitions(embedded_lake, monkeypatch):
    from dpone_dagster.cli import app

    env = embedded_lake
    for day in DAYS:
        build_partition(env, "prod", day, base=0, fork=False)
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    build_partition(env, FORK, DAYS[2], base=1000, fork=True)
    monkeypatch.setattr("dpone_dagster.workspaces.status.load_config", lambda: env.config)
    runner = CliRunner()
    shown = runner.invoke(app, ["fork", "status", FORK, "--json"])
    assert shown.exit_code == 0, shown.output
    tables = json.loads(shown.output)["lakes"][0]["tables"]
    assert [(t["table"], t["partitions"]) for t in tables] == [("marts.daily", [DAYS[2]])]
    text = runner.invoke(app, ["fork", "status", FORK])
    assert f"fork partitions: {DAYS[2]}" in text.output
