"""Test lakes (the embedded default; PostgreSQL catalog + moto S3) and helpers that use them.

Tables are materialized with plain SQL through the resolved attach, exactly like a managed
materialize: target attach (with the table as a target), CREATE OR REPLACE TABLE, tracking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dpone_dagster.config import DponeConfig, LakeConfig, StorageConfig, load_config


@dataclass(frozen=True)
class LakeEnv:
    """One test lake setup: the config plus ways to look at its physical storage."""

    kind: str
    config: DponeConfig
    list_files: Callable[[str], list[str]]
    s3_bucket: str | None = None

    @property
    def lake(self) -> LakeConfig:
        return self.config.lake("main")


def embedded_env(state_dir: Path) -> LakeEnv:
    base = load_config()
    lake = base.embedded_main_lake().model_copy(update={"attach_args": {"DATA_INLINING_ROW_LIMIT": 0}})
    config = base.model_copy(update={"lakes": (lake,)})

    def list_files(prefix: str) -> list[str]:
        root = Path(prefix)
        return sorted(str(p) for p in root.rglob("*") if p.is_file()) if root.exists() else []

    return LakeEnv("embedded", config, list_files)


def pg_s3_env(postgres_server, database: str, s3_server, bucket: str) -> LakeEnv:
    base = load_config()
    lake = LakeConfig(
        name="main",
        catalog="postgres:" + postgres_server.dsn(database),
        data_path=f"s3://{bucket}/lakes/main/",
        storage=StorageConfig(
            endpoint=s3_server.endpoint,
            url_style="path",
            use_ssl=False,
            region=s3_server.region,
            key_id_env="DPONE_TEST_S3_KEY_ID",
            secret_env="DPONE_TEST_S3_SECRET",
        ),
        attach_args={"DATA_INLINING_ROW_LIMIT": 0},
    )
    config = base.model_copy(update={"lakes": (lake,), "control_store_url": postgres_server.url(database)})

    def list_files(prefix: str) -> list[str]:
        assert prefix.startswith(f"s3://{bucket}/")
        key_prefix = prefix[len(f"s3://{bucket}/") :]
        return [f"s3://{bucket}/{k}" for k in s3_server.keys(bucket, key_prefix)]

    return LakeEnv("pg_s3", config, list_files, s3_bucket=bucket)


def incarnation(env: LakeEnv, workspace_id: str) -> str:
    """The current incarnation of a fork id (`""` for one that never had an incarnation row)."""
    from dpone_dagster.control.store import open_store
    from dpone_dagster.control.workspace_tables import incarnation_state

    with open_store(env.config.control_store).connect() as conn:
        found = incarnation_state(conn, workspace_id)
    return found[0] if found else ""


def fork_schema(env: LakeEnv, workspace_id: str, lake: str = "main") -> str:
    from dpone_dagster.lake.resolution.naming import fork_metadata_schema

    return fork_metadata_schema(workspace_id, lake, incarnation(env, workspace_id))


def fork_prefix(env: LakeEnv, workspace_id: str) -> str:
    from dpone_dagster.lake.resolution.attach import absolute_data_path
    from dpone_dagster.lake.resolution.naming import fork_storage_prefix

    parent = absolute_data_path(env.lake.data_path, env.config.project_root)
    return fork_storage_prefix(workspace_id, parent, incarnation(env, workspace_id))


_POOL: dict[tuple[str, ...], object] = {}


def _reset(conn) -> None:
    try:
        conn.execute("ROLLBACK")
    except Exception:
        pass
    conn.execute("USE memory")
    names = conn.execute(
        "SELECT database_name FROM duckdb_databases() WHERE NOT internal AND database_name <> 'memory'"
    ).fetchall()
    for (name,) in names:
        conn.execute(f'DETACH DATABASE IF EXISTS "{name}"')
    for (name,) in conn.execute("SELECT name FROM duckdb_secrets() WHERE NOT persistent").fetchall():
        conn.execute(f'DROP TEMPORARY SECRET "{name}"')


@contextmanager
def attached(env: LakeEnv, workspace: str, *, targets=()) -> Iterator:
    """A connection with `main` attached as `workspace` resolves it.

    Loading extensions costs about a second per new DuckDB instance (signature checks), so tests
    reuse one instance per extension set and detach everything (and drop secrets) after each use,
    which is what a long-lived dbt-duckdb or Dagster process does between runs as well.
    """
    from dpone_dagster.lake.duck import connect
    from dpone_dagster.lake.resolution.seam import resolve

    resolved = resolve(workspace, "main", config=env.config, targets=targets)
    conn = _POOL.get(resolved.extensions)
    if conn is None:
        conn = _POOL[resolved.extensions] = connect(extensions=resolved.extensions)
    try:
        resolved.apply(conn)
        yield conn
    finally:
        _reset(conn)


def run_sql(env: LakeEnv, workspace: str, sql: str | list[str], *, targets=(), fetch: str | None = None):
    """Attach `main` as `workspace` resolves it, run `sql`, optionally fetch one query's rows."""
    with attached(env, workspace, targets=targets) as conn:
        for statement in [sql] if isinstance(sql, str) else sql:
            conn.execute(statement)
        return conn.execute(fetch).fetchall() if fetch else None


def rows(env: LakeEnv, workspace: str, sql: str):
    """`sql`'s rows, read in `workspace` (no target, so its defer views stay as they are)."""
    return run_sql(env, workspace, [], fetch=sql)


def current_snapshot(env: LakeEnv, workspace: str = "prod") -> int:
    return rows(env, workspace, "SELECT id FROM lake_main.current_snapshot()")[0][0]


def materialize(env: LakeEnv, workspace: str, table: str, select_sql: str, *, status: str = "materialized") -> int:
    """A managed materialize with plain SQL: target attach, CREATE OR REPLACE TABLE, tracking."""
    from dpone_dagster.lake.resolution.pins import fork_session_snapshots
    from dpone_dagster.lake.resolution.plan import TableName
    from dpone_dagster.lake.state.tracking import record_materialization

    name = TableName.parse(table)
    with attached(env, workspace, targets=[table]) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS lake_main.{name.schema}")
        conn.execute(f"CREATE OR REPLACE TABLE lake_main.{name.schema}.{name.table} AS {select_sql}")
        columns = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = "
            "'lake_main' AND table_schema = ? AND table_name = ? ORDER BY ordinal_position",
            [name.schema, name.table],
        ).fetchall()
        snapshot = conn.execute("SELECT max(snapshot_id) FROM lake_main.snapshots()").fetchone()[0]
        read = fork_session_snapshots(conn, workspace, "main", env.config)  # provenance (lake/resolution/pins.py)
    record_materialization(
        workspace,
        "main",
        name.schema,
        name.table,
        status=status,
        snapshot_id=snapshot,
        columns=columns,
        config=env.config,
        built_from=read,
    )
    return snapshot


@dataclass(frozen=True)
class LakeFingerprint:
    """Everything that must never change in a parent: its snapshots, catalog files and stored files."""

    snapshots: tuple
    catalog_files: tuple
    stored_files: tuple


def fingerprint(env: LakeEnv, workspace: str = "prod") -> LakeFingerprint:
    from dpone_dagster.lake.resolution.seam import resolve

    resolved = resolve(workspace, "main", config=env.config)
    # a PostgreSQL fork's catalog tables live in its own schema (the default one is its root's)
    schema = f"{resolved.namespace}." if resolved.fork_mode and resolved.catalog.kind == "postgres" else ""
    with attached(env, workspace) as conn:
        snapshots = conn.execute(
            "SELECT snapshot_id, schema_version, changes::VARCHAR FROM lake_main.snapshots() ORDER BY 1"
        ).fetchall()
        files = conn.execute(
            f"SELECT path FROM __ducklake_metadata_lake_main.{schema}ducklake_data_file ORDER BY 1"
        ).fetchall()
    data_path = resolved.data_path
    return LakeFingerprint(tuple(snapshots), tuple(files), tuple(env.list_files(data_path)))


def set_lake_settings(env: LakeEnv, workspace: str, settings: LakeConfig) -> None:
    """Simulate settings drift: overwrite a fork's stored copy of the `main` lake settings."""
    from dpone_dagster.control.store import open_store
    from dpone_dagster.control.workspace_tables import workspace_lake

    with open_store(env.config.control_store).begin() as conn:
        conn.execute(
            workspace_lake.update()
            .where(workspace_lake.c.workspace_id == workspace, workspace_lake.c.lake == settings.name)
            .values(settings=settings.model_dump_json())
        )


def fork_places(env: LakeEnv, workspace_id: str) -> tuple[list[str], list[str]]:
    """Every catalog namespace and data file of ANY incarnation of `workspace_id` (lake `main`):
    (fork schemas or sibling catalog files, data files under its `__wm_forks/` segments)."""
    from dpone_dagster.lake.resolution.attach import absolute_data_path, catalog_location
    from dpone_dagster.lake.resolution.naming import FORK_DATA_DIR, is_fork_segment_of, mangle, split_storage_root

    stem = f"wm_fork_{mangle(workspace_id, 24)}_main_"
    catalog = catalog_location(env.lake, env.config.project_root)
    if catalog.kind == "postgres":
        import psycopg

        with psycopg.connect(catalog.target) as conn:
            rows = conn.execute("SELECT schema_name FROM information_schema.schemata").fetchall()
        namespaces = sorted(r[0] for r in rows if r[0].startswith(stem))
    else:
        namespaces = sorted(p.name for p in Path(catalog.target).parent.glob(stem + "*"))
    root, _ = split_storage_root(absolute_data_path(env.lake.data_path, env.config.project_root))
    base = f"{root}/{FORK_DATA_DIR}/"
    files = [f for f in env.list_files(base) if is_fork_segment_of(workspace_id, f[len(base) :].split("/", 1)[0])]
    return namespaces, files


def run_error_text(result) -> str:
    """Every error text a Dagster run's events carry (resource init, step and run failures, with causes)."""
    texts = []
    for event in result.all_events:
        data = event.event_specific_data
        error = getattr(data, "error", None) or getattr(getattr(data, "step_failure_data", None), "error", None)
        while error is not None:
            texts.append(error.message)
            error = error.cause
    return "\n".join(texts)


def create_prod_tables(config: DponeConfig, tables: Sequence[str]) -> int:
    """Create each `schema.table` of `tables` (3 rows) in prod's `main` lake in one session, through
    the resolved attach with the tables as targets; returns the lake's snapshot after the last one.
    Tracking rows are the caller's (tests differ in what they record)."""
    from dpone_dagster.lake.duck import connect
    from dpone_dagster.lake.resolution.seam import resolve

    resolved = resolve("prod", "main", config=config, targets=list(tables))
    conn = connect(extensions=resolved.extensions)
    try:
        resolved.apply(conn)
        for schema in sorted({name.split(".")[0] for name in tables}):
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS lake_main.{schema}")
        for name in tables:
            conn.execute(f"CREATE OR REPLACE TABLE lake_main.{name} AS SELECT range AS id FROM range(3)")
        return conn.execute("SELECT max(snapshot_id) FROM lake_main.snapshots()").fetchone()[0]
    finally:
        conn.close()
