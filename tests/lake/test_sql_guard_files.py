"""The guard's file, metadata-catalog and foreign-database rules (issue 19, second half), without a lake.

A synthetic embedded layout on disk (`tmp_path`): the parent's catalog file and data folder, a fork
prefix under `__wm_forks/`, a private temp folder. The guard is built the way `SqlGuard.for_lake`
builds it (`FileRules.for_lake`), so paths are resolved against real folders and symlinks. The same
rules on a real fork, on both backends, are `test_isolation_file_doors.py`.
"""

from __future__ import annotations

import os
import tempfile

import duckdb
import pytest

from dpone_dagster.lake.guard.checker import SqlGuard, SqlGuardError
from dpone_dagster.lake.guard.functions import KNOWN_TABLE_FUNCTIONS, check_table_function
from dpone_dagster.lake.guard.paths import FileRules

ANC = "__wm_dl_main_prod_0123abcd"
WRITE, META, FOREIGN = "lake.file_write_outside_namespace", "lake.metadata_write", "lake.foreign_database"


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """(guard, places): a fork of an embedded lake laid out as resolution lays it out."""
    lakes = tmp_path / "state" / "lakes"
    parent_data = lakes / "storage" / "main"
    fork_data = lakes / "storage" / "__wm_forks" / "wm_fork_x_0bf1be75" / "main"
    for folder in (parent_data / "main" / "orders", fork_data):
        folder.mkdir(parents=True)
    (lakes / "main.ducklake").write_bytes(b"catalog")
    (parent_data / "main" / "orders" / "ducklake-1.parquet").write_bytes(b"data")
    fork_catalog = lakes / "wm_fork_wm_fork_x_main_dd0a679c.ducklake"
    private_tmp = tmp_path / "private-tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    monkeypatch.chdir(tmp_path)
    files = FileRules.for_lake(
        f"{fork_data}/", [str(fork_catalog), str(lakes / "main.ducklake")], str(lakes / "storage")
    )
    guard = SqlGuard("lake_main", True, frozenset({ANC, f"__ducklake_metadata_{ANC}"}), files,
                     frozenset({"__ducklake_metadata_lake_main"}))  # fmt: skip
    places = {
        "parent_file": str(parent_data / "main" / "orders" / "ducklake-1.parquet"),
        "parent_data": str(parent_data),
        "catalog": str(lakes / "main.ducklake"),
        "fork": str(fork_data),
        "tmp": str(private_tmp),
        "root": str(tmp_path),
    }
    return guard, places


def _refused(guard: SqlGuard, sql: str) -> str:
    with pytest.raises(SqlGuardError) as caught:
        guard.check(sql)
    return caught.value.code


REFUSED = [
    # 1. / 7. file writes outside the fork's namespace (issue 19 #1, #2, #7)
    ("COPY (SELECT 42 AS id) TO '{parent_file}' (FORMAT parquet)", WRITE),
    ("COPY (SELECT 'x' AS junk) TO '{catalog}' (FORMAT csv)", WRITE),
    ("COPY (SELECT 1) TO '{parent_data}/main/orders/new.parquet'", WRITE),
    ("EXPORT DATABASE memory TO '{parent_data}/exported'", WRITE),
    ("EXPORT DATABASE '{parent_data}/exported' (FORMAT parquet)", WRITE),
    ("copy lake_main.main.t to $$file://{parent_file}$$", WRITE),
    ("COPY (SELECT 1) TO 'file:{parent_file}'", WRITE),
    ("COPY (SELECT 1) TO '{fork}/../../../main/orders/x.parquet'", WRITE),  # .. out of the prefix
    ("COPY (SELECT 1) TO 'state/lakes/storage/main/x.csv'", WRITE),  # relative to the working dir
    ("COPY (SELECT 1) TO \"{parent_file}\"", WRITE),  # a quoted identifier names the file too
    ("COPY (SELECT 1) TO E'{parent_file}'", WRITE),
    ("COPY (SELECT 1) TO ('{fork}/' || 'x.csv')", WRITE),  # an expression cannot be proven
    ("COPY (SELECT 1) TO ?", WRITE),  # nor a parameter
    ("COPY (SELECT 1) TO '~/x.csv'", WRITE),
    ("COPY (SELECT 1) TO '{fork}/*.csv'", WRITE),
    (
        "COPY (SELECT 1 AS v, 2 AS p) TO '{fork}/d' (PARTITION_BY (p), FILENAME_PATTERN '../../../../main/x_{{i}}')",
        WRITE,
    ),
    ("COPY (SELECT 1 AS v, 2 AS p) TO '{fork}/d' (PARTITION_BY (p), FILE_EXTENSION '/../../x')", WRITE),
    ("COPY (SELECT 1) TO 's3://bucket/lakes/main/x.parquet'", WRITE),
    ("PREPARE p AS COPY (SELECT 1) TO '{parent_file}'", WRITE),
    ("EXPLAIN ANALYZE COPY (SELECT 1) TO '{parent_file}'", WRITE),
    ("SELECT 1; COPY (SELECT 1) TO '{parent_file}'", WRITE),
    ("COPY (SELECT 1) TO '/dev/stdout'", WRITE),
    ("COPY (SELECT 1) TO STDOUT", WRITE),
    ("CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')", WRITE),
    ("DROP PERSISTENT SECRET s", WRITE),
    # 3. the own metadata catalog is read-only to user SQL (issue 19 #3)
    ("INSERT INTO __ducklake_metadata_lake_main.ducklake_files_scheduled_for_deletion "
     "VALUES (999999, '{parent_file}', false, TIMESTAMPTZ '2000-01-01')", META),
    ('insert into "__DUCKLAKE_METADATA_LAKE_MAIN".main.ducklake_data_file select * from t', META),
    ("UPDATE __ducklake_metadata_lake_main.main.ducklake_metadata SET value = '/' WHERE key = 'data_path'", META),
    ("DELETE FROM __ducklake_metadata_lake_main.main.ducklake_snapshot", META),
    ("CREATE TABLE __ducklake_metadata_lake_main.main.x AS SELECT 1", META),
    ("DROP TABLE __ducklake_metadata_lake_main.main.ducklake_table", META),
    ("COPY __ducklake_metadata_lake_main.main.ducklake_files_scheduled_for_deletion FROM 'x.csv'", META),
    ("COPY FROM DATABASE memory TO __ducklake_metadata_lake_main", META),
    ("PREPARE p AS DELETE FROM __ducklake_metadata_lake_main.main.ducklake_snapshot", META),
    ("SET search_path = '__ducklake_metadata_lake_main.main'", "lake.unmanaged_use"),
    (f"SET schema = '{ANC}.main'", "lake.unmanaged_use"),
    # 4. other databases by DSN or path; credentials; files through functions
    ("SELECT * FROM postgres_scan('host=h dbname=d', 'public', 'lake_catalog_role')", FOREIGN),
    ("SELECT * FROM POSTGRES_SCAN_PUSHDOWN('dbname=d', 'public', 't')", FOREIGN),
    ("SELECT * FROM postgres_query('lake_main', 'SELECT 1')", "lake.dynamic_sql"),
    ("SELECT * FROM sqlite_scan('{catalog}', 't')", FOREIGN),
    ("SELECT * FROM mysql_query('db', 'SELECT 1')", "lake.dynamic_sql"),
    ("SELECT * FROM some_vendor_attach('x')", FOREIGN),
    ("SELECT * FROM read_duckdb('{catalog}')", FOREIGN),
    ("SELECT * FROM duckdb_secrets()", FOREIGN),
    ("SELECT * FROM which_secret('s3://b/x', 's3')", FOREIGN),
    ("CALL enable_logging(storage := 'file', storage_path := '{parent_data}')", FOREIGN),
    ("CALL pg_clear_cache()", FOREIGN),
    ("SELECT * FROM '{root}/other.duckdb'", FOREIGN),
    ('SELECT * FROM "{root}/other.db"', FOREIGN),
    ("SELECT * FROM read_blob('{catalog}')", FOREIGN),
    ("SELECT * FROM read_text('{root}/state/lakes/*')", FOREIGN),  # the glob reaches main.ducklake
    ("SELECT * FROM read_text(getvariable('p'))", FOREIGN),  # a path that cannot be proven
    ("SELECT * FROM read_csv(['{fork}/a.csv', '{catalog}'])", FOREIGN),
    # settings naming files DuckDB writes
    ("SET log_query_path = '{parent_data}/log.txt'", "lake.guarded_setting"),
    ("SET temp_directory = '{parent_data}'", "lake.guarded_setting"),
    ("SET profiling_output = '{parent_file}'", "lake.guarded_setting"),
    ("SET logging_storage = 'file'", "lake.guarded_setting"),
    ("SET home_directory = '{parent_data}'", "lake.guarded_setting"),
]  # fmt: skip

ALLOWED = [
    "COPY (SELECT 1 AS a) TO '{fork}/export/a.parquet' (FORMAT parquet)",
    "COPY (SELECT 1 AS a, 2 AS p) TO '{fork}/by_p' (FORMAT csv, PARTITION_BY (p), FILENAME_PATTERN 'x_{{i}}')",
    "COPY (SELECT 1 AS a) TO 'file://{fork}/a.csv'",
    "COPY (SELECT 1 AS a) TO '{tmp}/a.csv' WITH (FORMAT csv)",
    "COPY (SELECT 1 AS a) TO 'private-tmp/relative.csv'",
    "EXPORT DATABASE memory TO '{fork}/exported' (FORMAT parquet)",
    "COPY lake_main.main.t FROM '{fork}/a.csv'",
    "SELECT * FROM read_parquet('{parent_data}/main/orders/*.parquet')",  # reading the parent is fine
    "SELECT * FROM read_csv(['{fork}/a.csv', '{tmp}/b.csv'])",
    "SELECT * FROM __ducklake_metadata_lake_main.main.ducklake_files_scheduled_for_deletion",
    "SET search_path = 'lake_main.main,memory.main'",
    "SELECT * FROM duckdb_databases()",
    "SELECT * FROM glob('{fork}/*.parquet')",
    "SELECT 'notes.db is a name, not a read' LIKE '%x%'",
    "SELECT * FROM range(3) JOIN unnest([1, 2]) AS u(x) ON true",
    "SELECT export, copy FROM (SELECT 1 AS export, 2 AS copy)",  # the words alone write nothing
]


@pytest.mark.parametrize(("template", "code"), REFUSED)
def test_every_file_metadata_and_foreign_door_is_refused_with_its_code(layout, template, code):
    guard, places = layout
    (__import__("pathlib").Path(places["root"]) / "other.duckdb").write_bytes(b"x")
    assert _refused(guard, template.format(**places)) == code, template


@pytest.mark.parametrize("template", ALLOWED)
def test_writes_into_the_own_prefix_and_temp_and_plain_reads_pass(layout, template):
    guard, places = layout
    guard.check(template.format(**places))


def test_a_symlink_out_of_the_own_prefix_is_followed_before_comparing(layout):
    guard, places = layout
    os.symlink(places["parent_data"], f"{places['fork']}/escape")
    assert _refused(guard, f"COPY (SELECT 1) TO '{places['fork']}/escape/main/orders/x.parquet'") == WRITE
    os.symlink(places["catalog"], f"{places['fork']}/looks_like_data.parquet")
    assert _refused(guard, f"SELECT * FROM read_blob('{places['fork']}/looks_like_data.parquet')") == FOREIGN


def test_the_temp_folder_is_writable_only_when_it_holds_no_lake(tmp_path, monkeypatch):
    lakes = tmp_path / "lakes"
    (lakes / "storage" / "main").mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # /tmp holding the lakes, as in CI
    rules = FileRules.for_lake(f"{lakes}/storage/main/", [str(lakes / "main.ducklake")], str(lakes / "storage"))
    assert rules.writable == (str(lakes / "storage" / "main"),)
    guard = SqlGuard("lake_main", False, files=rules)
    assert _refused(guard, f"COPY (SELECT 1) TO '{tmp_path}/elsewhere.csv'") == WRITE
    guard.check(f"COPY (SELECT 1) TO '{lakes}/storage/main/own.csv'")  # prod: its own data path


def test_a_guard_without_file_rules_writes_nothing():
    assert _refused(SqlGuard("lake_main", True), "COPY (SELECT 1) TO '/tmp/x.csv'") == WRITE


def test_remote_targets_compare_bucket_and_key_segments():
    rules = FileRules(("s3://b/__wm_forks/wm_fork_x_0bf1be75/lakes/main",))
    guard = SqlGuard("lake_main", True, files=rules)
    guard.check("COPY (SELECT 1) TO 's3://b/__wm_forks/wm_fork_x_0bf1be75/lakes/main/x.parquet'")
    for target in (
        "s3://b/lakes/main/x.parquet",
        "s3://b/__wm_forks/wm_fork_x_0bf1be75/lakes/mainX/x.parquet",
        "s3://b/__wm_forks/wm_fork_x_0bf1be75/lakes/main/../../../../lakes/main/x.parquet",
        "s3://b/__wm_forks/wm_fork_x_0bf1be75/lakes/main/%2e%2e/x.parquet",
        "s3://b/__wm_forks/wm_fork_x_0bf1be75/lakes/main//x.parquet",
        "s3a://b/__wm_forks/wm_fork_x_0bf1be75/lakes/main/x.parquet",
        "S3://b/__wm_forks/wm_fork_x_0bf1be75/lakes/main/x.parquet",
        "s3://other/__wm_forks/wm_fork_x_0bf1be75/lakes/main/x.parquet",
        "s3:/b/__wm_forks/wm_fork_x_0bf1be75/lakes/main/x.parquet",
    ):
        assert _refused(guard, f"COPY (SELECT 1) TO '{target}'") == WRITE, target


def test_the_table_function_lists_match_this_duckdb_and_its_shipped_extensions():
    """A DuckDB or extension upgrade that adds a table function turns this red until the function
    is classified in `lake/guard/functions.py` (allowed, refused, or ruled by checker.py)."""
    from dpone_dagster.lake.duck import extension_path

    conn = duckdb.connect(config={"autoload_known_extensions": False, "autoinstall_known_extensions": False})
    for name in ("ducklake", "postgres_scanner", "httpfs"):
        conn.execute(f"LOAD '{extension_path(name)}'")
    names = {
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions() WHERE function_type IN ('table', 'table_macro')"
        ).fetchall()
    }
    assert {n for n in names if not n.startswith("ducklake_")} == KNOWN_TABLE_FUNCTIONS
    for name in ("postgres_scan", "read_duckdb", "sqlite_scan", "sqlite_attach", "mysql_scan", "odbc_query"):
        with pytest.raises(SqlGuardError):
            check_table_function(name)
