"""`duck.connect()` loads only `ducklake`; a resolved lake loads postgres_scanner / httpfs when it needs them.

Each of those two costs a signature check on every connection; an embedded lake (DuckDB catalog,
local data path) uses neither. Autoinstall and autoload stay off and the extension directory stays
project-local whichever extensions are loaded.
"""

from __future__ import annotations

from dpone_dagster.lake.duck import connect
from dpone_dagster.lake.resolution.seam import resolve


def _loaded(conn) -> set[str]:
    return {row[0] for row in conn.execute("SELECT extension_name FROM duckdb_extensions() WHERE loaded").fetchall()}


def _setting(conn, name: str):
    return conn.execute("SELECT current_setting(?)", [name]).fetchone()[0]


def test_an_embedded_lake_connection_loads_only_ducklake(embedded_lake):
    resolved = resolve("prod", config=embedded_lake.config)
    assert resolved.extensions == ("ducklake",)
    conn = connect()
    try:
        assert _loaded(conn) & {"ducklake", "postgres_scanner", "httpfs"} == {"ducklake"}
        resolved.apply(conn)
        conn.execute(f"CREATE TABLE {resolved.alias}.t AS SELECT 1 AS x")
        assert _loaded(conn) & {"ducklake", "postgres_scanner", "httpfs"} == {"ducklake"}
        assert _setting(conn, "autoinstall_known_extensions") is False
        assert _setting(conn, "autoload_known_extensions") is False
        assert _setting(conn, "extension_directory") == str(embedded_lake.config.state_path / "duckdb_extensions")
    finally:
        conn.close()


def test_a_postgres_and_s3_lake_loads_its_extensions_on_demand(pg_s3_lake):
    resolved = resolve("prod", config=pg_s3_lake.config)
    assert set(resolved.extensions) == {"ducklake", "postgres_scanner", "httpfs"}
    conn = connect()  # what the ducklake resource and dbt's plugin start from: ducklake only
    try:
        assert "postgres_scanner" not in _loaded(conn) and "httpfs" not in _loaded(conn)
        resolved.apply(conn)  # loads both before the first statement, then attaches and writes S3
        conn.execute(f"CREATE TABLE {resolved.alias}.t AS SELECT range AS x FROM range(10)")
        assert conn.execute(f"SELECT sum(x) FROM {resolved.alias}.t").fetchone()[0] == 45
        assert {"postgres_scanner", "httpfs"} <= _loaded(conn)
        assert _setting(conn, "autoinstall_known_extensions") is False
    finally:
        conn.close()
    assert any(f.endswith(".parquet") for f in pg_s3_lake.list_files(resolved.data_path))
