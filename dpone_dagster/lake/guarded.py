"""`GuardedConnection`: the DuckDB connection handed to user code, every SQL text checked first.

It wraps a `DuckDBPyConnection` (or anything with its interface, such as dbt-duckdb's retrying
cursor) and runs `SqlGuard.check` before `execute`, `executemany`, `sql`, `query`, `from_query`
and `get_table_names`; `extract_statements` results are checked again when executed; relations it
returns are `GuardedRelation`s whose string arguments (expressions, `query(name, sql)`) are checked
too; `cursor()` and `duplicate()` return guarded connections; `load_extension`/`install_extension`
are refused; `checkpoint()` is refused in a fork.

What a reader could get wrong: the wrapper is *allow-listed*. A DuckDB method not named below
raises `lake.guarded_connection_method` instead of reaching the raw connection, so a new DuckDB
release that adds a SQL-taking method fails closed until it is reviewed here. The raw connection
is kept in a private slot and no method returns it; this keeps user SQL on the checked path, it
does not sandbox user Python (which can always open a DuckDB connection of its own).
"""

from __future__ import annotations

from typing import Any

import duckdb

from dpone_dagster.lake.sql_guard import (
    AncestorMaintenanceError,
    ExtensionStatementError,
    SqlGuard,
    SqlGuardError,
    UnparsableSqlError,
)


class GuardedMethodError(SqlGuardError, AttributeError):
    code = "lake.guarded_connection_method"


_SQL_METHODS = frozenset({"execute", "executemany", "sql", "query", "from_query", "get_table_names"})
_PASS_THROUGH = frozenset(
    {
        # results and transactions
        "fetchall", "fetchone", "fetchmany", "fetchdf", "fetch_df", "fetch_df_chunk",
        "fetchnumpy", "fetch_arrow_table", "fetch_record_batch", "arrow", "df", "pl", "tf",
        "torch", "to_arrow_table", "to_arrow_reader", "description", "rowcount", "begin",
        "commit", "rollback", "close", "interrupt", "query_progress",
        # relations from names, files and Python objects (names are not SQL)
        "table", "view", "values", "read_csv", "read_json", "read_parquet", "from_csv_auto",
        "from_parquet", "from_arrow", "from_df", "register", "unregister", "append",
        # types, functions, filesystems, profiling
        "array_type", "list_type", "map_type", "struct_type", "row_type", "union_type",
        "enum_type", "decimal_type", "string_type", "sqltype", "dtype", "type",
        "create_function", "remove_function", "list_filesystems", "register_filesystem",
        "unregister_filesystem", "filesystem_is_registered", "enable_profiling",
        "disable_profiling", "get_profiling_information",
    }
)  # fmt: skip


def _text(query: Any) -> str:
    """The SQL text of `query`: a str, or a `duckdb.Statement` from `extract_statements`."""
    if isinstance(query, str):
        return query
    text = getattr(query, "query", None)
    if isinstance(text, str) and text.strip():
        return text
    raise UnparsableSqlError("only SQL text (or a statement that carries its text) is accepted")


class GuardedConnection:
    """A DuckDB connection proxy that refuses SQL `SqlGuard` refuses (see module docstring)."""

    __slots__ = ("__conn", "__guard")

    def __init__(self, conn: Any, guard: SqlGuard) -> None:
        if isinstance(conn, GuardedConnection):
            raise TypeError("the connection is already guarded")
        object.__setattr__(self, "_GuardedConnection__conn", conn)
        object.__setattr__(self, "_GuardedConnection__guard", guard)

    @classmethod
    def for_lake(cls, conn: Any, resolved: Any) -> GuardedConnection:
        return cls(conn, SqlGuard.for_lake(resolved))

    @property
    def guard(self) -> SqlGuard:
        return self.__guard

    def __wrap(self, result: Any) -> Any:
        if result is self.__conn:
            return self
        if isinstance(result, duckdb.DuckDBPyConnection):
            return GuardedConnection(result, self.__guard)
        if isinstance(result, duckdb.DuckDBPyRelation):
            return GuardedRelation(result, self.__guard)
        return result

    def __sql(self, name: str, query: Any, *args: Any, **kwargs: Any) -> Any:
        text = _text(query)
        self.__guard.check(text)
        return self.__wrap(getattr(self.__conn, name)(text, *args, **kwargs))

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        return self.__sql("execute", query, *args, **kwargs)

    def executemany(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        return self.__sql("executemany", query, *args, **kwargs)

    def sql(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        return self.__sql("sql", query, *args, **kwargs)

    def query(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        return self.__sql("query", query, *args, **kwargs)

    def from_query(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        return self.__sql("from_query", query, *args, **kwargs)

    def get_table_names(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        return self.__sql("get_table_names", query, *args, **kwargs)

    def extract_statements(self, query: str) -> Any:
        return self.__conn.extract_statements(query)

    def table_function(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.__guard.check_function_name(name)
        return self.__wrap(self.__conn.table_function(name, *args, **kwargs))

    def cursor(self) -> GuardedConnection:
        return GuardedConnection(self.__conn.cursor(), self.__guard)

    def duplicate(self) -> GuardedConnection:
        return GuardedConnection(self.__conn.duplicate(), self.__guard)

    def checkpoint(self) -> GuardedConnection:
        if self.__guard.fork_mode:
            raise AncestorMaintenanceError(
                "checkpoint() in a fork checkpoints the ancestors too; run "
                f"CHECKPOINT {self.__guard.alias} instead"
            )
        self.__conn.checkpoint()
        return self

    def load_extension(self, *args: Any, **kwargs: Any) -> None:
        raise ExtensionStatementError("extensions are loaded by the project, not by user code")

    install_extension = load_extension

    def __getattr__(self, name: str) -> Any:
        if name in _PASS_THROUGH:
            attribute = getattr(self.__conn, name)
            if not callable(attribute):
                return self.__wrap(attribute)
            return lambda *args, **kwargs: self.__wrap(attribute(*args, **kwargs))
        raise GuardedMethodError(
            f"{name!r} is not available on a guarded DuckDB connection (not reviewed for SQL)"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        raise GuardedMethodError("a guarded DuckDB connection cannot be modified")

    def __enter__(self) -> GuardedConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.__conn.close()

    def __repr__(self) -> str:
        return f"GuardedConnection(alias={self.__guard.alias!r}, fork={self.__guard.fork_mode})"


class GuardedRelation:
    """A `DuckDBPyRelation` whose string arguments are checked; `query(name, sql)` fully."""

    __slots__ = ("__rel", "__guard")

    def __init__(self, rel: duckdb.DuckDBPyRelation, guard: SqlGuard) -> None:
        object.__setattr__(self, "_GuardedRelation__rel", rel)
        object.__setattr__(self, "_GuardedRelation__guard", guard)

    def __wrap(self, result: Any) -> Any:
        if isinstance(result, duckdb.DuckDBPyRelation):
            return GuardedRelation(result, self.__guard)
        if isinstance(result, duckdb.DuckDBPyConnection):
            return GuardedConnection(result, self.__guard)
        return result

    def query(self, virtual_table_name: str, sql_query: str) -> Any:
        self.__guard.check(sql_query)
        return self.__wrap(self.__rel.query(virtual_table_name, sql_query))

    def __check_args(self, args: tuple, kwargs: dict) -> None:
        for value in [*args, *kwargs.values()]:
            for item in value if isinstance(value, list | tuple) else [value]:
                if isinstance(item, str):
                    self.__guard.check_fragment(item)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise GuardedMethodError(f"{name!r} is not available on a guarded relation")
        attribute = getattr(self.__rel, name)
        if not callable(attribute):
            return self.__wrap(attribute)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.__check_args(args, kwargs)
            return self.__wrap(attribute(*args, **kwargs))

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        raise GuardedMethodError("a guarded relation cannot be modified")

    def __len__(self) -> int:
        return len(self.__rel)

    def __repr__(self) -> str:
        return repr(self.__rel)

    def __str__(self) -> str:
        return str(self.__rel)
