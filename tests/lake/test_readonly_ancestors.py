"""Ancestors are read-only *below* DuckLake: PostgreSQL roles and S3 credentials refuse the writes.

A fork of a PostgreSQL + S3 lake runs DuckLake's maintenance functions and `CHECKPOINT` on its
ancestor alias (DuckLake 1.5.5 writes or deletes parquet files before its READ_ONLY check), and
raw SQL against the ancestor's metadata tables with the fork's own catalog credentials. The parent's
catalog rows and its S3 objects (keys and ETags) must not change, and each refusal must come from
PostgreSQL (`permission denied`, `read-only transaction`) or from S3 (HTTP 403), never from Python.

S3 here is a second moto server, in its own process (moto keeps its auth switch in a module global,
so it cannot share the session's in-process server), with IAM enforcement switched on after the
users and policies are made: an owner key (the lake's writer), a read-only key, and a fork key that
may write only below `__wm_forks/<segment>/`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest
import requests

from dpone_dagster.config import LakeConfig, StorageConfig, load_config
from dpone_dagster.control.store import open_store, reset_store_cache
from dpone_dagster.lake.lifecycle.roles import fork_roles, has_roles, read_password
from dpone_dagster.lake.resolution.naming import ancestor_alias, mangle
from dpone_dagster.workspaces.service import Workspaces

from .lakes import LakeEnv, attached, materialize, run_sql

FORK = "wm-fork-ro"
ANCESTOR = ancestor_alias("main", "prod")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _policy(*statements: tuple[list[str], list[str]]) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": a, "Resource": r} for a, r in statements],
        }
    )


class AuthS3:
    """A moto S3 that enforces IAM. `keys[name]` = (access key id, secret) per user."""

    def __init__(self, port: int, bucket: str) -> None:
        self.port, self.bucket, self.keys = port, bucket, {}

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self, service: str = "s3", user: str | None = None):
        import boto3

        key, secret = self.keys.get(user, ("unauthenticated", "unauthenticated"))
        return boto3.client(
            service,
            endpoint_url=f"http://{self.endpoint}",
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            region_name="us-east-1",
        )

    def objects(self) -> list[tuple[str, str]]:
        out = []
        pages = self.client(user="owner").get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
        for page in pages:
            out += [(o["Key"], o["ETag"]) for o in page.get("Contents", [])]
        return sorted(out)


@pytest.fixture(scope="module")
def auth_s3():
    port = _free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "1000000"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                requests.get(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.05)
        server = AuthS3(port, f"b-{uuid.uuid4().hex[:12]}")
        server.client().create_bucket(Bucket=server.bucket)
        bucket, objects = f"arn:aws:s3:::{server.bucket}", f"arn:aws:s3:::{server.bucket}/*"
        read = (["s3:GetObject", "s3:ListBucket", "s3:GetBucketLocation"], [bucket, objects])
        # every incarnation of FORK (real IAM would say `<mangled id>_????????/*`; moto has no `?`)
        fork_objects = f"arn:aws:s3:::{server.bucket}/__wm_forks/{mangle(FORK, 40)}_*"
        write = ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"]
        policies = {
            "owner": _policy((["s3:*"], [bucket, objects])),
            "reader": _policy(read),
            "forkwriter": _policy(read, (write, [fork_objects])),
        }
        iam = server.client("iam")
        for user, policy in policies.items():
            iam.create_user(UserName=user)
            iam.put_user_policy(UserName=user, PolicyName="p", PolicyDocument=policy)
            key = iam.create_access_key(UserName=user)["AccessKey"]
            server.keys[user] = (key["AccessKeyId"], key["SecretAccessKey"])
        # from here on every request is authenticated and authorized by moto's IAM
        requests.post(f"http://127.0.0.1:{port}/moto-api/reset-auth", data=b"0", timeout=5).raise_for_status()
        yield server
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def ro_lake(postgres_server, pg_database, auth_s3, monkeypatch, _isolated_state) -> LakeEnv:
    reset_store_cache()
    for user, (key, secret) in auth_s3.keys.items():
        monkeypatch.setenv(f"T_{user.upper()}_KEY", key)
        monkeypatch.setenv(f"T_{user.upper()}_SECRET", secret)
    prefix = f"lakes/{pg_database}/"
    lake = LakeConfig(
        name="main",
        catalog="postgres:" + postgres_server.dsn(pg_database),
        data_path=f"s3://{auth_s3.bucket}/{prefix}",
        storage=StorageConfig(
            endpoint=auth_s3.endpoint,
            url_style="path",
            use_ssl=False,
            key_id_env="T_OWNER_KEY",
            secret_env="T_OWNER_SECRET",
            read_only_key_id_env="T_READER_KEY",
            read_only_secret_env="T_READER_SECRET",
            fork_key_id_env="T_FORKWRITER_KEY",
            fork_secret_env="T_FORKWRITER_SECRET",
        ),
        attach_args={"DATA_INLINING_ROW_LIMIT": 0},
    )
    config = load_config().model_copy(update={"lakes": (lake,), "control_store_url": postgres_server.url(pg_database)})
    return LakeEnv("pg_s3_auth", config, lambda p: [], s3_bucket=auth_s3.bucket)


def _catalog_rows(postgres_server, database: str, schema: str = "public") -> dict[str, list]:
    import psycopg

    with psycopg.connect(postgres_server.dsn(database), autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename LIKE 'ducklake%%'", (schema,)
            )
        ]
        return {
            t: sorted(map(repr, conn.execute(f'SELECT * FROM "{schema}"."{t}"').fetchall())) for t in sorted(tables)
        }


def _build_parent(env: LakeEnv) -> None:
    """Small files (merge), a delete file (rewrite), files scheduled for deletion (cleanup)."""
    materialize(env, "prod", "main.orders", "SELECT range AS id FROM range(10)")
    run_sql(
        env,
        "prod",
        [
            "INSERT INTO lake_main.main.orders SELECT range + 10 FROM range(10)",
            "INSERT INTO lake_main.main.orders SELECT range + 20 FROM range(10)",
            "CREATE TABLE lake_main.main.returns AS SELECT range AS id FROM range(30)",
            "DELETE FROM lake_main.main.returns WHERE id % 3 = 0",
            "CREATE TABLE lake_main.main.scratch AS SELECT range AS id FROM range(5)",
            "DROP TABLE lake_main.main.scratch",
            "CALL ducklake_expire_snapshots('lake_main', older_than => now())",
        ],
    )


def _maintenance(alias: str) -> list[str]:
    return [
        f"CALL ducklake_merge_adjacent_files('{alias}')",
        f"CALL ducklake_rewrite_data_files('{alias}', delete_threshold => 0)",
        f"CHECKPOINT {alias}",
        f"CALL ducklake_cleanup_old_files('{alias}', cleanup_all => true)",
    ]


def _refusals(conn, statements) -> dict[str, str]:
    out = {}
    for sql in statements:
        try:
            conn.execute(sql)
            out[sql] = "accepted"
        except Exception as exc:  # the refusal text is what the test inspects
            out[sql] = str(exc)
    return out


BELOW_DUCKLAKE = ("HTTP code 403", "AccessDenied", "permission denied")


def _parent_state(postgres_server, database: str, s3: AuthS3, prefix: str):
    return _catalog_rows(postgres_server, database), [o for o in s3.objects() if o[0].startswith(prefix)]


def test_fork_cannot_write_parent_catalog_or_objects(ro_lake, postgres_server, pg_database, auth_s3):
    from dpone_dagster.lake.resolution.seam import resolve

    _build_parent(ro_lake)
    Workspaces(ro_lake.config).create_fork(FORK, "prod", owner="tester")
    prefix = f"lakes/{pg_database}/"
    before = _parent_state(postgres_server, pg_database, auth_s3, prefix)
    assert before[0]["ducklake_files_scheduled_for_deletion"], "nothing scheduled: cleanup would prove nothing"

    resolved = resolve(FORK, "main", config=ro_lake.config)
    roles = fork_roles(_base_location(ro_lake), resolved.namespace)
    # the plan never names the owner's credentials: target as the writer, ancestors as the reader
    named = " ".join(resolved.statements(redact=False, credentials=lambda env: f"<env {env}>"))
    assert "<env T_OWNER_" not in named and "<env T_READER_KEY>" in named and "<env T_FORKWRITER_KEY>" in named
    assert f"user={roles.writer}' AS" in resolved.target.render()  # the password: a DuckDB secret
    # a direct connection (catalog inspection) presents the reader's stored password, no env credential
    no_env = lambda env: pytest.fail(f"an env credential was read: {env}")  # noqa: E731
    assert resolved.catalog.connect_password(no_env) == read_password(ro_lake.config.control_store, roles.reader)
    ancestor_attaches = [s.render() for a in resolved.ancestors for s in a.statements if "ATTACH" in s.render()]
    assert ancestor_attaches and all(f"user={roles.reader}' AS" in a for a in ancestor_attaches)
    base = ro_lake.config.lake().catalog.removeprefix("postgres:")
    outcomes: dict[str, dict[str, str]] = {}
    with attached(ro_lake, FORK) as conn:
        assert conn.execute(f"SELECT count(*) FROM {ANCESTOR}.main.orders").fetchone()[0] == 30
        # 1. DuckLake's own maintenance on the managed READ_ONLY ancestor alias
        outcomes["managed"] = _refusals(conn, _maintenance(ANCESTOR))
        # the fork's own prefix stays writable with the fork key and the writer role
        conn.execute("CREATE TABLE lake_main.main.mine AS SELECT 1 AS x")
        reader_pw = read_password(ro_lake.config.control_store, roles.reader)
        # 2. the same calls on the ancestor attached as the fork's reader WITHOUT READ_ONLY, with
        #    only the fork's S3 secrets in the session: PostgreSQL and S3 must refuse by themselves
        conn.execute(
            f"ATTACH 'ducklake:postgres:{base} user={roles.reader} password={reader_pw}' AS rw_try "
            f"(DATA_PATH 's3://{auth_s3.bucket}/{prefix}', OVERRIDE_DATA_PATH true)"
        )
        outcomes["reader, not READ_ONLY"] = _refusals(
            conn, [*_maintenance("rw_try"), "INSERT INTO rw_try.main.orders VALUES (1000)"]
        )
        # 3. raw SQL into the ancestor's metadata tables with each of the fork's credentials
        for role in (roles.reader, roles.writer):
            password = read_password(ro_lake.config.control_store, role)
            conn.execute(f"ATTACH '{base} user={role} password={password}' AS pg_{role} (TYPE postgres)")
            outcomes[role] = _refusals(
                conn,
                [
                    f"INSERT INTO pg_{role}.public.ducklake_snapshot VALUES (999, now(), 1, 1, 1)",
                    f"DELETE FROM pg_{role}.public.ducklake_data_file",
                    f"UPDATE pg_{role}.public.ducklake_metadata SET value = 'x'",
                    # the control store shares this schema here: role passwords stay unreadable
                    f"SELECT * FROM pg_{role}.public.lake_catalog_role",
                ],
            )

    assert _parent_state(postgres_server, pg_database, auth_s3, prefix) == before
    for kind, results in outcomes.items():
        for sql, outcome in results.items():
            expected = BELOW_DUCKLAKE if sql.startswith(("CALL", "CHECKPOINT")) else ("permission denied",)
            assert any(marker in outcome for marker in expected), (kind, sql, outcome)


def test_dropping_the_fork_drops_its_schema_and_roles(pg_s3_lake, postgres_server, pg_database):
    import psycopg

    from dpone_dagster.lake.resolution.seam import resolve

    materialize(pg_s3_lake, "prod", "main.orders", "SELECT 1 AS id")
    Workspaces(pg_s3_lake.config).create_fork(FORK, "prod", owner="tester")
    namespace = resolve(FORK, "main", config=pg_s3_lake.config).namespace
    run_sql(pg_s3_lake, FORK, "CREATE TABLE lake_main.main.mine AS SELECT 1 AS x")
    roles = fork_roles(_base_location(pg_s3_lake), namespace)
    names = [roles.writer, roles.reader, roles.group]

    def present() -> tuple[list[str], bool]:
        with psycopg.connect(postgres_server.dsn(pg_database), autocommit=True) as conn:
            found = [r[0] for r in conn.execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)", (names,))]
            schema = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (namespace,)).fetchone()
        return sorted(found), schema is not None

    assert present() == (sorted(names), True)
    result = Workspaces(pg_s3_lake.config).drop(FORK, actor="tester")
    assert result.cleanup.complete, result.cleanup.leftovers
    assert present() == ([], False)
    with open_store(pg_s3_lake.config.control_store).connect() as conn:
        assert not has_roles(conn, [FORK])


def _base_location(env: LakeEnv):
    from dpone_dagster.lake.resolution.attach import catalog_location

    return catalog_location(env.lake, env.config.project_root)


def test_missing_read_only_keys_are_announced_not_silent(pg_s3_lake, caplog):
    """Without `read_only_*` / `fork_*` keys the writer key is used for those paths: said, not hidden."""
    from dpone_dagster.lake.resolution.seam import resolve

    materialize(pg_s3_lake, "prod", "main.orders", "SELECT 1 AS id")
    Workspaces(pg_s3_lake.config).create_fork(FORK, "prod", owner="tester")
    with caplog.at_level("WARNING", logger="dpone_dagster.lake.lifecycle.roles"):
        resolved = resolve(FORK, "main", config=pg_s3_lake.config)
    said = " ".join(r.getMessage() for r in caplog.records)
    parent_path = resolve("prod", "main", config=pg_s3_lake.config).data_path
    assert f"storage of {parent_path} has no read_only_key_id_env/read_only_secret_env" in said
    assert f"storage of {resolved.data_path} has no fork_key_id_env/fork_secret_env" in said


def test_a_fork_whose_roles_could_not_be_made_refuses_to_resolve(pg_s3_lake, monkeypatch):
    """No admin credential where the fork is created or resolved: typed refusal, never the owner."""
    from dpone_dagster.lake.lifecycle.roles import ForkRolesMissingError
    from dpone_dagster.lake.resolution.seam import resolve

    monkeypatch.delenv("DPONE_TEST_NO_ADMIN_PASSWORD", raising=False)
    lake = pg_s3_lake.lake.model_copy(update={"catalog_admin_password_env": "DPONE_TEST_NO_ADMIN_PASSWORD"})
    config = pg_s3_lake.config.model_copy(update={"lakes": (lake,)})
    materialize(pg_s3_lake, "prod", "main.orders", "SELECT 1 AS id")
    Workspaces(config).create_fork(FORK, "prod", owner="tester")  # logs that roles are missing
    with pytest.raises(ForkRolesMissingError) as raised:
        resolve(FORK, "main", config=config)
    assert raised.value.code == "lake.fork_roles_missing"
