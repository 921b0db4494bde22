"""`GuardedConnection`: the DuckDB connection handed to user code, every SQL text checked first.

It wraps a `DuckDBPyConnection` (or anything with its interface, such as dbt-duckdb's retrying
cursor) and runs `SqlGuard.check` before `execute`, `executemany`, `sql`, `query`, `from_query`
and `get_table_names`; `extract_statements` results are checked again when executed; relations it
returns are `GuardedRelation`s whose string arguments (expressions, `query(name, sql)`) are checked
too; `cursor()` and `duplicate()` return guarded connections; `load_extension`/`install_extension`
are refused; `checkpoint()` is refused in a fork. Methods that name files or tables are ruled like
the SQL they stand for: `write_parquet`/`to_parquet`/`write_csv`/`to_csv` write only inside the
lake's own data path or the temp folder (`paths.FileRules`), `to_table`/`create`/`insert_into`/
`create_view`/`to_view` and `append` never into a metadata catalog, `insert`/`update` not on a
relation over one, and `read_csv`/`read_json`/`read_parquet` (and `from_*`) never open a database
or catalog file. DuckLake maintenance on the own lake runs only after `verify_own_deletions` found
every file it could delete inside the lake's data path.

What a reader could get wrong: the wrapper is *allow-listed*. A DuckDB method not named below raises
`lake.guarded_connection_method` instead of reaching the raw connection, so a new DuckDB release
that adds a SQL-taking method fails closed until it is reviewed here. The raw connection lives only
in a closure (no attribute of the proxy is it) and no method returns it; this keeps user SQL on the
checked path, it does not sandbox user Python (which can always open a DuckDB connection of its
own).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import duckdb

from dpone_dagster.lake.guard.checker import (
    AncestorMaintenanceError,
    ExtensionStatementError,
    SqlGuard,
    SqlGuardError,
    UnparsableSqlError,
)
from dpone_dagster.lake.guard.deletions import verify_own_deletions
from dpone_dagster.lake.guard.functions import READ_FUNCTIONS
from dpone_dagster.lake.guard.paths import safe_file_name_part


class GuardedMethodError(SqlGuardError, AttributeError):
    code = "lake.guarded_connection_method"


_PASS_THROUGH = frozenset(
    {
        # results and transactions
        "fetchall", "fetchone", "fetchmany", "fetchdf", "fetch_df", "fetch_df_chunk",
        "fetchnumpy", "fetch_arrow_table", "fetch_record_batch", "arrow", "df", "pl", "tf",
        "torch", "to_arrow_table", "to_arrow_reader", "description", "rowcount", "begin",
        "commit", "rollback", "close", "interrupt", "query_progress",
        # relations from names and Python objects (names are not SQL; files: see below)
        "table", "view", "values", "from_arrow", "from_df", "register", "unregister",
        # types, functions, filesystems, profiling
        "array_type", "list_type", "map_type", "struct_type", "row_type", "union_type",
        "enum_type", "decimal_type", "string_type", "sqltype", "dtype", "type",
        "create_function", "remove_function", "list_filesystems", "register_filesystem",
        "unregister_filesystem", "filesystem_is_registered", "enable_profiling",
        "disable_profiling", "get_profiling_information",
    }
)  # fmt: skip


_FILE_READERS = frozenset({"read_csv", "read_json", "read_parquet", "from_csv_auto", "from_parquet"})
_FILE_WRITERS = frozenset({"write_parquet", "to_parquet", "write_csv", "to_csv"})
_TABLE_WRITERS = frozenset({"to_table", "create", "insert_into", "create_view", "to_view"})
_ROW_WRITERS = frozenset({"insert", "update"})


def _strings(value: Any) -> list[str]:
    items = value if isinstance(value, list | tuple) else [value]
    return [item for item in items if isinstance(item, str)]


def _first(args: tuple, kwargs: dict, *names: str) -> Any:
    if args:
        return args[0]
    return next((kwargs[n] for n in names if n in kwargs), None)


def _text(query: Any) -> str:
    """The SQL text of `query`: a str, or a `duckdb.Statement` from `extract_statements`."""
    if isinstance(query, str):
        return query
    text = getattr(query, "query", None)
    if isinstance(text, str) and text.strip():
        return text
    raise UnparsableSqlError("only SQL text (or a statement that carries its text) is accepted")


def _invoker(target: Any, guard: SqlGuard) -> Callable[..., Any]:
    """`invoke(proxy, name, *args, **kwargs)`: call `target.name` and wrap what comes back. The
    target lives only in this closure, so no attribute of a proxy is the raw DuckDB object."""

    def invoke(proxy: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        attribute = getattr(target, name)
        result = attribute(*args, **kwargs) if callable(attribute) else attribute
        if result is target:
            return proxy
        if isinstance(result, duckdb.DuckDBPyConnection):
            return GuardedConnection(result, guard)
        if isinstance(result, duckdb.DuckDBPyRelation):
            return GuardedRelation(result, guard)
        return result

    invoke.is_method = lambda name: callable(getattr(target, name))  # type: ignore[attr-defined]
    return invoke


class GuardedConnection:
    """A DuckDB connection proxy that refuses SQL `SqlGuard` refuses (see module docstring)."""

    __slots__ = ("_invoke", "_guard")

    def __init__(self, conn: Any, guard: SqlGuard) -> None:
        if isinstance(conn, GuardedConnection | GuardedRelation):
            raise TypeError("the connection is already guarded")
        object.__setattr__(self, "_invoke", _invoker(conn, guard))
        object.__setattr__(self, "_guard", guard)

    @classmethod
    def for_lake(cls, conn: Any, resolved: Any) -> GuardedConnection:
        return cls(conn, SqlGuard.for_lake(resolved))

    @property
    def guard(self) -> SqlGuard:
        return self._guard

    def _sql(self, name: str, query: Any, *args: Any, **kwargs: Any) -> Any:
        text = _text(query)
        if self._guard.check(text) and self._guard.own is not None:
            verify_own_deletions(self._guard.own, self._fetch)
        return self._invoke(self, name, text, *args, **kwargs)

    def _fetch(self, sql: str) -> list[tuple]:
        """Rows of a query the guard itself runs on this connection (never user SQL)."""
        self._invoke(self, "execute", sql)
        return self._invoke(self, "fetchall")

    def _read_files(self, name: str, *args: Any, **kwargs: Any) -> Any:
        for path in _strings(_first(args, kwargs, "path_or_buffer", "file_glob", "file_name")):
            self._guard.files.check_read(path, expand=True)
        return self._invoke(self, name, *args, **kwargs)

    read_csv = functools.partialmethod(_read_files, "read_csv")
    read_json = functools.partialmethod(_read_files, "read_json")
    read_parquet = functools.partialmethod(_read_files, "read_parquet")
    from_csv_auto = functools.partialmethod(_read_files, "from_csv_auto")
    from_parquet = functools.partialmethod(_read_files, "from_parquet")

    def append(self, table_name: str, *args: Any, **kwargs: Any) -> Any:
        self._guard.check_table_name(table_name)
        return self._invoke(self, "append", table_name, *args, **kwargs)

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        return self._sql("execute", query, *args, **kwargs)

    def executemany(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        return self._sql("executemany", query, *args, **kwargs)

    def sql(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        return self._sql("sql", query, *args, **kwargs)

    def query(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        return self._sql("query", query, *args, **kwargs)

    def from_query(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        return self._sql("from_query", query, *args, **kwargs)

    def get_table_names(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        return self._sql("get_table_names", query, *args, **kwargs)

    def extract_statements(self, query: str) -> Any:
        return self._invoke(self, "extract_statements", query)

    def table_function(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self._guard.check_function_name(name)
        if name.lower().rsplit(".", 1)[-1] in READ_FUNCTIONS:
            for value in [*args, *kwargs.values()]:
                for path in _strings(value):
                    self._guard.files.check_read(path, expand=True)
        return self._invoke(self, "table_function", name, *args, **kwargs)

    def cursor(self) -> GuardedConnection:
        return self._invoke(self, "cursor")

    def duplicate(self) -> GuardedConnection:
        return self._invoke(self, "duplicate")

    def checkpoint(self) -> GuardedConnection:
        if self._guard.fork_mode:
            raise AncestorMaintenanceError(
                f"checkpoint() in a fork checkpoints the ancestors too; run CHECKPOINT {self._guard.alias} instead"
            )
        return self._invoke(self, "checkpoint")

    def load_extension(self, *args: Any, **kwargs: Any) -> None:
        raise ExtensionStatementError("extensions are loaded by the project, not by user code")

    install_extension = load_extension

    def __getattr__(self, name: str) -> Any:
        if name not in _PASS_THROUGH:
            raise GuardedMethodError(f"{name!r} is not available on a guarded DuckDB connection (not reviewed for SQL)")
        if not self._invoke.is_method(name):
            return self._invoke(self, name)
        return functools.partial(self._invoke, self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise GuardedMethodError("a guarded DuckDB connection cannot be modified")

    def __enter__(self) -> GuardedConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self._invoke(self, "close")

    def __repr__(self) -> str:
        return f"GuardedConnection(alias={self._guard.alias!r}, fork={self._guard.fork_mode})"


class GuardedRelation:
    """A `DuckDBPyRelation` whose string arguments are checked; `query(name, sql)` fully."""

    __slots__ = ("_invoke", "_guard")

    def __init__(self, rel: duckdb.DuckDBPyRelation, guard: SqlGuard) -> None:
        object.__setattr__(self, "_invoke", _invoker(rel, guard))
        object.__setattr__(self, "_guard", guard)

    def query(self, virtual_table_name: str, sql_query: str) -> Any:
        self._guard.check(sql_query)
        return self._invoke(self, "query", virtual_table_name, sql_query)

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if name in _FILE_WRITERS:
            target = _first(args, kwargs, "file_name")
            if not isinstance(target, str):
                raise SqlGuardError(f"{name}() needs a file name (a str) on a guarded relation")
            self._guard.files.check_write(target, f"{name}()")
            if isinstance(kwargs.get("filename_pattern"), str):
                safe_file_name_part(kwargs["filename_pattern"], "filename_pattern")
            args, kwargs = args[1:], {k: v for k, v in kwargs.items() if k != "file_name"}
            return self._invoke(self, name, target, *args, **kwargs)
        if name in _TABLE_WRITERS:
            table = _first(args, kwargs, "table_name", "view_name")
            if isinstance(table, str):
                self._guard.check_table_name(table)
        elif name in _ROW_WRITERS:
            self._guard.check_table_name(self._invoke(self, "sql_query"))
        for value in [*args, *kwargs.values()]:
            for item in _strings(value):
                self._guard.check_fragment(item)
        return self._invoke(self, name, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise GuardedMethodError(f"{name!r} is not available on a guarded relation")
        if not self._invoke.is_method(name):
            return self._invoke(self, name)
        return functools.partial(self._call, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise GuardedMethodError("a guarded relation cannot be modified")

    def __len__(self) -> int:
        return self._invoke(self, "__len__")

    def __repr__(self) -> str:
        return self._invoke(self, "__repr__")

    def __str__(self) -> str:
        return self._invoke(self, "__str__")
