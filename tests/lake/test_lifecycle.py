"""Fork lifecycle across processes: incarnations, the drop fence, and a connection outliving a drop.

"Process A" and "process B" are two registration caches (each process has its own), sharing one
control store and one lake, which is all two processes share.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import duckdb
import pytest
import sqlalchemy as sa

from dpone_dagster.control.lake_tables import fork_ducklake_namespace as ledger
from dpone_dagster.control.store import open_store
from dpone_dagster.errors import DponeError
from dpone_dagster.lake.duck import connect
from dpone_dagster.lake.lifecycle.cleanup import TOMBSTONE_GRACE, registered_prefix
from dpone_dagster.lake.resolution.apply import FENCE_GRACE_S
from dpone_dagster.lake.resolution.fork import LakePorts, resolve_workspace_lake
from dpone_dagster.lake.resolution.plan import parse_targets
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.lake.state.registry import (
    ForkDroppingError,
    NamespaceRecord,
    RegistrationCache,
    records,
    register,
    tombstones,
)
from dpone_dagster.workspaces.service import Workspaces

from .lakes import fingerprint, fork_places, incarnation, materialize, run_sql

FORK = "wm-fork-x"


def write_as(env, ports: LakePorts, table: str, select_sql: str) -> None:
    """One job of a process: resolve with that process's cache, attach, write a table."""
    resolved = resolve_workspace_lake(FORK, "main", env.config, parse_targets([table]), ports)
    conn = resolved.connect()
    try:
        conn.execute(f"CREATE OR REPLACE TABLE lake_main.main.{table} AS {select_sql}")
    finally:
        conn.close()


def fork_tables(env) -> set[str]:
    rows = run_sql(
        env,
        FORK,
        [],
        fetch="SELECT table_name FROM information_schema.tables WHERE table_catalog = 'lake_main'",
    )
    return {r[0] for r in rows}


def test_a_recreated_fork_id_never_reattaches_or_orphans_the_old_incarnation(lake_env):
    materialize(lake_env, "prod", "orders", "SELECT range AS id FROM range(5)")
    process_a = LakePorts(registrations=RegistrationCache())
    process_b = Workspaces(lake_env.config)
    parent = fingerprint(lake_env)

    process_b.create_fork(FORK, "prod", owner="alice")
    first = incarnation(lake_env, FORK)
    write_as(lake_env, process_a, "old_rows", "SELECT 1 AS id")  # registered, cached in A

    assert process_b.drop(FORK, actor="alice").cleanup.complete
    process_b.create_fork(FORK, "prod", owner="alice")
    second = incarnation(lake_env, FORK)
    assert first and second and first != second

    write_as(lake_env, process_a, "late_rows", "SELECT 2 AS id")  # within A's cache TTL
    assert {r.metadata_schema for r in _ledger(lake_env)} == {resolve(FORK, config=lake_env.config).namespace}, (
        "the new incarnation is registered under its own name"
    )

    assert process_b.drop(FORK, actor="alice").cleanup.complete
    assert fork_places(lake_env, FORK) == ([], []), "no namespace or file of any incarnation is left"

    process_b.create_fork(FORK, "prod", owner="alice")
    assert {"old_rows", "late_rows"}.isdisjoint(fork_tables(lake_env))
    assert fingerprint(lake_env) == parent


def test_a_dropped_incarnation_is_refused_resolution_and_registration(embedded_lake):
    env = embedded_lake
    service = Workspaces(env.config)
    service.create_fork(FORK, "prod", owner="alice")
    old = incarnation(env, FORK)
    stale = resolve(FORK, config=env.config)  # resolved by a process before the drop
    record = _ledger(env)[0]

    service.drop(FORK, actor="alice")
    held = replace(stale, planned_at=stale.planned_at - 2 * FENCE_GRACE_S)  # a plan kept, e.g. by dbt
    conn = connect(extensions=stale.extensions)
    try:
        with pytest.raises(ForkDroppingError):  # a plan held across the drop attaches nothing
            held.apply(conn)
    finally:
        conn.close()
    assert fork_places(env, FORK) == ([], [])
    with pytest.raises(DponeError) as refused:
        resolve(FORK, config=env.config)
    assert refused.value.code in ("workspace.dropping", "workspace.unknown")
    with pytest.raises(ForkDroppingError):
        register(open_store(env.config.control_store), record, incarnation=old, cache=RegistrationCache())

    service.create_fork(FORK, "prod", owner="alice")
    with pytest.raises(ForkDroppingError):  # the id is back, but as another incarnation
        register(open_store(env.config.control_store), record, incarnation=old, cache=RegistrationCache())
    assert resolve(FORK, config=env.config).namespace != stale.namespace


def test_a_connection_outliving_the_drop_writes_only_where_the_ledger_still_looks(embedded_lake):
    env = embedded_lake
    materialize(env, "prod", "orders", "SELECT range AS id FROM range(5)")
    service = Workspaces(env.config)
    service.create_fork(FORK, "prod", owner="alice")
    parent = fingerprint(env)
    conn = resolve(FORK, config=env.config, targets=["t1"]).connect()
    try:
        conn.execute("CREATE TABLE lake_main.main.t1 AS SELECT range AS id FROM range(100)")
        first = service.drop(FORK, actor="alice")
        assert first.workspace_deleted and not first.cleanup.complete
        assert {row.code for row in first.cleanup.leftovers} == {"lake.catalog_busy"}
        with pytest.raises(DponeError) as refused:
            resolve(FORK, config=env.config)
        assert refused.value.code == "workspace.dropping"

        conn.execute("CREATE TABLE lake_main.main.t2 AS SELECT range AS id FROM range(100)")
        conn.execute("INSERT INTO lake_main.main.t1 SELECT 7")
        _, files = fork_places(env, FORK)
        prefixes = [registered_prefix(r) for r in records_of(env)]
        assert files and all(any(f.startswith(p) for p in prefixes) for f in files)
    finally:
        conn.close()

    second = service.drop(FORK, actor="alice")
    assert second.cleanup.complete and second.cleanup.objects_deleted > 0
    assert fork_places(env, FORK) == ([], []) and records_of(env) == []
    assert fingerprint(env) == parent


def records_of(env) -> list[NamespaceRecord]:
    with open_store(env.config.control_store).connect() as conn:
        return records(conn, [FORK])


def _ledger(env):
    with open_store(env.config.control_store).connect() as conn:
        return [
            NamespaceRecord.from_row(r) for r in conn.execute(sa.select(ledger).where(ledger.c.workspace_id == FORK))
        ]


def test_a_late_writer_on_postgres_s3_is_fenced_and_what_it_uploads_is_found_by_the_next_cleanup(pg_s3_lake):
    """DuckLake uploads data files before it commits: the drop fences the fork's roles (the late
    commit fails) and keeps the swept prefix as a tombstone, so files uploaded by a statement in
    flight are removed by the next cleanup, and no file is ever outside the ledger's reach."""
    env = pg_s3_lake
    materialize(env, "prod", "orders", "SELECT range AS id FROM range(5)")
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    service = Workspaces(env.config, clock=lambda: now[0])
    service.create_fork(FORK, "prod", owner="alice")
    parent = fingerprint(env)
    conn = resolve(FORK, config=env.config, targets=["t1"]).connect()
    try:
        conn.execute("CREATE TABLE lake_main.main.t1 AS SELECT range AS id FROM range(100)")
        data_path = records_of(env)[0].data_path  # <root>/__wm_forks/<segment>/<lake path>/
        sessions = _fork_role_sessions(env)
        assert sessions(), "the connection holds a catalog session as the fork's role"

        first = service.drop(FORK, actor="alice")
        assert first.workspace_deleted and first.cleanup.complete and first.cleanup.tombstones
        assert sessions() == 0, "the drop ended the fork roles' sessions"
        assert fork_places(env, FORK) == ([], []) and records_of(env) == []
        assert [r.workspace_id for r in tombstones_of(env)] == [FORK]
        assert {w.id: w.tombstones for w in service.list() if w.deleted} == {FORK: 1}

        with pytest.raises(duckdb.Error):  # the late commit fails
            conn.execute("INSERT INTO lake_main.main.t1 SELECT 7")
        # what a statement in flight uploaded before its commit failed
        conn.execute(f"COPY (SELECT 7 AS id) TO '{data_path}main/t1/late-upload.parquet' (FORMAT parquet)")
    finally:
        conn.close()
    _, files = fork_places(env, FORK)
    assert files and all(f.startswith(registered_prefix(t)) for f in files for t in tombstones_of(env))

    now[0] += timedelta(minutes=10)  # the next cleanup: a drop of any workspace
    service.create_fork("wm-fork-other", "prod", owner="bob")
    other = service.drop("wm-fork-other", actor="bob")
    assert other.others_swept.objects_deleted == 1 and fork_places(env, FORK) == ([], [])
    assert len(tombstones_of(env)) == 1, "files were found: the grace period starts again"

    now[0] += TOMBSTONE_GRACE - timedelta(minutes=1)
    assert service.sweep().tombstones and len(tombstones_of(env)) == 1
    now[0] += timedelta(minutes=2)
    swept = service.sweep()
    assert swept.retired == [(FORK, "main", first.cleanup.tombstones[0][2])] and swept.complete
    assert tombstones_of(env) == [] and records_of(env) == []
    assert fork_places(env, FORK) == ([], []) and fingerprint(env) == parent


def tombstones_of(env) -> list[NamespaceRecord]:
    with open_store(env.config.control_store).connect() as conn:
        return tombstones(conn)


def _fork_role_sessions(env):
    """A counter of the PostgreSQL sessions of the fork's (current) writer and reader roles, by oid."""
    import psycopg

    from dpone_dagster.control.role_tables import lake_catalog_role as roles_table

    with open_store(env.config.control_store).connect() as conn:
        names = [
            r[0]
            for r in conn.execute(
                sa.select(roles_table.c.role_name).where(
                    roles_table.c.workspace_id == FORK, roles_table.c.kind.in_(["writer", "reader"])
                )
            )
        ]
    target = resolve("prod", config=env.config).catalog.target
    with psycopg.connect(target) as pg:
        oids = [r[0] for r in pg.execute("SELECT oid FROM pg_roles WHERE rolname = ANY(%s)", (names,))]
    assert len(oids) == 2

    def count() -> int:
        with psycopg.connect(target) as pg:
            return pg.execute("SELECT count(*) FROM pg_stat_activity WHERE usesysid = ANY(%s)", (oids,)).fetchone()[0]

    return count
