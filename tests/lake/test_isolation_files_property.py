"""Isolation as a property, on both backends: random sequences of file doors, maintenance calls, quoted
ATTACH forms and run-config overrides, taken from a fork through the project's real doors, never
change the parent; the fork's own file writes and maintenance keep working in between.

Backends: the embedded default (DuckDB-file catalog, local files) and PostgreSQL 15 + an
IAM-enforcing moto S3 whose keys are the owner's, a read-only one and the fork's (the `ro_lake`
setup of `test_readonly_ancestors.py`; this process is given that lake through `DPONE_CONFIG`, so
the resource and the CLI resolve it like a deployment would). Doors: the connection
`DuckLakeResource.connect()` yields (SQL and a relation's `write_parquet`), `dpone lake sql <fork>
main -e` (CliRunner), and an in-process Dagster materialization with run config naming the parent.
Attacks: COPY over a parent file, to a new name in the parent's folder, over the catalog file;
EXPORT DATABASE into the parent's folder; each target spelled `'…'`, `$$…$$`, `E'…'`, `"…"`,
`file://…` or through `..` out of the fork's own prefix, and a `FILENAME_PATTERN` escaping it;
`write_parquet` over a parent file; a row planted in the fork's own metadata catalog; reads of
other databases (`postgres_scan` of the control store, `read_duckdb`/`read_blob` of the catalog);
DuckLake maintenance on the ancestor alias; ATTACH of the parent quoted every way. After EVERY step
the parent's catalog (rows of every `ducklake_*` table; on the embedded default also the file's
sha256) and its data files (name + sha256) are what they were before the example.

What a reader could get wrong: the baseline is re-taken at the start of each example, so a failing
example is the sequence that broke the parent. Examples are bounded (derandomized, a handful of
short sequences) to stay under a minute per backend on a quiet machine.
"""

from __future__ import annotations

import hashlib
import os
import posixpath

import pytest
import yaml
from dagster import DagsterInvalidConfigError, MaterializeResult, asset, materialize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dpone_dagster.config import load_config
from dpone_dagster.control.store import reset_store_cache
from dpone_dagster.integration.lake.resources import DuckLakeResource
from dpone_dagster.lake.guard.lexer import SqlGuardError
from dpone_dagster.lake.resolution.naming import FORK_DATA_DIR, ancestor_alias
from dpone_dagster.lake.resolution.seam import resolve
from dpone_dagster.workspaces.service import Workspaces

from .lakes import LakeEnv, run_sql
from .lakes import materialize as managed_materialize
from .test_isolation_file_doors import parent_state
from .test_readonly_ancestors import FORK as IAM_FORK
from .test_readonly_ancestors import _build_parent, _catalog_rows, auth_s3, ro_lake  # noqa: F401 (fixtures)

WRITE, META, FOREIGN = "lake.file_write_outside_namespace", "lake.metadata_write", "lake.foreign_database"
MAINT, ATTACH = "lake.ancestor_maintenance", "lake.unmanaged_attach"
ANC = ancestor_alias("main", "prod")


@asset
def fork_orders(ducklake: DuckLakeResource) -> MaterializeResult:
    with ducklake.connect("main", targets=["orders"]) as conn:
        conn.execute("CREATE OR REPLACE TABLE orders AS SELECT range AS id FROM range(7)")
        return MaterializeResult(metadata=ducklake.record_materialization(conn, "orders"))


RUN_CONFIGS = [
    {"resources": {"ducklake": {"config": {"workspace": "prod"}}}},
    {"resources": {"ducklake": {"config": {"data_path": "/tmp/prod", "catalog": "prod"}}}},
]


def _spell(path: str, own: str, style: str) -> str:
    """`path` as a COPY target in one of the spellings DuckDB accepts."""
    if style == "dots":  # through `..` out of the fork's own prefix
        if path.startswith("s3://"):
            bucket_own, key_own = own[len("s3://") :].split("/", 1)
            key = path[len("s3://") + len(bucket_own) + 1 :]
            return "'" + f"s3://{bucket_own}/{key_own.rstrip('/')}/" + posixpath.relpath(key, key_own) + "'"
        return "'" + own.rstrip("/") + "/" + os.path.relpath(path, own) + "'"
    return {
        "plain": f"'{path}'", "dollar": f"$${path}$$", "e": f"E'{path}'", "ident": f'"{path}"',
        "file": f"'file://{path}'" if not path.startswith("s3://") else f"'{path}'",
    }[style]  # fmt: skip


def _attacks(env: LakeEnv, fork: str, dsn: str | None) -> st.SearchStrategy:
    parent = resolve("prod", "main", config=env.config)
    own = resolve(fork, "main", config=env.config).data_path
    files = [p for p in env.list_files(parent.data_path) if p.endswith(".parquet") and f"/{FORK_DATA_DIR}/" not in p]
    folder = parent.data_path.rstrip("/")
    styles = st.sampled_from(["plain", "dollar", "e", "ident", "file", "dots"])
    doors = st.sampled_from(["resource", "cli"])
    schema = resolve(fork, "main", config=env.config).namespace if parent.catalog.kind == "postgres" else "main"
    escape = posixpath.relpath(folder, own.rstrip("/") + "/d/p=2") if not own.startswith("s3://") else "../../x"
    sql_attacks = [
        st.builds(lambda f, s: (f"COPY (SELECT 42 AS id) TO {_spell(f, own, s)} (FORMAT parquet)", WRITE),
                  st.sampled_from(files), styles),
        st.builds(lambda s: (f"COPY (SELECT 1 AS id) TO {_spell(folder + '/main/stray.parquet', own, s)}", WRITE),
                  styles),
        st.builds(lambda s: (f"EXPORT DATABASE memory TO {_spell(folder + '/exported', own, s)}", WRITE), styles),
        st.just((f"COPY (SELECT 1 AS v, 2 AS p) TO '{own}d' (FORMAT parquet, PARTITION_BY (p), "
                 f"FILENAME_PATTERN '{escape}/x_{{i}}')", WRITE)),
        st.builds(lambda f: (f"INSERT INTO __ducklake_metadata_lake_main.{schema}."
                             "ducklake_files_scheduled_for_deletion "
                             f"VALUES (999999, '{f}', false, TIMESTAMPTZ '2000-01-01')", META), st.sampled_from(files)),
        st.sampled_from([(f"CALL ducklake_merge_adjacent_files('{ANC}')", MAINT), (f"CHECKPOINT {ANC}", MAINT),
                         (f"CALL ducklake_cleanup_old_files('{ANC}', cleanup_all => true)", MAINT)]),
    ]  # fmt: skip
    if parent.catalog.kind == "duckdb":
        catalog = parent.catalog.target
        sql_attacks += [
            st.builds(lambda s: (f"COPY (SELECT 'x' AS junk) TO {_spell(catalog, own, s)} (FORMAT csv)", WRITE),
                      styles),
            st.sampled_from([(f"SELECT * FROM read_duckdb('{catalog}')", FOREIGN),
                             (f"SELECT count(*) FROM read_blob('{catalog}')", FOREIGN)]),
            st.builds(lambda q, head: (f"{head}ATTACH {q[0]}ducklake:{catalog}{q[1]} AS p (DATA_PATH '{folder}/'); "
                                       "CREATE TABLE p.main.planted AS SELECT 1 AS n", ATTACH),
                      st.sampled_from([("'", "'"), ("$$", "$$"), ("$x$", "$x$"), ("E'", "'")]),
                      st.sampled_from(["", f"DETACH {ANC}; ", "/* x */ "])),
        ]  # fmt: skip
    else:
        target = parent.catalog.target
        sql_attacks += [
            st.just((f"SELECT * FROM postgres_scan('{dsn}', 'public', 'lake_catalog_role')", FOREIGN)),
            st.builds(lambda q: (f"ATTACH {q[0]}ducklake:postgres:{target}{q[1]} AS p (DATA_PATH '{folder}/')", ATTACH),
                      st.sampled_from([("'", "'"), ("$$", "$$"), ("E'", "'")])),
        ]  # fmt: skip
    attack = st.tuples(st.just("sql"), doors, st.one_of(sql_attacks))
    relation = st.tuples(st.just("relation"), st.just("resource"), st.sampled_from(files).map(lambda f: (f, WRITE)))
    launch = st.tuples(st.just("dagster"), st.just(""), st.sampled_from(range(len(RUN_CONFIGS))))
    legit = st.sampled_from([
        ("own", "resource", f"COPY (SELECT 1 AS id) TO '{own}own-copy.parquet' (FORMAT parquet)"),
        ("own", "cli", "CREATE OR REPLACE TABLE lake_main.main.by_cli AS SELECT 1 AS v"),
        ("own", "resource", "CHECKPOINT lake_main"),
        ("own", "resource", "CALL ducklake_merge_adjacent_files('lake_main')"),
    ])  # fmt: skip
    steps = st.one_of(attack, attack, relation, launch)
    return st.tuples(st.lists(steps, min_size=2, max_size=4), legit).map(lambda t: [*t[0], t[1]])


def _step(step, fork: str, seen: dict[str, int]) -> None:
    kind, door, payload = step
    seen[kind] = seen.get(kind, 0) + 1
    if kind == "dagster":
        with pytest.raises(DagsterInvalidConfigError):
            materialize([fork_orders], resources={"ducklake": DuckLakeResource()}, run_config=RUN_CONFIGS[payload])
        return
    if door == "cli":
        from dpone_dagster.cli import app

        result = CliRunner().invoke(app, ["lake", "sql", fork, "main", "-e", payload if kind == "own" else payload[0]])
        if kind == "own":
            assert result.exit_code == 0, result.output
        else:
            assert result.exit_code == 1 and payload[1] in result.output, (payload, result.output[-500:])
        return
    with DuckLakeResource().connect("main") as conn:
        if kind == "own":
            conn.execute(payload)
            return
        with pytest.raises(SqlGuardError) as caught:
            if kind == "relation":
                conn.sql("SELECT 7 AS id").write_parquet(payload[0])
            else:
                conn.execute(payload[0])
        assert caught.value.code == payload[1], payload


def _run_property(state, attacks, fork: str, examples: int) -> dict[str, int]:
    seen: dict[str, int] = {}

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
    @given(ops=attacks)
    def prop(ops):
        before = state()
        for step in ops:
            _step(step, fork, seen)
            assert state() == before, step

    prop()
    return seen


@pytest.mark.slow
def test_file_doors_never_change_the_parent_embedded(embedded_lake, monkeypatch):
    env = embedded_lake
    managed_materialize(env, "prod", "orders", "SELECT 1 AS id")
    managed_materialize(env, "prod", "orders", "SELECT range AS id FROM range(25)")
    run_sql(env, "prod", [f"INSERT INTO lake_main.main.orders SELECT range FROM range({i}, {i + 5})" for i in (25, 30)])
    fork = "wm-fork-prop-files"
    Workspaces(load_config()).create_fork(fork, "prod", owner="alice")
    monkeypatch.setenv("DPONE_WORKSPACE", fork)
    initial = parent_state(env)
    seen = _run_property(lambda: parent_state(env), _attacks(env, fork, None), fork, examples=8)
    assert parent_state(env) == initial
    assert seen.get("sql", 0) >= 8 and all(seen.get(k) for k in ("relation", "dagster", "own")), seen


def _iam_state(postgres_server, database: str, s3, prefix: str):
    client = s3.client(user="owner")
    objects = tuple(
        (key, hashlib.sha256(client.get_object(Bucket=s3.bucket, Key=key)["Body"].read()).hexdigest())
        for key, _ in s3.objects()
        if key.startswith(prefix)
    )
    return _catalog_rows(postgres_server, database), objects


@pytest.mark.slow
def test_file_doors_never_change_the_parent_postgres_iam_s3(
    ro_lake, postgres_server, pg_database, auth_s3, monkeypatch, tmp_path
):
    env = ro_lake
    _build_parent(env)
    config_file = tmp_path / "dpone.yaml"
    config_file.write_text(yaml.safe_dump({
        "lakes": [env.lake.model_dump(mode="json", exclude_none=True)],
        "control_store_url": env.config.control_store_url,
    }))  # fmt: skip
    monkeypatch.setenv("DPONE_CONFIG", str(config_file))
    reset_store_cache()
    assert load_config().lake().catalog == env.lake.catalog
    Workspaces(load_config()).create_fork(IAM_FORK, "prod", owner="alice")
    monkeypatch.setenv("DPONE_WORKSPACE", IAM_FORK)
    prefix = f"lakes/{pg_database}/"
    state = lambda: _iam_state(postgres_server, pg_database, auth_s3, prefix)  # noqa: E731
    listed = LakeEnv(env.kind, load_config(), lambda p: [f"s3://{auth_s3.bucket}/{k}" for k, _ in auth_s3.objects()
                                                        if f"s3://{auth_s3.bucket}/{k}".startswith(p)])  # fmt: skip
    initial = state()
    assert initial[1] and initial[0]["ducklake_data_file"]
    seen = _run_property(state, _attacks(listed, IAM_FORK, postgres_server.dsn(pg_database)), IAM_FORK, examples=6)
    assert state() == initial
    assert seen.get("sql", 0) >= 6 and all(seen.get(k) for k in ("relation", "dagster", "own")), seen
