"""Which table functions user SQL may call: an allowlist, and the names that open other databases.

DuckDB's table functions include doors out of the lake: `postgres_scan`/`postgres_query` read any
PostgreSQL database by DSN (the control store and its role table included), `read_duckdb` opens a
DuckDB file by path, `enable_logging`/`enable_profiling` write files, `duckdb_secrets`/`which_secret`
describe credentials. A call of one of DuckDB's table functions (this DuckDB with the shipped
extensions: `KNOWN_TABLE_FUNCTIONS`) that is not on `ALLOWED_TABLE_FUNCTIONS` is refused, and so
is every name shaped like a scanner of another database (`postgres_*`, `mysql_*`, `sqlite_*`,
`*_attach`, `*_scan`, …) whether or not its extension is loaded in this process. DuckLake's own
functions and `checkpoint` are ruled by `checker.py` (own alias only), not here.

What a reader could get wrong: the rule looks at the *name* at a call site (`name(`), so a scalar
function sharing a refused name is refused too (fail closed). The lists are static so the guard
needs no DuckDB connection of its own; `tests/lake/test_sql_guard_files.py` compares
`KNOWN_TABLE_FUNCTIONS` with `duckdb_functions()` of the installed DuckDB and extensions, so an
upgrade that adds a table function turns it red until the function is classified here.
"""

from __future__ import annotations

from dpone_dagster.lake.guard.paths import ForeignDatabaseError

READ_FUNCTIONS = frozenset(
    {
        "read_blob", "read_csv", "read_csv_auto", "read_json", "read_json_auto", "read_json_objects",
        "read_json_objects_auto", "read_ndjson", "read_ndjson_auto", "read_ndjson_objects",
        "read_parquet", "parquet_scan", "parquet_bloom_probe", "parquet_file_metadata",
        "parquet_full_metadata", "parquet_kv_metadata", "parquet_metadata", "parquet_schema",
        "read_text", "sniff_csv", "glob",
    }
)  # fmt: skip
"""Allowed table functions whose first argument is a file path or glob (checked by `paths.py`)."""

ALLOWED_TABLE_FUNCTIONS = READ_FUNCTIONS | frozenset(
    {
        "duckdb_approx_database_count", "duckdb_columns", "duckdb_connection_count",
        "duckdb_constraints", "duckdb_coordinate_systems", "duckdb_databases", "duckdb_dependencies",
        "duckdb_extensions", "duckdb_external_file_cache", "duckdb_functions", "duckdb_indexes",
        "duckdb_keywords", "duckdb_memory", "duckdb_optimizers", "duckdb_prepared_statements",
        "duckdb_profiling_settings", "duckdb_schemas", "duckdb_secret_types", "duckdb_sequences",
        "duckdb_settings", "duckdb_table_sample", "duckdb_tables", "duckdb_temporary_files",
        "duckdb_types", "duckdb_variables", "duckdb_views", "generate_series", "range", "repeat",
        "repeat_row", "unnest", "json_each", "json_tree", "icu_calendar_names", "pg_timezone_names",
        "summary", "test_all_types", "test_vector_types", "histogram", "histogram_values",
        "pragma_collations", "pragma_database_size", "pragma_metadata_info", "pragma_platform",
        "pragma_show", "pragma_storage_info", "pragma_table_info", "pragma_user_agent",
        "pragma_version",
    }
)  # fmt: skip

REFUSED_TABLE_FUNCTIONS = frozenset(
    {
        # other databases by DSN or path
        "postgres_attach", "postgres_configure_pool", "postgres_execute", "postgres_query",
        "postgres_scan", "postgres_scan_pushdown", "pg_clear_cache", "read_duckdb",
        "read_postgres_binary",
        # SQL as a string, files written, credentials described, Python object pointers
        "query", "query_table", "json_execute_serialized_sql", "enable_logging", "disable_logging",
        "enable_profiling", "disable_profiling", "duckdb_logs", "duckdb_logs_parsed",
        "duckdb_log_contexts", "truncate_duckdb_logs", "duckdb_secrets", "which_secret",
        "arrow_scan", "arrow_scan_dumb", "pandas_scan", "python_map_function", "seq_scan",
    }
)  # fmt: skip

RULED_ELSEWHERE = frozenset({"checkpoint", "force_checkpoint"})
"""Table functions `checker.py` rules itself (with the `ducklake_*` ones)."""

KNOWN_TABLE_FUNCTIONS = ALLOWED_TABLE_FUNCTIONS | REFUSED_TABLE_FUNCTIONS | RULED_ELSEWHERE

FOREIGN_PREFIXES = (
    "postgres_", "pg_clear", "mysql_", "sqlite_", "odbc_", "iceberg_", "delta_", "uc_",
    "motherduck_", "md_", "snowflake_", "bigquery_", "read_duckdb",
)  # fmt: skip
FOREIGN_SUFFIXES = ("_attach", "_scan", "_scan_pushdown", "_query", "_execute")


def check_table_function(name: str) -> None:
    """Refuse `name(…)` unless it is allowed (DuckLake and checkpoint functions are not ruled here)."""
    if name.startswith("ducklake_") or name in RULED_ELSEWHERE or name in ALLOWED_TABLE_FUNCTIONS:
        return
    if name in REFUSED_TABLE_FUNCTIONS or name.startswith(FOREIGN_PREFIXES) or name.endswith(FOREIGN_SUFFIXES):
        raise ForeignDatabaseError(
            f"{name}() is not on the guard's list of table functions user SQL may call "
            "(it opens another database, writes files or describes credentials)"
        )
