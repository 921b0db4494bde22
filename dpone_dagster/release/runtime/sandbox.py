"""The DuckDB connection the synthetic runtime runs delivered SQL on: it can reach its own lake and nothing else.

`sandbox_connection(lake_dir)` opens an in-memory DuckDB and, before any statement of a task runs,
sets (in this order, because DuckDB refuses to widen `allowed_directories` once external access is
off): the temp directory inside the lake, `allowed_directories` = the lake directory only,
`enable_external_access = false` (no file outside the allowed directories, no extension install or
load, no replacement scan of a host file), then `lock_configuration = true`, so no statement can
undo any of it. Extension autoloading and autoinstalling are off from the start. `SANDBOX_SETTINGS`
lists what a locked sandbox reports; `sandbox_settings(conn)` reads them back.

What a reader could get wrong: this is the floor below the SQL reader (`release.build.flow_sql`),
not a replacement for it. It holds even for SQL the reader never saw (a hand-made synthetic release,
a bug in the reader): `COPY … TO '/elsewhere'`, `ATTACH '/elsewhere/x.duckdb'`, `read_text('/etc/…')`
and `INSTALL` fail with DuckDB's permission error. Writing *inside* the lake stays possible: that is
the synthetic runtime's own data. Kernel confinement of the process (Landlock) would be a further
floor; this module does not provide it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

TEMP_SUBDIRECTORY = ".tmp"
SANDBOX_SETTINGS = {
    "enable_external_access": "false",
    "lock_configuration": "true",
    "autoload_known_extensions": "false",
    "autoinstall_known_extensions": "false",
    "allow_community_extensions": "false",
}
"""What `duckdb_settings()` reports on a sandbox connection (besides `allowed_directories`)."""


def sandbox_connection(lake_dir: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory connection confined to `lake_dir` and locked (see the module docstring)."""
    import duckdb

    lake = Path(lake_dir).absolute()
    allowed = sorted({f"{lake}/", f"{lake.resolve()}/"})
    conn = duckdb.connect(
        ":memory:",
        config={"autoload_known_extensions": False, "autoinstall_known_extensions": False, "allow_community_extensions": False},
    )
    try:
        conn.execute("SET temp_directory = ?", [str(lake / TEMP_SUBDIRECTORY)])
        conn.execute("SET allowed_directories = ?", [allowed])
        conn.execute("SET enable_external_access = false")
        conn.execute("SET lock_configuration = true")
    except BaseException:
        conn.close()
        raise
    return conn


def sandbox_settings(conn: Any) -> dict[str, Any]:
    """The sandbox-relevant settings of `conn` as DuckDB reports them; `allowed_directories` as a list."""
    rows = conn.execute("SELECT name, value FROM duckdb_settings() WHERE name IN (SELECT unnest(?))", [list(SANDBOX_SETTINGS)]).fetchall()
    allowed = conn.execute("SELECT current_setting('allowed_directories')").fetchone()[0]
    return {**dict(rows), "allowed_directories": list(allowed)}
