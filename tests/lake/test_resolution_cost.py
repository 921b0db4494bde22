"""What a fork resolution costs does not grow with what its parent owns, when the job names a read set.

On both backends: the parent tracks a few tables, a fork job reading 3 of them resolves; then the
parent tracks 200 more and a second fork's same job resolves. The control store must answer both
with the same statements and the same number of rows (the rows are counted by re-running each
captured SELECT with its captured parameters, so a filter applied in Python after reading every
row would still count every row). A steady run (views live) issues a fixed set of DuckDB statements:
two ATTACHes, no transaction, no DDL, and nothing written to the control store.

What a reader could get wrong: the 200 extra tables exist only as tracking rows (the plan reads
the control store, not the parent's catalog), so the property is about the plan's reads; the
DuckLake side of the cost is measured by `python -m bench bench_scale` (BENCH_SCALE_PARTS=forks).
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

from dpone_dagster.control.lake_tables import materialized_asset_schema, materialized_partition
from dpone_dagster.control.store import open_store
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.workspaces.service import Workspaces

from .lakes import _reset, create_prod_tables

READS = ["up.r1", "up.r2", "up.r3"]
TARGET = "mart.m"


def _track(env, names: list[str]) -> None:
    """prod owns `names`: one tracking row and one captured schema each, written in bulk."""
    now = datetime.now(UTC).isoformat()
    rows = [
        dict(workspace_id="prod", lake="main", schema_name=n.split(".")[0], table_name=n.split(".")[1]) for n in names
    ]
    with open_store(env.config.control_store).begin() as conn:
        conn.execute(
            materialized_partition.insert(),
            [dict(r, partition_key="", status="materialized", snapshot_id=1, updated_at=now) for r in rows],
        )
        conn.execute(
            materialized_asset_schema.insert(),
            [dict(r, columns='[["id", "BIGINT"]]', snapshot_id=1, updated_at=now) for r in rows],
        )


def _parent(env) -> None:
    """prod's lake holds the read tables (the only ones any view here reads) plus 5 tracked others."""
    create_prod_tables(env.config, READS)
    _track(env, [*READS, *(f"main.small{i}" for i in range(5))])


def _control_store_cost(env, workspace: str, reads) -> tuple[list[str], int]:
    """(statements one resolution sent to the control store, rows its SELECTs returned)."""
    engine = open_store(env.config.control_store)
    seen: list[tuple[str, object]] = []

    def capture(conn, cursor, statement, parameters, context, executemany) -> None:
        seen.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", capture)
    try:
        resolve(workspace, "main", config=env.config, targets=[TARGET], reads=reads)
    finally:
        sa.event.remove(engine, "before_cursor_execute", capture)
    rows = 0
    with engine.connect() as conn:
        for statement, parameters in seen:
            if statement.lstrip().upper().startswith(("SELECT", "WITH")):
                rows += len(conn.exec_driver_sql(statement, parameters).fetchall())
    return [s for s, _ in seen], rows


class _Recording:
    """A DuckDB connection that remembers every SQL text it is asked to run."""

    def __init__(self, conn) -> None:
        self.conn, self.sql = conn, []

    def execute(self, sql, *args):
        self.sql.append(sql)
        return self.conn.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self.conn, name)


def _steady_statements(env, workspace: str) -> tuple[list[str], list[str]]:
    """(DuckDB statements, control-store statements) of a steady run of the job (run it twice)."""
    from dpone_dagster.lake.duck import connect

    first = resolve(workspace, "main", config=env.config, targets=[TARGET], reads=READS)
    conn = connect(extensions=first.extensions)
    try:
        first.apply(conn)
        _reset(conn)
        statements, _ = _control_store_cost(env, workspace, READS)
        recording = _Recording(conn)
        resolve(workspace, "main", config=env.config, targets=[TARGET], reads=READS).apply(recording)
        return recording.sql, statements
    finally:
        conn.close()


def test_the_plan_reads_rows_in_proportion_to_the_read_set_not_to_the_parent(lake_env):
    _parent(lake_env)
    service = Workspaces(lake_env.config)
    service.create_fork("wm-fork-cost-small", "prod", owner="alice")
    small = _control_store_cost(lake_env, "wm-fork-cost-small", READS)
    small_all = _control_store_cost(lake_env, "wm-fork-cost-small", None)

    _track(lake_env, [f"main.big{i:03d}" for i in range(200)])
    service.create_fork("wm-fork-cost-big", "prod", owner="alice")
    big = _control_store_cost(lake_env, "wm-fork-cost-big", READS)
    big_all = _control_store_cost(lake_env, "wm-fork-cost-big", None)

    assert len(small[0]) == len(big[0])  # one query per kind, none per table
    assert small[1] == big[1], (small[1], big[1])  # the 200 new parent tables cost no row
    assert big_all[1] >= small_all[1] + 200  # without a read set every owned table is read (the
    # counter sees tracking rows, so the equality above is not vacuous)


def test_a_steady_run_issues_the_same_few_statements_whatever_the_parent_owns(lake_env):
    _parent(lake_env)
    service = Workspaces(lake_env.config)
    service.create_fork("wm-fork-cost-small", "prod", owner="alice")
    small, small_store = _steady_statements(lake_env, "wm-fork-cost-small")
    _track(lake_env, [f"main.big{i:03d}" for i in range(200)])
    service.create_fork("wm-fork-cost-big", "prod", owner="alice")
    big, big_store = _steady_statements(lake_env, "wm-fork-cost-big")

    assert len(small) == len(big) and len(small_store) == len(big_store)
    # a PostgreSQL catalog's ATTACH travels after the temporary secret holding its password (lake/resolution/attach.py)
    parts = [part for s in big for part in s.split("); ATTACH ", 1)]
    parts = [p if p.startswith(("CREATE", "SELECT", "SET", "ATTACH", "WITH")) else "ATTACH " + p for p in parts]
    secrets = [s for s in parts if s.startswith("CREATE OR REPLACE TEMPORARY SECRET")]
    heads = [s.lstrip().split()[0].upper() for s in parts if s not in secrets]
    assert heads.count("ATTACH") == 2, big  # the fork and its READ_ONLY parent; nothing re-attached
    assert not {"BEGIN", "COMMIT", "CREATE", "DROP"} & set(heads), big  # no catalog write at all
    assert len(heads) <= 10, big
    # the control store is only read (registration and the idle clock are remembered in-process)
    assert all(s.lstrip().upper().startswith(("SELECT", "WITH")) for s in big_store), big_store
    # chain, settings, own partitions, tracking, pins (+ the fork's catalog roles and the reader's
    # stored credential on a PostgreSQL catalog, lake/lifecycle/roles.py)
    assert len(big_store) <= (5 if lake_env.kind == "embedded" else 7), big_store
