"""The one place that opens and configures DuckDB connections.

DuckDB cannot download extensions on the machines this project runs on, and a silent download
attempt is exactly the surprise we refuse. Every connection in the project (including the ones
dbt-duckdb opens, through `dpone_dagster.lake.dbt_plugin`) goes through `connect()` or
`configure()`, which:

- point `extension_directory` at a project-local folder (never `~/.duckdb`),
- turn off `autoinstall_known_extensions` and `autoload_known_extensions`,
- `LOAD` each needed extension from its PyPI wheel file
  (`site-packages/duckdb_extension_<name>/extensions/v<duckdb>/<name>.duckdb_extension`).

A connection starts with `ducklake` only (`DEFAULT_EXTENSIONS`). `postgres_scanner` and `httpfs`
cost a signature check each (~0.1-0.2 s per connection) and are loaded on demand by
`load_extensions`: `ResolvedLake.apply` loads what its plan needs (a PostgreSQL catalog, an S3 data
path) before its first statement, so a lake that uses neither never pays for them.

What a reader could get wrong: `postgres_scanner` must be loaded *before* a DuckLake with a
PostgreSQL catalog is attached (autoload is off, so nothing else would load it); SQL that attaches a
PostgreSQL catalog or reads S3 on a `connect()` connection without going through a resolved lake
must ask for those extensions itself (`connect(extensions=resolved.extensions)` or
`load_extensions`). The extension directory is only a place DuckDB would install into; we never
install, we load by absolute path.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import duckdb

from dpone_dagster.errors import LakeError

DUCKDB_VERSION = duckdb.__version__
DEFAULT_EXTENSIONS: tuple[str, ...] = ("ducklake",)
ON_DEMAND_EXTENSIONS: tuple[str, ...] = ("postgres_scanner", "httpfs")
_WHEEL_PACKAGE = {
    "ducklake": "duckdb_extension_ducklake",
    "postgres_scanner": "duckdb_extension_postgres_scanner",
    "httpfs": "duckdb_extension_httpfs",
}


class ExtensionMissingError(LakeError):
    code = "lake.extension_missing"


def extension_path(name: str) -> Path:
    """Absolute path of the extension binary shipped in the `duckdb-extension-<name>` wheel."""
    package = _WHEEL_PACKAGE.get(name)
    if package is None:
        raise ExtensionMissingError(f"extension {name!r} is not one the project ships")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ExtensionMissingError(f"the wheel for DuckDB extension {name!r} is not installed (pip package {package})")
    root = Path(next(iter(spec.submodule_search_locations)))
    path = root / "extensions" / f"v{DUCKDB_VERSION}" / f"{name}.duckdb_extension"
    if not path.is_file():
        raise ExtensionMissingError(
            f"the wheel for DuckDB extension {name!r} has no binary for duckdb {DUCKDB_VERSION}"
        )
    return path


def default_extension_directory() -> Path:
    """Project-local extension directory: `<state dir>/duckdb_extensions`."""
    from dpone_dagster.config import load_config

    return load_config().state_path / "duckdb_extensions"


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def configure(
    conn: duckdb.DuckDBPyConnection,
    *,
    extensions: Iterable[str] = DEFAULT_EXTENSIONS,
    extension_directory: Path | None = None,
) -> duckdb.DuckDBPyConnection:
    """Make an existing connection offline-safe and load the wanted extensions from wheels."""
    directory = extension_directory or default_extension_directory()
    directory.mkdir(parents=True, exist_ok=True)
    conn.execute(f"SET extension_directory = {_sql_string(str(directory))}")
    conn.execute("SET autoinstall_known_extensions = false")
    conn.execute("SET autoload_known_extensions = false")
    return load_extensions(conn, extensions)


def load_extensions(conn: duckdb.DuckDBPyConnection, extensions: Iterable[str]) -> duckdb.DuckDBPyConnection:
    """Load each of `extensions` not yet loaded on `conn`, from its wheel (one query when all are)."""
    wanted = tuple(extensions)
    if not wanted:
        return conn
    loaded = {row[0] for row in conn.execute("SELECT extension_name FROM duckdb_extensions() WHERE loaded").fetchall()}
    for name in wanted:
        if name in loaded:
            continue
        conn.execute(f"LOAD {_sql_string(str(extension_path(name)))}")
    return conn


def connect(
    database: str | os.PathLike[str] = ":memory:",
    *,
    read_only: bool = False,
    extensions: Iterable[str] = DEFAULT_EXTENSIONS,
    extension_directory: Path | None = None,
    settings: Mapping[str, object] | None = None,
) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB connection with autoinstall off and extensions loaded from their wheels."""
    directory = extension_directory or default_extension_directory()
    directory.mkdir(parents=True, exist_ok=True)
    config: dict[str, object] = {
        "extension_directory": str(directory),
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
    }
    config.update(settings or {})
    conn = duckdb.connect(str(database), read_only=read_only, config=config)
    try:
        return configure(conn, extensions=extensions, extension_directory=directory)
    except Exception:
        conn.close()
        raise
