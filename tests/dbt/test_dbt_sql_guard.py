"""Every SQL text dbt sends passes `sql_guard`: a real `dbt run-operation` in a fork that calls
DuckLake maintenance on the ancestor is refused and leaves the parent's files and catalog alone;
the interception point in dbt-duckdb is version-checked and fails closed.

Model and hook SQL reach DuckDB through the same `handle.cursor().execute(...)` as run-operation
(dbt-adapters' `add_query`); the fork dbt builds in `test_fork_dbt.py` run through the guard too.
"""

from __future__ import annotations

import hashlib
import os
import subprocess

import duckdb
import pytest
from dbt_lakes import DBT_PROJECT_DIR, LakeSetup

from dpone_dagster.lake import dbt_plugin
from dpone_dagster.lake.guard.checker import SqlGuard, SqlGuardError
from dpone_dagster.lake.guard.connection import GuardedConnection

FORK = "wm-fork-dbt-guard"


def _parent_state(setup: LakeSetup, catalog: str) -> tuple:
    storage = setup.state_dir / "lakes" / "storage" / "main"
    files = tuple(
        (str(p), hashlib.sha256(p.read_bytes()).hexdigest()) for p in sorted(storage.rglob("*")) if p.is_file()
    )
    conn = duckdb.connect(catalog, read_only=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        rows = tuple((t, tuple(conn.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall())) for t in tables)
    finally:
        conn.close()
    return files, rows


@pytest.mark.slow
def test_dbt_run_operation_cannot_run_maintenance_on_the_ancestor(tmp_path):
    from dpone_dagster.config import load_config
    from dpone_dagster.integration.dbt.project import dbt_executable
    from dpone_dagster.lake import duck
    from dpone_dagster.lake.resolution.seam import resolve
    from dpone_dagster.workspaces.service import Workspaces

    setup = LakeSetup(tmp_path)
    with setup.applied():
        config = load_config()
        prod = resolve("prod", "main", config=config)
        conn = duck.connect(extension_directory=setup.extension_directory)
        prod.apply(conn)
        conn.execute("CREATE TABLE lake_main.main.events AS SELECT range AS id FROM range(5)")
        for start in (5, 10, 15):
            conn.execute(f"INSERT INTO lake_main.main.events SELECT range FROM range({start}, {start + 5})")
        conn.close()
        Workspaces(config).create_fork(FORK, "prod", owner="tester")
        ancestor = resolve(FORK, "main", config=config).ancestors[0].alias
    before = _parent_state(setup, prod.catalog.target)

    env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
    env.update(setup.env, DPONE_WORKSPACE=FORK, DBT_TARGET_PATH=str(tmp_path / "t"), DBT_LOG_PATH=str(tmp_path / "l"))
    sql = f"CALL ducklake_merge_adjacent_files('{ancestor}')"
    done = subprocess.run(
        [dbt_executable(), "run-operation", "run_query", "--args", f'{{sql: "{sql}"}}',
         "--profiles-dir", str(DBT_PROJECT_DIR)],
        cwd=DBT_PROJECT_DIR, env=env, capture_output=True, text=True,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "lake.ancestor_maintenance" in output, output[-3000:]
    assert _parent_state(setup, prod.catalog.target) == before


@pytest.fixture
def restored_cursor_wrapper(monkeypatch):
    from dbt.adapters.duckdb.environments import local

    monkeypatch.setattr(local.DuckDBCursorWrapper, "__init__", local.DuckDBCursorWrapper.__init__)
    monkeypatch.setattr(local.DuckDBCursorWrapper, "_dpone_guarded", False, raising=False)
    monkeypatch.setattr(dbt_plugin, "_ACTIVE_GUARD", None)
    return local


def test_the_cursor_guard_wraps_every_dbt_cursor_and_fails_closed(restored_cursor_wrapper, monkeypatch):
    local = restored_cursor_wrapper
    dbt_plugin.install_cursor_guard()
    raw = duckdb.connect()
    with pytest.raises(dbt_plugin.DbtGuardUnavailableError):
        local.DuckDBCursorWrapper(raw.cursor())  # no lake attached yet: no guard, no cursor
    monkeypatch.setattr(dbt_plugin, "_ACTIVE_GUARD", SqlGuard("memory", True))
    cursor = local.DuckDBCursorWrapper(raw.cursor())
    assert isinstance(cursor._cursor, GuardedConnection)
    assert cursor.execute("SELECT 1").fetchall() == [(1,)]
    for sql in ("CALL ducklake_merge_adjacent_files('__wm_dl_main_prod_x')", "ATTACH ':memory:' AS m", "CHECKPOINT"):
        with pytest.raises(SqlGuardError):
            cursor.execute(sql)
    with pytest.raises(SqlGuardError):
        cursor.sql("DETACH memory")  # forwarded attributes are guarded too
    dbt_plugin.install_cursor_guard()  # idempotent: still one wrapping
    assert isinstance(local.DuckDBCursorWrapper(raw.cursor())._cursor, GuardedConnection)


def test_another_dbt_duckdb_version_refuses_to_start(restored_cursor_wrapper, monkeypatch):
    import dbt.adapters.duckdb.__version__ as version_module

    monkeypatch.setattr(version_module, "version", "1.12.0")
    with pytest.raises(dbt_plugin.DbtGuardUnavailableError) as caught:
        dbt_plugin.install_cursor_guard()
    assert caught.value.code == "lake.dbt_duckdb_unsupported"
    monkeypatch.setattr(version_module, "version", dbt_plugin.GUARDED_DBT_DUCKDB[-1])
    monkeypatch.delattr(restored_cursor_wrapper, "DuckDBConnectionWrapper")
    with pytest.raises(dbt_plugin.DbtGuardUnavailableError):
        dbt_plugin.install_cursor_guard()
