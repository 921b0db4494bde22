"""Defer only what a job reads, on both backends: a fork job given a read set creates (or keeps)
exactly the defer views it reads; a later job reading another table gets that view then; a stale
view outside the read set is neither dropped nor re-pointed; without a read set (`dpone lake sql`)
every table the ancestors own is deferred, as before.

Jobs here are `resolve(fork, targets=..., reads=...)` applied to a connection, which is what the
`DuckLakeResource` and the dbt plugin do with the read set they are given (dbt: `test_dbt_reads`).
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.lake.state.tracking import record_materialization
from dpone_dagster.workspaces.service import Workspaces

from .lakes import _POOL, _reset, create_prod_tables, fingerprint, materialize

FORK = "wm-fork-reads"
CHILD = "wm-fork-reads-child"
PARENT_TABLES = [f"main.t{i:02d}" for i in range(20)] + ["up.u1", "up.u2", "up.u3"]
UPSTREAM = ["up.u1", "up.u2", "up.u3"]


def _parent_owning_many(env) -> None:
    """prod owns every table of PARENT_TABLES (one session, one tracking row each)."""
    snapshot = create_prod_tables(env.config, PARENT_TABLES)
    for name in PARENT_TABLES:
        schema, table = name.split(".")
        record_materialization(
            "prod",
            "main",
            schema,
            table,
            status="materialized",
            snapshot_id=snapshot,
            columns=[("id", "BIGINT")],
            config=env.config,
        )


def _view_statements(resolved) -> list[str]:
    return [s for s in resolved.statements() if " VIEW " in s and not s.startswith("DROP")]


def _job(env, workspace, *, targets=(), reads=None, sql=()):
    """Apply one job's resolution, run `sql`, and return the fork's live defer views afterwards."""
    from dpone_dagster.lake.duck import connect

    resolved = resolve(workspace, "main", config=env.config, targets=targets, reads=reads)
    conn = _POOL.get(resolved.extensions)
    if conn is None:
        conn = _POOL[resolved.extensions] = connect(extensions=resolved.extensions)
    try:
        resolved.apply(conn)
        for statement in sql:
            conn.execute(statement)
        views = conn.execute(
            "SELECT schema_name || '.' || view_name FROM duckdb_views() WHERE database_name = 'lake_main'"
        ).fetchall()
        return resolved, sorted(v for (v,) in views)
    finally:
        _reset(conn)


def test_a_fork_job_defers_exactly_what_it_reads_then_more_on_need(lake_env):
    _parent_owning_many(lake_env)
    Workspaces(lake_env.config).create_fork(FORK, "prod", owner="alice")
    parent_before = fingerprint(lake_env)

    # a job writing one model over its 3 upstream tables, on a parent owning 23
    build = [
        "CREATE SCHEMA IF NOT EXISTS lake_main.mart",
        "CREATE OR REPLACE TABLE lake_main.mart.m AS SELECT * FROM lake_main.up.u1 "
        "UNION ALL SELECT * FROM lake_main.up.u2 UNION ALL SELECT * FROM lake_main.up.u3",
    ]
    first = resolve(FORK, "main", config=lake_env.config, targets=["mart.m"], reads=UPSTREAM)
    assert len(_view_statements(first)) == len(UPSTREAM)
    _, live = _job(lake_env, FORK, targets=["mart.m"], reads=UPSTREAM, sql=build)
    assert live == UPSTREAM

    # steady state: the same job again runs no view statement at all
    again = resolve(FORK, "main", config=lake_env.config, targets=["mart.m"], reads=UPSTREAM)
    assert _view_statements(again) == [] and again.views == ()

    # a later job reading another table gets its view, and keeps the others
    _, live = _job(lake_env, FORK, reads=["main.t05"], sql=["SELECT count(*) FROM lake_main.t05"])
    assert live == sorted([*UPSTREAM, "main.t05"])

    # a job reading nothing upstream creates nothing
    _, live = _job(lake_env, FORK, reads=())
    assert live == sorted([*UPSTREAM, "main.t05"])

    # no read set (what `dpone lake sql` resolves): every table the parent owns is there
    _, live = _job(lake_env, FORK)
    assert live == sorted(PARENT_TABLES)
    assert fingerprint(lake_env) == parent_before


def test_a_stale_view_outside_the_read_set_is_kept_until_a_job_reads_it(lake_env):
    _parent_owning_many(lake_env)
    service = Workspaces(lake_env.config)
    service.create_fork(FORK, "prod", owner="alice")
    service.create_fork(CHILD, FORK, owner="alice")
    _job(lake_env, CHILD)  # every view, all over prod
    materialize(lake_env, FORK, "main.t01", "SELECT 99 AS id")  # the nearest owner of t01 is now FORK

    unrelated = resolve(CHILD, "main", config=lake_env.config, reads=["main.t02"])
    assert unrelated.views == ()  # t01 is stale, but not read: neither dropped nor re-pointed
    _, live = _job(lake_env, CHILD, reads=["main.t02"])
    assert "main.t01" in live

    reader = resolve(CHILD, "main", config=lake_env.config, reads=["main.t01"])
    assert [(str(v.name), v.replace) for v in reader.views] == [("main.t01", True)]
    _job(lake_env, CHILD, reads=["main.t01"])
    from .lakes import run_sql

    assert run_sql(lake_env, CHILD, [], fetch="SELECT id FROM lake_main.t01") == [(99,)]


def test_dpone_lake_sql_in_a_fork_sees_every_parent_table(embedded_lake, monkeypatch):
    _parent_owning_many(embedded_lake)
    Workspaces(embedded_lake.config).create_fork(FORK, "prod", owner="alice")
    _job(embedded_lake, FORK, targets=["mart.m"], reads=UPSTREAM)  # an earlier job made 3 views
    config = embedded_lake.config.model_copy(update={"workspace": FORK})
    monkeypatch.setattr("dpone_dagster.lake.resolution.seam.load_config", lambda *a, **k: config)
    monkeypatch.setattr("dpone_dagster.integration.binding.load_config", lambda *a, **k: config)
    from dpone_dagster.cli import app

    sql = "SELECT count(*) FROM duckdb_views() WHERE database_name = 'lake_main'"
    result = CliRunner().invoke(app, ["lake", "sql", FORK, "main", "-e", sql])
    assert result.exit_code == 0, result.output
    assert str(len(PARENT_TABLES)) in result.output


@pytest.mark.parametrize("reads", [["nope"], ["a.b.c"]])
def test_a_read_set_names_tables(embedded_lake, reads):
    from dpone_dagster.lake.resolution.plan import InvalidTargetError

    if reads == ["nope"]:  # a bare table name means main.<table>, like targets
        assert resolve("prod", "main", config=embedded_lake.config, reads=reads).fork_mode is False
        return
    with pytest.raises(InvalidTargetError):
        resolve("prod", "main", config=embedded_lake.config, reads=reads)


def test_a_job_reading_only_the_scd2_companion_gets_it(embedded_lake):
    """The companion `<table>_current` reads `<table>`: a read set naming only the companion must
    still bring `<table>`'s tracking (whose captured schema marks it SCD2) into the plan."""
    from .lakes import materialize, rows

    materialize(embedded_lake, "prod", "hist", "SELECT range AS id, range % 2 = 0 AS is_current FROM range(6)")
    Workspaces(embedded_lake.config).create_fork(FORK, "prod", owner="alice")
    planned = resolve(FORK, "main", config=embedded_lake.config, reads=["main.hist_current"])
    assert [str(v.name) for v in planned.views] == ["main.hist_current"]
    _, live = _job(embedded_lake, FORK, reads=["main.hist_current"])
    assert live == ["main.hist_current"]
    assert rows(embedded_lake, FORK, "SELECT count(*) FROM lake_main.hist_current") == [(3,)]
