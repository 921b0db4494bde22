"""Concurrency on the production path: 8 fork runs and 1 prod run at once through Dagster's run queue.

Everything is a real process: one gRPC code server per deployment (`DPONE_WORKSPACE` in its
environment: 8 forks of `prod`, and `prod`), one `dagster-daemon` (QueuedRunCoordinator,
`max_concurrent_runs` 9, the default run launcher: each run in its own run-worker process started by
its code server), Dagster storage on PostgreSQL (docs/deploy/dagster.yaml minus the k8s launcher), the
lake on a PostgreSQL catalog and moto S3. Runs are submitted through GraphQL (launchPipelineExecution,
what the UI's Launch button sends). Each fork run builds `staging.stg_orders` (dbt, fork-aware, reading
prod's `raw_orders` through a defer view); the prod run builds `staging.stg_customers`.

Asserted: every run succeeds (so no DuckLake commit conflict surfaced), each fork's table exists with
prod's row count, each fork wrote only its own namespace and prefix, and prod is unchanged except for
the prod run's own table (old snapshots, catalog files and stored objects all still there; new ones
only for `stg_customers`; `raw_*` rows unchanged).

What a reader could get wrong: one Dagster instance serves all nine deployments here so that one run
queue sees them; docs/production.md gives each deployment its own instance (the lake-side behaviour
is the same). On a PostgreSQL catalog each fork commits to its own metadata schema, so forks never
race each other for snapshot ids; writers of the same workspace do (tests/lake/test_commit_retry.py).
Set DPONE_CONCURRENCY_REPORT=<file> to also run the same nine one after another and write the timings
(bench/bench_concurrency.py does); the isolation is checked before that second pass.

Where the seconds go (and what was cut): every code server and every run worker loads the
definitions (~3 s CPU each, 18 loads), every run starts a dbt process; on 2 cores that is CPU-bound.
The code servers load while the test builds prod's upstream, and the coordinator dequeues with
threads: Dagster's StartRun returns only after the run worker has loaded the definitions, so a
one-thread dequeue started the nine runs one load apart (~10 s each under load).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from cryptography.fernet import Fernet

from dpone_dagster.control.store import reset_store_cache
from tests.lake.lakes import LakeEnv, fingerprint, fork_places, pg_s3_env

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.s3]

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
FORKS = tuple(f"conc-{i}" for i in range(8))
FORK_MODEL = ("staging", "stg_orders")
PROD_MODEL = ("staging", "stg_customers")
RAW_COUNTS = (
    "SELECT (SELECT count(*) FROM lake_main.raw.raw_orders), (SELECT count(*) FROM lake_main.raw.raw_customers)"
)
TERMINAL = {"SUCCESS", "FAILURE", "CANCELED"}
LAUNCH = """
mutation($executionParams: ExecutionParams!) {
  launchPipelineExecution(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_config(path: Path, env: LakeEnv, postgres_server, catalog_db: str) -> None:
    lake = env.lake
    config = {
        "control_store_url": postgres_server.url(catalog_db),
        "dbt_project_dir": "dbt_project_synthetic",  # this repository's project (the root is REPO_ROOT)
        "lakes": [
            {
                "name": "main",
                "catalog": lake.catalog,
                "data_path": lake.data_path,
                "storage": lake.storage.model_dump(mode="json", exclude_none=True),
                "attach_args": dict(lake.attach_args),
            }
        ],
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")


def _dagster_home(home: Path) -> None:
    documented = yaml.safe_load((REPO_ROOT / "docs" / "deploy" / "dagster.yaml").read_text(encoding="utf-8"))
    documented.pop("run_launcher")  # the default launcher: a run-worker process per run
    documented["concurrency"]["runs"]["max_concurrent_runs"] = 9  # the (default) QueuedRunCoordinator's limit
    # the same coordinator, configured as a busy deployment would: StartRun blocks until the run
    # worker has loaded the definitions, so a one-thread dequeue starts nine runs one load apart
    documented["run_coordinator"] = {
        "module": "dagster._core.run_coordinator",
        "class": "QueuedRunCoordinator",
        "config": {"dequeue_use_threads": True, "dequeue_num_workers": 9, "dequeue_interval_seconds": 1},
    }
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump(documented), encoding="utf-8")


def _sql(env: LakeEnv, workspace: str, sql: str):
    from tests.lake.lakes import attached

    with attached(env, workspace) as conn:
        return conn.execute(sql).fetchall()


class Deployment:
    """Nine code servers, one daemon, one GraphQL context over them."""

    def __init__(self, tmp: Path, base_env: dict[str, str]) -> None:
        self.tmp = tmp
        self.base_env = base_env
        self.procs: list[subprocess.Popen] = []
        self.ports: dict[str, int] = {}
        self.instance = None  # the test's DagsterInstance, disposed by stop()

    def start_servers(self) -> None:
        """Start the nine code servers (they load in the background); `start_daemon` waits for them."""
        entries = []
        location = str(REPO_ROOT / "tests" / "scale" / "concurrency_location.py")
        for workspace in ("prod", *FORKS):
            port = self.ports[workspace] = _port()
            model = PROD_MODEL if workspace == "prod" else FORK_MODEL
            env = {
                **self.base_env,
                "DPONE_WORKSPACE": workspace,
                "DPONE_STATE_DIR": str(self.tmp / "state" / workspace),
                "DPONE_CONCURRENCY_MODEL": ".".join(model),
            }
            self.procs.append(
                subprocess.Popen(
                    [
                        str(BIN / "dagster"),
                        "api",
                        "grpc",
                        "-f",
                        location,
                        "-a",
                        "defs",
                        "-h",
                        "127.0.0.1",
                        "-p",
                        str(port),
                    ],
                    cwd=REPO_ROOT,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    start_new_session=True,
                    stderr=open(self.tmp / f"grpc-{workspace}.log", "w"),
                )
            )
            entries.append({"grpc_server": {"host": "127.0.0.1", "port": port, "location_name": workspace}})
        self.workspace_yaml = self.tmp / "workspace.yaml"
        self.workspace_yaml.write_text(yaml.safe_dump({"load_from": entries}), encoding="utf-8")

    def start_daemon(self) -> None:
        self._wait_servers()
        log = open(self.tmp / "daemon.log", "w")
        self.procs.append(
            subprocess.Popen(
                [str(BIN / "dagster-daemon"), "run", "-w", str(self.workspace_yaml)],
                cwd=self.tmp,
                env=self.base_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    def _wait_servers(self, timeout: float = 400) -> None:
        from dagster._grpc.client import DagsterGrpcClient

        deadline = time.monotonic() + timeout
        for workspace, port in self.ports.items():
            client = DagsterGrpcClient(port=port, host="127.0.0.1")
            while True:
                try:
                    client.ping("x")
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise AssertionError(
                            f"code server of {workspace} did not start: "
                            + (self.tmp / f"grpc-{workspace}.log").read_text()[-2000:]
                        )
                    time.sleep(0.5)

    def stop(self) -> None:
        """Each server/daemon leads its own process group: its run workers and dbt processes go too."""
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5  # every run has finished: nothing to drain
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self.instance is not None:
            self.instance.dispose()


def _launch(context, workspace: str) -> str:
    from dagster_graphql.test.utils import execute_dagster_graphql

    result = execute_dagster_graphql(
        context,
        LAUNCH,
        {
            "executionParams": {
                "selector": {
                    "repositoryLocationName": workspace,
                    "repositoryName": "__repository__",
                    "pipelineName": "concurrency_job",
                },
                "mode": "default",
            }
        },
    )
    launched = result.data["launchPipelineExecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return launched["run"]["runId"]


def _wait(instance, run_ids: list[str], timeout: float = 900) -> list:
    from dagster import RunsFilter

    deadline = time.monotonic() + timeout
    while True:
        by_id = {r.run_id: r for r in instance.get_runs(RunsFilter(run_ids=run_ids))}
        runs = [by_id[r] for r in run_ids]
        if all(r.status.value in TERMINAL for r in runs):
            return runs
        assert time.monotonic() < deadline, [(r.tags.get("dpone/workspace"), r.status.value) for r in runs]
        time.sleep(0.5)


def _run_errors(instance, run_id: str) -> list[str]:
    from dagster import DagsterEventType

    texts = []
    for record in instance.all_logs(run_id, of_type={DagsterEventType.STEP_FAILURE, DagsterEventType.RUN_FAILURE}):
        texts.append(record.user_message or "")
        error = getattr(record.dagster_event.event_specific_data, "error", None)
        while error is not None:
            texts.append(error.message)
            error = error.cause
    return texts


def _table_files(env: LakeEnv, workspace: str, schema: str, table: str) -> set[str]:
    rows = _sql(
        env, workspace, f"SELECT data_file FROM ducklake_list_files('lake_main', '{table}', schema => '{schema}')"
    )
    return {r[0] for r in rows}


def check_isolation(env: LakeEnv, s3_server, bucket: str, before, raw_counts, forks) -> None:
    """Each fork has its FORK_MODEL table (prod's raw_orders rows) and wrote only its own namespace and
    prefix; prod is unchanged except for PROD_MODEL (snapshots, catalog files, objects, raw rows)."""
    schema, table = FORK_MODEL
    prefixes: list[str] = []
    for fork in forks:
        assert _sql(env, fork, f"SELECT count(*) FROM lake_main.{schema}.{table}") == [(raw_counts[0][0],)]
        namespaces, files = fork_places(env, fork)
        assert len(namespaces) == 1, namespaces
        assert set(files) == _table_files(env, fork, schema, table) != set(), (fork, files)
        prefixes.append(files[0][: files[0].index("/", files[0].index("__wm_forks/") + len("__wm_forks/")) + 1])
    assert len(set(prefixes)) == len(forks)
    # every object in the bucket is prod's or under exactly one fork's own prefix
    for key in s3_server.keys(bucket):
        url = f"s3://{bucket}/{key}"
        assert url.startswith(env.lake.data_path) or sum(url.startswith(p) for p in prefixes) == 1, url
    # prod: unchanged except the prod run's own table
    after = fingerprint(env, "prod")
    assert after.snapshots[: len(before.snapshots)] == before.snapshots
    new_changes = " ".join(s[2] for s in after.snapshots[len(before.snapshots) :])
    assert new_changes and table not in new_changes and "raw_" not in new_changes, new_changes
    assert set(before.catalog_files) <= set(after.catalog_files)
    assert set(before.stored_files) <= set(after.stored_files)
    prod_new = set(after.stored_files) - set(before.stored_files)
    assert prod_new and prod_new <= _table_files(env, "prod", *PROD_MODEL), prod_new
    assert _sql(env, "prod", RAW_COUNTS) == raw_counts
    assert not _sql(
        env,
        "prod",
        f"SELECT 1 FROM information_schema.tables WHERE table_catalog = 'lake_main' AND table_name = '{table}'",
    )


def test_eight_fork_runs_and_a_prod_run_at_once(tmp_path, postgres_server, s3_server, monkeypatch):
    clock = time.monotonic()
    timings: dict[str, object] = {}

    def lap(name: str) -> None:  # seconds since the test started, per phase (the bench reports them)
        timings[name] = round(time.monotonic() - clock, 1)

    catalog_db, dagster_db = postgres_server.create_database(), postgres_server.create_database()
    bucket = s3_server.create_bucket()
    monkeypatch.setenv("DPONE_TEST_S3_KEY_ID", s3_server.key_id)
    monkeypatch.setenv("DPONE_TEST_S3_SECRET", s3_server.secret)
    env = pg_s3_env(postgres_server, catalog_db, s3_server, bucket)
    config_path = tmp_path / "dpone.yaml"
    _write_config(config_path, env, postgres_server, catalog_db)
    home = tmp_path / "dagster_home"
    _dagster_home(home)
    dagster_env = {
        "DAGSTER_HOME": str(home),
        "DAGSTER_PG_HOST": postgres_server.host,
        "DAGSTER_PG_PORT": str(postgres_server.port),
        "DAGSTER_PG_DB": dagster_db,
        "DAGSTER_PG_USER": postgres_server.user,
        "DAGSTER_PG_PASSWORD": "unused-by-trust-auth",
    }
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("DPONE_", "DAGSTER_"))}
    base_env.update(dagster_env)
    base_env.update(
        {
            "DPONE_CONFIG": str(config_path),
            "DPONE_PROJECT_ROOT": str(REPO_ROOT),
            "DPONE_STATE_DIR": str(tmp_path / "state" / "setup"),
            "DPONE_TEST_S3_KEY_ID": s3_server.key_id,
            "DPONE_TEST_S3_SECRET": s3_server.secret,
            # each workspace's processes have a state folder of their own, so the fork role passwords'
            # sealing key comes from the environment, as docs/deploy says for such deployments
            "DPONE_FORK_ROLE_KEY": Fernet.generate_key().decode(),
        }
    )
    monkeypatch.setenv("DPONE_FORK_ROLE_KEY", base_env["DPONE_FORK_ROLE_KEY"])
    for key, value in dagster_env.items():
        monkeypatch.setenv(key, value)

    # The code servers load while prod's upstream is built: loading reads only the configuration
    # (the workspace comes from DPONE_WORKSPACE; no fork has to exist yet). The daemon, whose sensors
    # tick the forks, starts once the forks exist.
    from dagster import DagsterInstance

    deployment = Deployment(tmp_path, base_env)
    runs: list = []
    try:
        # the instance's PostgreSQL storage exists before any Dagster process starts (as after
        # `dagster instance migrate`): nine code servers creating it at once race ("instance_info
        # already exists", seen once)
        instance = deployment.instance = DagsterInstance.from_config(str(home))
        instance.run_storage, instance.event_log_storage, instance.schedule_storage  # noqa: B018 (created here)
        deployment.start_servers()
        # prod's upstream, built through the dbt assets beforehand (tracked: what lets forks defer to
        # it), then 8 forks of prod
        for key in ("DPONE_CONFIG", "DPONE_PROJECT_ROOT", "DPONE_STATE_DIR"):
            monkeypatch.setenv(key, base_env[key])
        reset_store_cache()
        from dagster import AssetKey, materialize

        from dpone_dagster.definitions import defs as deployed
        from dpone_dagster.defs.dbt.assets import synthetic_dbt_assets

        built = materialize(
            [synthetic_dbt_assets],
            resources=dict(deployed.resources or {}),
            raise_on_error=False,
            selection=[AssetKey(["main", "raw", "raw_orders"]), AssetKey(["main", "raw", "raw_customers"])],
        )
        assert built.success
        reset_store_cache()
        from dpone_dagster.workspaces.service import Workspaces

        for fork in FORKS:
            Workspaces(env.config).create_fork(fork, "prod", owner="ci")
        raw_counts = _sql(env, "prod", RAW_COUNTS)
        before = fingerprint(env, "prod")
        lap("setup_done_s")

        from dagster._core.workspace.context import WorkspaceProcessContext
        from dagster._core.workspace.load_target import WorkspaceFileTarget

        deployment.start_daemon()
        lap("servers_up_s")
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        with WorkspaceProcessContext(instance, WorkspaceFileTarget(paths=[str(deployment.workspace_yaml)])) as ctx:
            context = ctx.create_request_context()
            started = time.monotonic()
            run_ids = [_launch(context, w) for w in ("prod", *FORKS)]
            lap("launched_s")
            runs = _wait(instance, run_ids)
            timings["concurrent_s"] = time.monotonic() - started
            lap("runs_done_s")
            failures = {
                r.tags.get("dpone/workspace"): _run_errors(instance, r.run_id)
                for r in runs
                if r.status.value != "SUCCESS"
            }
            assert not failures, failures
            assert {r.tags.get("dpone/workspace") for r in runs} == {"prod", *FORKS}
            stats = [instance.get_run_stats(r) for r in run_ids]
            timings["all_nine_overlapped"] = min(s.end_time for s in stats) > max(s.start_time for s in stats)
            timings["run_start_spread_s"] = round(
                max(s.start_time for s in stats) - min(s.start_time for s in stats), 1
            )
            # no conflict surfaced anywhere in the event logs
            for run_id in run_ids:
                assert not any("Failed to commit DuckLake" in t for t in _run_errors(instance, run_id))
            # checked before any further run: the same jobs again would leave replaced files behind
            check_isolation(env, s3_server, bucket, before, raw_counts, FORKS)
            lap("checked_s")

            if os.environ.get("DPONE_CONCURRENCY_REPORT"):  # the same nine, each after the previous one
                started = time.monotonic()
                for workspace in ("prod", *FORKS):
                    (run,) = _wait(instance, [_launch(context, workspace)])
                    assert run.status.value == "SUCCESS", _run_errors(instance, run.run_id)
                timings["sequential_s"] = time.monotonic() - started
    finally:
        deployment.stop()
    lap("stopped_s")

    report = os.environ.get("DPONE_CONCURRENCY_REPORT")
    if report:
        Path(report).write_text(json.dumps(timings), encoding="utf-8")
    print("concurrency phases:", json.dumps(timings))


@pytest.mark.parametrize("rogue", [False, True], ids=["isolated", "fork-job-writes-into-parent"])
def test_the_isolation_checks_catch_a_write_into_the_parent(postgres_server, pg_database, s3_server, s3_bucket, rogue):
    """The checks above, on the same shapes written directly (no Dagster): they pass for isolated
    writes and fail when one "fork job" writes its table into the parent's namespace instead."""
    from dpone_dagster.workspaces.service import Workspaces
    from tests.lake.lakes import materialize

    reset_store_cache()
    env, forks = pg_s3_env(postgres_server, pg_database, s3_server, s3_bucket), ("conc-a", "conc-b")
    materialize(env, "prod", "raw.raw_orders", "SELECT range AS order_id FROM range(30)")
    materialize(env, "prod", "raw.raw_customers", "SELECT range AS customer_id FROM range(20)")
    for fork in forks:
        Workspaces(env.config).create_fork(fork, "prod", owner="ci")
    raw_counts, before = _sql(env, "prod", RAW_COUNTS), fingerprint(env, "prod")
    for fork in forks:
        materialize(env, fork, ".".join(FORK_MODEL), "SELECT * FROM lake_main.raw.raw_orders")
    materialize(env, "prod", ".".join(PROD_MODEL), "SELECT * FROM lake_main.raw.raw_customers")
    if rogue:  # what a fork job writing into the parent's namespace leaves behind
        materialize(env, "prod", ".".join(FORK_MODEL), "SELECT * FROM lake_main.raw.raw_orders")
        with pytest.raises(AssertionError, match=FORK_MODEL[1]):
            check_isolation(env, s3_server, env.s3_bucket, before, raw_counts, forks)
    else:
        check_isolation(env, s3_server, env.s3_bucket, before, raw_counts, forks)
