"""Shared test fixtures: real PostgreSQL and a real (moto) S3 server on 127.0.0.1.

Both servers are started by the test session itself and stopped at its end, so a clean clone
passes in CI with nothing running beforehand. PostgreSQL is a throwaway cluster from the machine's
PostgreSQL binaries (initdb as the `postgres` user when running as root). S3 is moto's threaded
server, spoken to over HTTP exactly like S3 (boto3 and DuckDB httpfs).

Tests that need them request `postgres_server` / `s3_server` (session) or the per-test helpers
`pg_database` (a fresh database) and `s3_bucket` (a fresh bucket).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path_factory, monkeypatch):
    """Every test gets its own state dir so no test reads or writes the developer's `.dpone/`."""
    state = tmp_path_factory.mktemp("dpone_state")
    monkeypatch.setenv("DPONE_PROJECT_ROOT", str(REPO_ROOT))
    monkeypatch.setenv("DPONE_STATE_DIR", str(state))
    for key in [k for k in os.environ if k.startswith(("DPONE_LAKE_", "DPONE_CONNECTION_", "DAGSTER_CLOUD_"))]:
        monkeypatch.delenv(key)
    monkeypatch.delenv("DPONE_CONTROL_STORE_URL", raising=False)
    monkeypatch.delenv("DPONE_WORKSPACE", raising=False)
    monkeypatch.delenv("DPONE_CONFIG", raising=False)
    yield state


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _require_service(reason: str):
    if os.environ.get("DPONE_TEST_ALLOW_MISSING_SERVICES") == "1":
        pytest.skip(reason)
    pytest.fail(reason + " (set DPONE_TEST_ALLOW_MISSING_SERVICES=1 to skip instead)")


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    user: str

    def dsn(self, dbname: str = "postgres") -> str:
        """libpq key=value string (what DuckDB's postgres catalog takes)."""
        return f"host={self.host} port={self.port} user={self.user} dbname={dbname}"

    def url(self, dbname: str = "postgres") -> str:
        """SQLAlchemy URL (psycopg 3 driver)."""
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{dbname}"

    def create_database(self, name: str | None = None) -> str:
        import psycopg

        name = name or f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name


def _pg_bin() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if candidates:
        return Path(candidates[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    bindir = _pg_bin()
    if bindir is None:
        _require_service("PostgreSQL binaries (initdb, pg_ctl) are not installed")
    as_root = os.geteuid() == 0
    base = Path(tempfile.mkdtemp(prefix="dpone-pg-"))
    data = base / "data"
    sockets = base / "sock"
    sockets.mkdir()
    prefix: list[str] = []
    if as_root:
        shutil.chown(base, "postgres", "postgres")
        shutil.chown(sockets, "postgres", "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    log = base / "server.log"
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    subprocess.run(
        [*prefix, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8"],
        check=True,
        capture_output=True,
        env=env,
    )
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    if as_root:
        log.touch()
        shutil.chown(log, "postgres", "postgres")
    subprocess.run(
        [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "start"],
        check=True,
        capture_output=True,
        env=env,
    )
    try:
        yield PostgresServer(host="127.0.0.1", port=port, user="postgres")
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            env=env,
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_database(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the session's PostgreSQL server; returns its name."""
    return postgres_server.create_database()


@dataclass(frozen=True)
class S3Server:
    host: str
    port: int
    key_id: str = "testing-key-id"
    secret: str = "testing-secret-key"
    region: str = "us-east-1"

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.endpoint}"

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.key_id,
            aws_secret_access_key=self.secret,
            region_name=self.region,
        )

    def create_bucket(self, name: str | None = None) -> str:
        name = name or f"b-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        client = self.client()
        out: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out.extend(obj["Key"] for obj in page.get("Contents", []))
        return sorted(out)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:  # pragma: no cover - moto[server] is a test dependency
        _require_service("moto[server] is not installed")
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Server(host="127.0.0.1", port=port)
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server: S3Server, monkeypatch) -> str:
    """A fresh bucket; the S3 credentials are exported under the names test lakes reference."""
    monkeypatch.setenv("DPONE_TEST_S3_KEY_ID", s3_server.key_id)
    monkeypatch.setenv("DPONE_TEST_S3_SECRET", s3_server.secret)
    return s3_server.create_bucket()


# Session fixtures that are expensive to build (a built prod lake, a release run, a webserver, a real compile; a
# fork webserver needs the prod one): under pytest-xdist (`make test` runs `--dist loadgroup`) every test using
# one of them goes to the same worker, so each is built once per run; every other test file is its own group
# (like `--dist loadfile`). A test using two of them follows the first listed here.
_EXPENSIVE_SESSION_FIXTURES = (
    "webserver",
    "released",
    "built_prod_lake",
    "real_compile",
)

# Files whose tests share nothing expensive but are each long: one group per test, so two workers
# can run them at once (the partition scenario on the embedded lake and on PostgreSQL + S3).
_ONE_GROUP_PER_TEST = {"dbt/test_partition_dbt.py"}

# Worker seconds of the longest groups (`make test` durations, summed per group; only the order
# matters). xdist hands groups out in collection order once `--no-loadscope-reorder` is set (see
# pytest_configure), so the longest go first and the many short files fill in at the end: by
# default xdist orders groups by their number of tests, which sent these one- and two-test groups
# last, where one worker ran them alone while the other had finished.
_GROUP_SECONDS = {
    "webserver": 290,
    "scale/test_concurrency.py": 190,
    "released": 190,
    "scale/test_scale_location.py": 230,
    "dbt/test_partition_dbt.py::test_per_partition_defer_on_postgres_and_s3": 170,
    "dbt/test_partition_dbt.py::test_per_partition_defer_on_the_embedded_lake": 90,
    "dbt/test_production_lake.py": 70,
    "built_prod_lake": 40,
    "dbt/test_incremental_models.py": 40,
    "real_compile": 30,
    "test_definitions_smoke.py": 30,
}
_SECONDS_PER_OTHER_TEST = 0.15


def group_of(nodeid: str, fixturenames) -> str:
    """The xdist group of one test: its first expensive session fixture, else its file (or itself)."""
    used = set(fixturenames)
    group = next((name for name in _EXPENSIVE_SESSION_FIXTURES if name in used), None)
    if group is not None:
        return group
    path = nodeid.split("::", 1)[0].removeprefix("tests/")
    return nodeid.removeprefix("tests/").split("[", 1)[0] if path in _ONE_GROUP_PER_TEST else path


def longest_groups_first(pairs: list[tuple[object, str]]) -> list[tuple[object, str]]:
    """(item, group) pairs reordered: groups by estimated seconds, longest first; order kept inside a group."""
    members: dict[str, list] = {}
    for pair in pairs:
        members.setdefault(pair[1], []).append(pair)
    cost = {g: _GROUP_SECONDS.get(g, _SECONDS_PER_OTHER_TEST * len(m)) for g, m in members.items()}
    return [pair for g in sorted(members, key=lambda g: -cost[g]) for pair in members[g]]


def pytest_configure(config):
    if getattr(config.option, "dist", "no") == "loadgroup":
        config.option.loadscopereorder = False  # keep the order pytest_collection_modifyitems gives


def _tag_group_in_nodeid(item, group: str) -> None:
    """What xdist's loadgroup does, for pytest 9.2: the `@group` nodeid suffix its controller groups by.

    xdist 3.8 writes the suffix to `item._nodeid`, which pytest 9.2 no longer reads (the node id is
    the structured `item._id`; pytest-dev/pytest-xdist#1386, fix open in #1388), so without this
    every test was its own unit: each expensive session fixture was built on both workers.
    """
    from _pytest.nodeid import NodeId

    if "@" not in item.nodeid.rpartition("]")[2]:
        item._id = NodeId.parse(f"{item.nodeid}@{group}")


# The long scenarios (`slow`) that `make test` (CI) still runs: at least one of each kind, chosen for
# what they guard and what they cost (`make test` runs `-m "not slow or ci"`; `make test-all` runs
# every test). A node id without `[...]` keeps every parameter of that test. Kinds not listed here
# have a fast member in CI: browser/GraphQL (tests/ui/test_runtime_flow, test_release_flow,
# test_asset_graph), the demo's release half (tests/dbt/test_demo_release).
CI_KEEPS_SLOW = frozenset(
    {
        # adoption from the installed wheel, on the highest supported versions
        "tests/adoption/test_wheel_adoption.py::test_the_shop_adopts_dpone_from_the_wheel[highest]",
        # the parent is never written from a fork: properties and file doors on both backends
        "tests/lake/test_isolation_attacks_property.py::test_attacks_from_a_fork_never_change_the_parent_embedded",
        "tests/lake/test_isolation_files_property.py::test_file_doors_never_change_the_parent_embedded",
        "tests/lake/test_isolation_files_property.py::test_file_doors_never_change_the_parent_postgres_iam_s3",
        "tests/dbt/test_dbt_file_writes.py::test_dbt_hooks_and_external_models_write_only_the_forks_own_prefix",
        "tests/dbt/test_dbt_sql_guard.py::test_dbt_run_operation_cannot_run_maintenance_on_the_ancestor",
        "tests/scale/test_concurrency.py::test_the_isolation_checks_catch_a_write_into_the_parent",
        # diff and promotion (refusals, atomicity, a crash on either side of the commit)
        "tests/lake/test_diff.py::test_a_known_change_is_reported_exactly_and_its_identity_names_the_parent_snapshot",
        "tests/lake/test_promote.py::test_promotion_refusals_atomicity_publication_and_a_later_fork_drop",
        "tests/lake/test_promote.py::test_a_changed_parent_target_is_a_conflict_and_the_parent_stays_unchanged",
        "tests/lake/test_promote.py::test_the_parent_deployment_job_promotes_and_a_fork_deployment_job_is_refused",
        "tests/lake/test_promote_files.py::test_a_crash_before_the_commit_loses_nothing_and_recovery_puts_the_files_back",
        "tests/lake/test_promote_files.py::test_a_crash_after_the_commit_keeps_the_published_table_and_recovery_settles_it",
        # the inner loop: partitions, executors, indirect selection
        "tests/dbt/test_partition_dbt.py::test_per_partition_defer_on_the_embedded_lake",
        "tests/dbt/test_inner_loop.py::test_a_mixed_run_keeps_the_multiprocess_executor",
        "tests/dbt/test_indirect_selection.py::test_stg_customers_alone_on_a_fresh_lake_skips_the_relationships_test_on_stg_orders",
        # releases: the real compile's golden identity, the executor choice (the rollout gate's fast tests run)
        "tests/release/test_real_release.py::test_a_second_full_run_with_dbt_in_fresh_directories_gives_the_golden_identity",
        "tests/defs_release/test_release_ergonomics.py::test_a_selection_without_release_stages_keeps_the_multiprocess_executor",
    }
)


def kept_in_ci(nodeid: str) -> bool:
    """Whether a `slow` test is one `make test` keeps (`CI_KEEPS_SLOW`)."""
    bare = nodeid.split("@", 1)[0]
    return bare in CI_KEEPS_SLOW or bare.split("[", 1)[0] in CI_KEEPS_SLOW


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook (older pytest: it reads the marker we add)
def pytest_collection_modifyitems(config, items):
    pairs = []
    for item in items:
        if item.get_closest_marker("slow") is not None and kept_in_ci(item.nodeid):
            item.add_marker(pytest.mark.ci)  # before `-m "not slow or ci"` deselects (tryfirst)
        group = group_of(item.nodeid, getattr(item, "fixturenames", ()))
        item.add_marker(pytest.mark.xdist_group(group))
        pairs.append((item, group))
    if not hasattr(config, "workerinput"):
        return
    # An xdist worker: the controller schedules groups in the order of this list.
    if config.getvalue("loadgroup") and hasattr(items[0] if items else None, "_id"):
        for item, group in pairs:
            _tag_group_in_nodeid(item, group)
    items[:] = [item for item, _ in longest_groups_first(pairs)]
