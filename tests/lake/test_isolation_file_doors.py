"""Issue 19's reproductions, each on a real fork of both backends: refused through the guarded doors,
the parent unchanged; and the very same SQL on the raw connection changes the parent (so the test
fails on the code before the guard's file rules, and the attack is real on DuckLake 1.5.5).

Backends: the embedded default (DuckDB-file catalog, local files) and PostgreSQL 15 + moto S3 (the
fork reached through its provisioned roles; no read-only/fork S3 keys, so below the guard nothing
stops these writes — `test_readonly_ancestors.py` is the variant where S3 refuses them too). The
parent's state is its data files (names and sha256 of their bytes) and every row of its catalog's
`ducklake_*` tables (plus the catalog file's sha256 on the embedded default).

Numbers are the issue's: 1 COPY over a parent data file, 2 COPY over the parent's catalog file,
3 a parent file planted in the fork's own deletion list then `ducklake_cleanup_old_files` on the own
alias, 4 `write_parquet` of a guarded relation, 7 COPY to a new name / EXPORT DATABASE into the
parent's data folder, and the credential reads (`duckdb_databases()`, `postgres_scan` of the role
table).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest

from dpone_dagster.lake.guard.connection import GuardedConnection
from dpone_dagster.lake.guard.lexer import SqlGuardError
from dpone_dagster.lake.resolution.naming import FORK_DATA_DIR
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.workspaces.service import Workspaces

from .lakes import LakeEnv, attached, materialize, run_sql

FORK = "wm-fork-files"
WRITE, META, CLEANUP, FOREIGN = (
    "lake.file_write_outside_namespace", "lake.metadata_write", "lake.cleanup_outside_namespace",
    "lake.foreign_database",
)  # fmt: skip


def read_bytes(env: LakeEnv, path: str, s3=None) -> bytes:
    if path.startswith("s3://"):
        bucket, key = path[len("s3://") :].split("/", 1)
        return s3.client().get_object(Bucket=bucket, Key=key)["Body"].read()
    return Path(path).read_bytes()


def catalog_rows(env: LakeEnv, postgres=None) -> tuple:
    """Every row of every `ducklake_*` table of the parent's catalog (and the embedded file's sha256)."""
    parent = resolve("prod", "main", config=env.config)
    if parent.catalog.kind == "postgres":
        import psycopg

        with psycopg.connect(parent.catalog.target, autocommit=True) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'ducklake%%' ORDER BY 1"
            )]  # fmt: skip
            return tuple(
                (t, tuple(sorted(map(repr, conn.execute(f'SELECT * FROM public."{t}"').fetchall())))) for t in tables
            )
    catalog = Path(parent.catalog.target)
    conn = duckdb.connect(str(catalog), read_only=True)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'ducklake_%' ORDER BY 1"
        ).fetchall()]  # fmt: skip
        rows = tuple((t, tuple(conn.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall())) for t in tables)
    finally:
        conn.close()
    return (hashlib.sha256(catalog.read_bytes()).hexdigest(), rows)


def parent_state(env: LakeEnv, s3=None) -> tuple:
    """(data files as (name, sha256) outside `__wm_forks/`, catalog rows)."""
    parent = resolve("prod", "main", config=env.config)
    files = tuple(
        (path, hashlib.sha256(read_bytes(env, path, s3)).hexdigest())
        for path in env.list_files(parent.data_path)
        if f"/{FORK_DATA_DIR}/" not in path
    )
    assert files
    return files, catalog_rows(env)


@pytest.fixture
def forked(lake_env, request):
    """prod with garbage files and many small ones; a fork of it; (env, s3 or None, resolved fork)."""
    env = lake_env
    materialize(env, "prod", "orders", "SELECT 1 AS id")
    materialize(env, "prod", "orders", "SELECT range AS id FROM range(5)")
    run_sql(env, "prod", [f"INSERT INTO lake_main.main.orders SELECT range FROM range({i}, {i + 5})" for i in (5, 10)])
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    s3 = request.getfixturevalue("s3_server") if env.kind == "pg_s3" else None
    return env, s3, resolve(FORK, "main", config=env.config)


def _parent_file(env: LakeEnv) -> str:
    parent = resolve("prod", "main", config=env.config)
    return next(p for p in env.list_files(parent.data_path) if p.endswith(".parquet") and f"/{FORK_DATA_DIR}/" not in p)


def _refused_then_real(env, s3, resolved, sql: str | list[str], code: str, *, relation: bool = False) -> tuple:
    """Guarded: refused with `code`, parent unchanged. Raw: run it; return (before, after)."""
    statements = [sql] if isinstance(sql, str) else sql
    before = parent_state(env, s3)
    with attached(env, FORK) as raw:
        guarded = GuardedConnection.for_lake(raw, resolved)
        with pytest.raises(SqlGuardError) as caught:
            if relation:
                guarded.sql("SELECT 7 AS id").write_parquet(statements[0])
            else:
                for statement in statements:
                    guarded.execute(statement)
        assert caught.value.code == code, statements
    assert parent_state(env, s3) == before
    with attached(env, FORK) as raw:
        if relation:
            raw.sql("SELECT 7 AS id").write_parquet(statements[0])
        else:
            for statement in statements:
                raw.execute(statement)
    return before, parent_state(env, s3)


def test_1_copy_over_a_parent_data_file(forked):
    env, s3, resolved = forked
    target = _parent_file(env)
    before, after = _refused_then_real(
        env, s3, resolved, f"COPY (SELECT 42 AS id) TO '{target}' (FORMAT parquet)", WRITE
    )
    assert dict(after[0])[target] != dict(before[0])[target], "unguarded, the COPY no longer overwrites"


def test_2_copy_over_the_parent_catalog_file(embedded_lake):
    materialize(embedded_lake, "prod", "orders", "SELECT 1 AS id")
    Workspaces(embedded_lake.config).create_fork(FORK, "prod", owner="alice")
    resolved = resolve(FORK, "main", config=embedded_lake.config)
    catalog = resolve("prod", "main", config=embedded_lake.config).catalog.target
    before = hashlib.sha256(Path(catalog).read_bytes()).hexdigest()
    with attached(embedded_lake, FORK) as raw:
        with pytest.raises(SqlGuardError) as caught:
            GuardedConnection.for_lake(raw, resolved).execute(f"COPY (SELECT 'x' AS junk) TO '{catalog}' (FORMAT csv)")
        assert caught.value.code == WRITE
        assert hashlib.sha256(Path(catalog).read_bytes()).hexdigest() == before
        raw.execute(f"COPY (SELECT 'x' AS junk) TO '{catalog}' (FORMAT csv)")
    assert Path(catalog).read_bytes().startswith(b"junk"), "unguarded, the catalog is no longer replaced"


def test_3_a_planted_deletion_and_the_own_cleanup(forked):
    env, s3, resolved = forked
    target = _parent_file(env)
    schema = resolved.namespace if resolved.catalog.kind == "postgres" else "main"
    plant = (
        f"INSERT INTO __ducklake_metadata_lake_main.{schema}.ducklake_files_scheduled_for_deletion "
        f"VALUES (999999, '{target}', false, TIMESTAMPTZ '2000-01-01')"
    )
    cleanup = "CALL ducklake_cleanup_old_files('lake_main', cleanup_all => true)"
    # the plant itself is refused (the metadata catalog is read-only to user SQL) ...
    before, planted = _refused_then_real(env, s3, resolved, plant, META)
    assert planted == before  # (a row in the fork's own catalog: the parent is still whole)
    # ... and with the row planted anyway (below the guard), the own cleanup is refused too
    after = _refused_then_real(env, s3, resolved, cleanup, CLEANUP)[1]
    assert target not in dict(after[0]), "unguarded, the fork's cleanup no longer deletes the parent's file"


def test_own_maintenance_still_runs_when_its_lists_are_its_own(forked):
    env, s3, resolved = forked
    before = parent_state(env, s3)
    with attached(env, FORK, targets=["mine"]) as raw:
        guarded = GuardedConnection.for_lake(raw, resolved)
        guarded.execute("CREATE TABLE lake_main.main.mine AS SELECT 1 AS a")
        guarded.execute("CREATE OR REPLACE TABLE lake_main.main.mine AS SELECT 2 AS a")
        guarded.execute("CALL ducklake_expire_snapshots('lake_main', older_than => now())")
        guarded.execute("CALL ducklake_cleanup_old_files('lake_main', cleanup_all => true)")
        guarded.execute("CHECKPOINT lake_main")
        assert guarded.execute("SELECT a FROM lake_main.main.mine").fetchall() == [(2,)]
    assert parent_state(env, s3) == before


def test_4_write_parquet_of_a_guarded_relation(forked):
    env, s3, resolved = forked
    target = _parent_file(env)
    before, after = _refused_then_real(env, s3, resolved, target, WRITE, relation=True)
    assert dict(after[0])[target] != dict(before[0])[target], "unguarded, write_parquet no longer overwrites"


@pytest.mark.parametrize("door", ["copy", "export"])
def test_7_new_files_in_the_parent_data_folder(forked, door):
    env, s3, resolved = forked
    folder = resolve("prod", "main", config=env.config).data_path.rstrip("/")
    sql = (
        f"COPY (SELECT 1 AS id) TO '{folder}/main/orders/stray.parquet' (FORMAT parquet)" if door == "copy"
        else ["CREATE OR REPLACE TABLE memory.main.t AS SELECT 1 AS id", ("EXPORT DATABASE memory TO "
f"'{folder}/exported'")]
    )  # fmt: skip
    before, after = _refused_then_real(env, s3, resolved, sql, WRITE)
    assert len(after[0]) > len(before[0]), "unguarded, no stray file appears in the parent's folder"


def test_the_fork_writes_files_into_its_own_prefix(forked):
    env, s3, resolved = forked
    before = parent_state(env, s3)
    own = resolved.data_path.rstrip("/")
    with attached(env, FORK) as raw:
        guarded = GuardedConnection.for_lake(raw, resolved)
        guarded.execute(f"COPY (SELECT 1 AS id) TO '{own}/export-one.parquet' (FORMAT parquet)")
        guarded.sql("SELECT 2 AS id").write_parquet(f"{own}/export-two.parquet")
        assert guarded.execute(f"SELECT sum(id) FROM read_parquet('{own}/export-*.parquet')").fetchone() == (3,)
    assert parent_state(env, s3) == before


def test_credentials_are_never_readable_from_the_fork_sql(pg_s3_lake, postgres_server, pg_database):
    """#credentials: no role password in `duckdb_databases()`, the plan or the stored rows; the
    control store's role table cannot be scanned from user SQL."""
    from dpone_dagster.lake.lifecycle.roles import fork_roles, read_password
    from dpone_dagster.lake.resolution.attach import catalog_location

    env = pg_s3_lake
    materialize(env, "prod", "orders", "SELECT 1 AS id")
    Workspaces(env.config).create_fork(FORK, "prod", owner="alice")
    resolved = resolve(FORK, "main", config=env.config)
    roles = fork_roles(catalog_location(env.lake, env.config.project_root), resolved.namespace)
    passwords = [read_password(env.config.control_store, r) for r in (roles.writer, roles.reader)]
    assert all(len(p) > 20 for p in passwords)
    scan = (
        f"SELECT role_name, password FROM postgres_scan('{postgres_server.dsn(pg_database)}', "
        "'public', 'lake_catalog_role')"
    )
    with attached(env, FORK) as raw:
        guarded = GuardedConnection.for_lake(raw, resolved)
        shown = " ".join(str(r) for r in guarded.execute("SELECT * FROM duckdb_databases()").fetchall())
        assert roles.writer in shown and roles.reader in shown  # the attaches are there, as the roles
        with pytest.raises(SqlGuardError) as caught:
            guarded.execute(scan)
        assert caught.value.code == FOREIGN
        for refused in ("SELECT * FROM duckdb_secrets()", "SELECT * FROM which_secret('x', 'postgres')"):
            with pytest.raises(SqlGuardError):
                guarded.execute(refused)
        stored = dict(raw.execute(scan).fetchall())  # below the guard: what the table holds
    plan = "\n".join(resolved.statements())
    for password in passwords:
        assert password not in shown and password not in plan
        assert password not in " ".join(v or "" for v in stored.values())
    assert all(stored[r].startswith("fernet1:") for r in (roles.writer, roles.reader))
