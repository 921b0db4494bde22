"""Issue 9 #2 and #3 on a real embedded fork: without the guard the parent's files change, with it
nothing does; and every path the project hands SQL to user code is guarded.

Each attack test first runs the SQL through the `GuardedConnection` (refused with its code, parent
data files — names and bytes — and every catalog row unchanged), then runs the very same SQL on
the raw connection and sees the parent change: proof that the attack is real on DuckLake 1.5.5 and
that the guard, not luck, is what kept the parent intact.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from dpone_dagster.lake.guard.checker import SqlGuard, SqlGuardError
from dpone_dagster.lake.guard.connection import GuardedConnection, GuardedMethodError, GuardedRelation
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.workspaces.service import Workspaces

from .lakes import attached, materialize, run_sql

FORK = "wm-fork-guard"


def _parent_state(env) -> tuple:
    """The parent's data files (names and bytes) and every row of every table of its catalog
    file, read with a plain read-only DuckDB (nothing in this process holds it between attaches)."""
    parent = resolve("prod", "main", config=env.config)
    files = tuple(
        (path, hashlib.sha256(Path(path).read_bytes()).hexdigest()) for path in env.list_files(parent.data_path)
    )
    conn = duckdb.connect(parent.catalog.target, read_only=True)
    try:
        tables = [row[0] for row in conn.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        rows = tuple((t, tuple(conn.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall())) for t in tables)
    finally:
        conn.close()
    assert files and len(tables) > 10 and any(r for _, r in rows)
    return files, rows


@pytest.fixture
def forked(embedded_lake):
    """prod with a table of many small files and files scheduled for deletion; a fork of it."""
    materialize(embedded_lake, "prod", "events", "SELECT range AS id FROM range(5)")
    run_sql(
        embedded_lake,
        "prod",
        [f"INSERT INTO lake_main.main.events SELECT range FROM range({i}, {i + 5})" for i in range(5, 30, 5)]
        + ["DELETE FROM lake_main.main.events WHERE id = 7"],
    )
    materialize(embedded_lake, "prod", "orders", "SELECT 1 AS id")
    materialize(embedded_lake, "prod", "orders", "SELECT 2 AS id")  # the first file is now garbage
    run_sql(embedded_lake, "prod", "CALL ducklake_expire_snapshots('lake_main', older_than => now())")
    Workspaces(embedded_lake.config).create_fork(FORK, "prod", owner="alice")
    resolved = resolve(FORK, "main", config=embedded_lake.config)
    return embedded_lake, resolved, resolved.ancestors[0].alias


ATTACKS = [
    "CALL ducklake_merge_adjacent_files('{anc}')",
    "CALL {anc}.merge_adjacent_files()",
    "SELECT * FROM ducklake_merge_adjacent_files('{anc}')",
    "CHECKPOINT {anc}",
    "CALL ducklake_cleanup_old_files('{anc}', cleanup_all => true)",  # last: it deletes files
]


def test_ancestor_maintenance_changes_the_parent_unless_guarded(forked):
    env, resolved, ancestor = forked
    before = _parent_state(env)
    with attached(env, FORK) as raw:
        guarded = GuardedConnection.for_lake(raw, resolved)
        for sql in [t.format(anc=ancestor) for t in ATTACKS] + [f"USE {ancestor}", "CALL merge_adjacent_files()"]:
            with pytest.raises(SqlGuardError) as caught:
                guarded.execute(sql)
            assert caught.value.code in ("lake.ancestor_maintenance", "lake.unmanaged_use"), sql
    assert _parent_state(env) == before

    # No guard rule for the first two: DuckDB itself refuses writes through a READ_ONLY ancestor
    # attach (if a DuckDB upgrade changes that, this turns red). Writes into a metadata catalog are
    # refused by the guard as well (`lake.metadata_write`: the fork's own one is writable) and,
    # for an ancestor's, by DuckDB beneath it.
    metadata = f"__ducklake_metadata_{ancestor}"
    with attached(env, FORK) as raw:
        guard = GuardedConnection.for_lake(raw, resolved).guard
        for sql in (
            f"INSERT INTO {ancestor}.main.events VALUES (99)",
            f"DELETE FROM {metadata}.ducklake_data_file",
            f"INSERT INTO {metadata}.ducklake_snapshot SELECT * FROM {metadata}.ducklake_snapshot",
            f"COPY FROM DATABASE lake_main TO {ancestor}",  # last: its failure aborts the transaction
        ):
            if metadata in sql:
                with pytest.raises(SqlGuardError) as caught:
                    guard.check(sql)
                assert caught.value.code == "lake.metadata_write"
            else:
                guard.check(sql)  # the guard lets them pass
            with pytest.raises(duckdb.Error, match="read-only"):
                raw.execute(sql)
    assert _parent_state(env) == before

    for template in ATTACKS:
        sql = template.format(anc=ancestor)
        files_before = _parent_state(env)[0]
        with attached(env, FORK) as raw:
            try:
                raw.execute(sql)
            except duckdb.Error:
                pass  # DuckLake fails at commit, after the file I/O
        files_after = _parent_state(env)[0]
        assert files_after != files_before, f"unguarded, {sql!r} no longer changes the parent's files"
        if "cleanup" in sql:
            assert set(files_after) < set(files_before)  # parent files deleted
        else:
            assert set(files_after) > set(files_before)  # a parquet file written into the parent


def test_raw_attach_of_the_parent_writes_it_unless_guarded(forked):
    env, resolved, ancestor = forked
    parent = resolve("prod", "main", config=env.config)
    attaches = [
        f"ATTACH {open_}ducklake:{parent.catalog.target}{close} AS p (DATA_PATH '{parent.data_path}')"
        for open_, close in (("$$", "$$"), ("$x$", "$x$"), ("E'", "'"), ("'", "'"))
    ]
    attack = [f"DETACH {ancestor}", attaches[0], "CREATE TABLE p.main.planted AS SELECT range AS n FROM range(1000)"]
    before = _parent_state(env)
    with attached(env, FORK) as raw:
        guarded = GuardedConnection.for_lake(raw, resolved)
        for statement in [*attaches, "; ".join(attack), f"SELECT 1;\n/* x */ {attaches[1]}"]:
            with pytest.raises(SqlGuardError) as caught:
                guarded.execute(statement)
            assert caught.value.code == "lake.unmanaged_attach"
    assert _parent_state(env) == before

    with attached(env, FORK) as raw:
        for statement in attack:
            raw.execute(statement)
        raw.execute("DETACH p")
    after = _parent_state(env)
    assert after[0] != before[0] and after[1] != before[1], "the unguarded raw ATTACH no longer writes the parent"


def test_the_resource_and_the_cli_hand_out_only_guarded_connections(forked, monkeypatch):
    from dpone_dagster.cli import app
    from dpone_dagster.integration.lake.resources import DuckLakeResource

    env, _, ancestor = forked
    before = _parent_state(env)
    monkeypatch.setenv("DPONE_WORKSPACE", FORK)
    with DuckLakeResource().connect("main") as conn:
        assert isinstance(conn, GuardedConnection)
        assert conn.execute("SELECT count(*) FROM lake_main.main.events").fetchone() == (29,)
        with pytest.raises(SqlGuardError) as caught:
            conn.execute(f"CALL ducklake_merge_adjacent_files('{ancestor}')")
        assert caught.value.code == "lake.ancestor_maintenance"

    runner = CliRunner()
    refused = runner.invoke(app, ["lake", "sql", FORK, "main", "-e", f"CHECKPOINT {ancestor}"])
    assert refused.exit_code == 1 and "lake.ancestor_maintenance" in refused.output
    refused = runner.invoke(app, ["lake", "sql", FORK, "main", "-e", "ATTACH $$ducklake:/x$$ AS p"])
    assert refused.exit_code == 1 and "lake.unmanaged_attach" in refused.output
    counted = runner.invoke(app, ["lake", "sql", FORK, "main", "-e", "SELECT count(*) FROM lake_main.main.events"])
    assert counted.exit_code == 0 and counted.output.strip() == "29", counted.output
    # A fork's shell cannot execute on prod by naming it: the process acts for its configured workspace.
    elsewhere = runner.invoke(app, ["lake", "sql", "prod", "main", "-e", "DELETE FROM lake_main.main.events"])
    assert elsewhere.exit_code == 1 and "workspace.not_this_deployment" in elsewhere.output, elsewhere.output
    assert _parent_state(env) == before


def test_guarded_connection_checks_every_sql_entry_point(forked):
    env, resolved, ancestor = forked
    guard = SqlGuard.for_lake(resolved)
    assert guard.fork_mode and guard.alias == "lake_main"
    assert {ancestor.lower(), f"__ducklake_metadata_{ancestor}".lower()} <= guard.foreign
    bad = f"SELECT * FROM ducklake_merge_adjacent_files('{ancestor}')"
    with attached(env, FORK) as raw:
        conn = GuardedConnection.for_lake(raw, resolved)
        for method in ("execute", "sql", "query", "from_query", "executemany", "get_table_names"):
            with pytest.raises(SqlGuardError):
                getattr(conn, method)(bad)
        cursor = conn.cursor()
        assert isinstance(cursor, GuardedConnection)
        with pytest.raises(SqlGuardError):
            cursor.execute(bad)
        with pytest.raises(SqlGuardError):
            conn.execute(raw.extract_statements(bad)[0])
        with pytest.raises(SqlGuardError):
            conn.table_function("ducklake_merge_adjacent_files", [ancestor])
        with pytest.raises(SqlGuardError):
            conn.table_function("query", ["SELECT 1"])
        relation = conn.sql("SELECT 1 AS a")
        assert isinstance(relation, GuardedRelation)
        with pytest.raises(SqlGuardError):
            relation.query("r", bad)
        with pytest.raises(SqlGuardError):
            relation.filter(f"EXISTS ({bad})")
        assert relation.filter("a = 1").fetchall() == [(1,)]
        for refused in (conn.load_extension, conn.install_extension):
            with pytest.raises(SqlGuardError) as caught:
                refused("httpfs")
            assert caught.value.code == "lake.extension_statement"
        with pytest.raises(SqlGuardError) as caught:
            conn.checkpoint()
        assert caught.value.code == "lake.ancestor_maintenance"
        with pytest.raises(GuardedMethodError):
            conn.some_future_sql_method  # noqa: B018
        for name in dir(conn):
            if not name.startswith("__") and name not in ("guard",):
                value = getattr(conn, name, None)
                assert not isinstance(value, duckdb.DuckDBPyConnection), name
        assert conn.execute("SELECT 42").fetchone() == (42,)
        assert conn.execute("CALL ducklake_merge_adjacent_files('lake_main')") is conn
