"""The fork inner loop: "I changed one model: build it isolated, reading prod's upstream".

Side by side in one run, on one throwaway lake (prod built once through Dagster, then a fork):

- baseline: plain `dbt build --select <model> --defer --state <prod manifest>` (dbt-duckdb attaches
  prod's DuckLake READ_ONLY and a dev DuckLake; no dpone at all, `bench/plain_duckdb_plugin.py`);
- the plain service path: `dbt build --select <model>` through the dpone plugin in the fork
  (targets and read set handed over as the Dagster asset does); goal <= 1.5x;
- `dagster asset materialize -m dpone_dagster.definitions --select <model>` with
  `DPONE_WORKSPACE=<fork>`; goal <= 3x;
- a UI-equivalent launch: GraphQL `launchRun` of the model against the fork's warm webserver and
  code server, until the run finished; goal <= 2x.

Each is the median of `REPEATS` wall-clock runs, interleaved (a, b, c, d, a, b, ...) so a busy
machine slows all of them alike. What a reader could get wrong: every command is a fresh process
(what a developer types), so the figures include Python start-up and imports, and the ratios, not
the seconds, are what compares across machines. SQLMesh is not installed here, so it has no row.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
MODEL = "daily_revenue"
MODEL_KEY = ["main", "marts", MODEL]
FORK = "wm-fork-inner-loop"
REPEATS = int(os.environ.get("DPONE_BENCH_INNER_REPEATS", "3"))
BIN = Path(sys.executable).parent

_PROFILE = """
dbt_project_synthetic:
  target: dev
  outputs:
    dev:
      type: duckdb
      path: ":memory:"
      database: dev_lake
      schema: main
      threads: 1
      plugins:
        - module: bench.plain_duckdb_plugin
      attach:
        - path: "ducklake:{dev}/dev.ducklake"
          alias: dev_lake
          is_ducklake: true
          options: {{data_path: "{dev}/data/"}}
        - path: "ducklake:{prod_catalog}"
          alias: lake_main
          is_ducklake: true
          read_only: true
          options: {{data_path: "{prod_data}"}}
"""


def _env(work: Path, workspace: str = "prod") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DPONE_", "DAGSTER_"))}
    env.update(
        DPONE_PROJECT_ROOT=str(REPO_ROOT),
        DPONE_STATE_DIR=str(work / "state"),
        DPONE_WORKSPACE=workspace,
        DAGSTER_HOME=str(work / f"home_{workspace}"),
        PYTHONPATH=str(REPO_ROOT),
    )
    (work / f"home_{workspace}").mkdir(parents=True, exist_ok=True)
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path = REPO_ROOT) -> float:
    start = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:4])} failed: {(done.stdout + done.stderr)[-1500:]}")
    return elapsed


def _prepare(work: Path) -> dict[str, object]:
    """prod built through Dagster, its manifest kept as the defer state, the fork created."""
    from dpone_dagster.integration.dbt.project import prepare_manifest

    prepare_manifest()
    prod = _env(work)
    build = (
        "from dagster import materialize\n"
        "from dpone_dagster.definitions import defs\n"
        "from dpone_dagster.defs.dbt.assets import synthetic_dbt_assets\n"
        "r = materialize([synthetic_dbt_assets], resources=dict(defs.resources or {}), raise_on_error=False)\n"
        "assert r.success\n"
    )
    _run([sys.executable, "-c", build], prod)
    state = work / "prod_state"
    state.mkdir()
    shutil.copy(REPO_ROOT / "dbt_project_synthetic" / "target" / "manifest.json", state / "manifest.json")
    _run([str(BIN / "dpone"), "fork", "create", FORK, "--parent", "prod"], prod)
    config = json.loads(
        subprocess.run(
            [sys.executable, "-c", "import json; from dpone_dagster.config import load_config; "
             "l = load_config().embedded_main_lake(); print(json.dumps([str(l.catalog), str(l.data_path)]))"],
            env=prod, capture_output=True, text=True, check=True,
        ).stdout
    )
    catalog, data_path = config
    dev = work / "dev"
    dev.mkdir()
    (work / "profiles").mkdir()
    (work / "profiles" / "profiles.yml").write_text(
        _PROFILE.format(dev=dev, prod_catalog=catalog.removeprefix("duckdb:"), prod_data=data_path)
    )
    return {"state": state}


def _commands(work: Path, prepared: dict[str, object]) -> dict[str, Callable[[], float]]:
    project = REPO_ROOT / "dbt_project_synthetic"
    dbt = str(BIN / "dbt")
    common = ["--project-dir", str(project), "--quiet"]
    fork = _env(work, FORK)
    service_env = {**fork, "DPONE_DBT_TARGETS": f"marts.{MODEL}", "DPONE_DBT_READS": "staging.stg_payments"}

    def baseline() -> float:
        return _run(
            [dbt, "build", "--select", MODEL, "--defer", "--state", str(prepared["state"]), *common,
             "--profiles-dir", str(work / "profiles"), "--target-path", str(work / "target_dev")],
            _env(work),
        )

    def service() -> float:
        return _run(
            [dbt, "build", "--select", MODEL, *common, "--profiles-dir", str(project),
             "--target-path", str(work / "target_service")],
            service_env,
        )

    def materialize() -> float:
        return _run(
            [str(BIN / "dagster"), "asset", "materialize", "-m", "dpone_dagster.definitions",
             "--select", "/".join(MODEL_KEY)],
            fork,
        )

    return {"baseline": baseline, "service": service, "materialize": materialize}


def _wait_for_run(server, run_id: str, timeout: float) -> str:
    """The run's final status, polled every 0.1 s (the webserver helper's 0.5 s would add up to
    half a second to a run of a few seconds)."""
    from bench.screenshots import _RUN_STATUS, FINISHED

    deadline = time.monotonic() + timeout
    while True:
        status = server.graphql(_RUN_STATUS, {"runId": run_id})["runOrError"].get("status")
        if status in FINISHED:
            return status
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} still {status} after {timeout}s")
        time.sleep(0.1)


def measure(work: Path, with_ui: bool = True) -> dict[str, list[float]]:
    prepared = _prepare(work)
    commands = _commands(work, prepared)
    times: dict[str, list[float]] = {name: [] for name in commands}
    server_cm = None
    if with_ui:
        from bench.screenshots import RELEASE_LOCATION, running_webserver, session_workspace

        env = _env(work, FORK)
        home = Path(json.loads(subprocess.run(
            [str(BIN / "dpone"), "dev", "--dry-run", "--json"], env=env, capture_output=True, text=True, check=True
        ).stdout)["dagster_home"])
        server_cm = running_webserver(session_workspace(home / "workspace.yaml"), dagster_home=home, env=env, inherit_env=False)
        server = server_cm.__enter__()

        def ui() -> float:
            start = time.perf_counter()
            run_id = server.launch_assets(RELEASE_LOCATION, [MODEL_KEY])
            status = _wait_for_run(server, run_id, timeout=600)
            if status != "SUCCESS":
                raise RuntimeError(f"the GraphQL-launched run ended {status}")
            return time.perf_counter() - start

        commands["ui_launch"] = ui
        times["ui_launch"] = []
    try:
        for _ in range(REPEATS):
            for name, command in commands.items():
                times[name].append(command())
    finally:
        if server_cm is not None:
            server_cm.__exit__(None, None, None)
    return times


ROWS = (
    ("service", "fork inner loop: dbt build through the dpone plugin (fork) vs dbt build --defer", 1.5),
    ("materialize", "fork inner loop: dagster asset materialize (fork) vs dbt build --defer", 3.0),
    ("ui_launch", "fork inner loop: GraphQL launch, warm code server (fork) vs dbt build --defer", 2.0),
)


def rows_from(times: dict[str, list[float]], note: str = "") -> list[dict[str, object]]:
    from bench.timing import ratio_row

    base = statistics.median(times["baseline"])
    out = []
    for key, name, goal in ROWS:
        if key not in times:
            continue
        measured = statistics.median(times[key])
        load = os.getloadavg()[0]
        row = ratio_row(
            name, base, measured, f"<= {goal}x", note or f"median of {len(times[key])}, model {MODEL}, load {load:.1f}"
        )
        row["met"] = measured / base <= goal
        out.append(row)
    return out


def run() -> list[dict[str, object]]:
    work = Path(tempfile.mkdtemp(prefix="dpone_inner_loop_"))
    try:
        times = measure(work, with_ui=os.environ.get("DPONE_BENCH_INNER_UI", "1") == "1")
        if os.environ.get("DPONE_BENCH_INNER_DUMP"):
            Path(os.environ["DPONE_BENCH_INNER_DUMP"]).write_text(json.dumps(times))
        return rows_from(times)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    from bench.__main__ import format_table

    print(format_table(run()))
