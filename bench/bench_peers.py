"""The peer benchmark (issue 21): "I changed one model: build it isolated, reading prod's upstream".

One row family, side by side in the same rounds, on two projects (each a throwaway project root:
prod built once through Dagster, its manifest kept as the defer state, then a fork):

- 10 models: a copy of `dbt_project_synthetic`, model `daily_revenue`;
- 200 models: `bench/generator.py`'s project, its probe model (an intermediate joining 5 staging
  models).

The model's SQL is edited before EVERY command, as a developer does (one expression gains
`+ n - n`: same rows, a new query), so every path pays for noticing the edit. The paths, each a fresh
process (what a developer types):

- baseline: plain `dbt build --select <model> --defer --state <prod manifest>` (dbt-duckdb attaches
  prod's DuckLake READ_ONLY and a dev DuckLake; no dpone at all, `bench/plain_duckdb_plugin.py`);
- plugin: `dbt build --select <model>` through the dpone plugin in the fork (targets and read set
  handed over as the Dagster asset does); goal <= 1.15x;
- materialize: `DPONE_WORKSPACE=<fork> dagster asset materialize -m dpone_dagster.definitions
  --select <model>`; goal <= 2x;
- graphql: GraphQL `launchRun` of the model against the fork's warm webserver and code server
  (what the UI does) with Dagster's default run launcher, until the run finished; reported: what a
  fallback from the warm launcher, or a home without it, costs;
- graphql_warm: the same against a second webserver on a fork home configured as `dpone dev` writes
  it (`WarmRunLauncher` + the sync run coordinator, docs/warm-runs.md), started through the
  confinement launcher as `dpone dev` confines it; the row says how many counted runs went warm;
  goal <= 1.3x (what a fork's UI does);
- SQLMesh `plan dev --auto-apply` over its own copy of the project (SQLMesh's dbt loader, a plain
  DuckDB file) when `DPONE_BENCH_SQLMESH` names a sqlmesh executable; a row without a goal.

Each figure is the median of `ROUNDS` runs after one uncounted warm-up round (every path's first
parse and first launch), interleaved (a, b, c, d, a, b, ...) so a busy machine slows all alike; rows are
ratios to the baseline of the same project and rounds, with the load average. What a reader could
get wrong: the figures include Python start-up and imports, and the ratios, not the seconds, compare
across machines; on a loaded 2-core machine read them ±30%.
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
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
FORK = "wm-fork-peers"
ROUNDS = int(os.environ.get("DPONE_BENCH_PEERS_ROUNDS", "3"))
SIZES = tuple(int(n) for n in os.environ.get("DPONE_BENCH_PEERS_MODELS", "10,200").split(","))
BIN = Path(sys.executable).parent
GOALS: dict[str, float | None] = {"plugin": 1.15, "materialize": 2.0, "graphql": None, "graphql_warm": 1.3}
"""The issue's goals. A fork's UI launches through the warm run launcher (`dpone dev` configures it), so
the GraphQL goal is `graphql_warm`'s; `graphql` (Dagster's default launcher: a new process loads the
definitions for every run) is what a fallback or a home without the warm launcher costs, reported."""
LABELS = {
    "plugin": "dbt build through the dpone plugin (fork)",
    "materialize": "dagster asset materialize (fork)",
    "graphql": "GraphQL launchRun, warm webserver, Dagster's default run launcher (fork)",
    "graphql_warm": "GraphQL launchRun, warm webserver + warm run launcher (fork, confined)",
}
CONFINED = (sys.executable, "-m", "dpone_dagster.confinement.launcher", "--")
SQLMESH_NOTE = (
    "SQLMesh's own storage (a DuckDB file through its dbt loader, prod planned first), not the DuckLake; "
    "a changed expression is a breaking change to SQLMesh, so its dev plan also rebuilds the model's "
    "downstream"
)
SQLMESH_MISSING = (
    "not measured: DPONE_BENCH_SQLMESH names no sqlmesh executable. `make bench` builds one in .venv-sqlmesh "
    "from bench/sqlmesh-requirements.txt (sqlmesh beside the project's dbt-core and dbt-duckdb; not a "
    "project dependency) and passes it"
)

_PROFILE = """
{profile}:
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


@dataclass(frozen=True)
class Project:
    """A project root the bench may edit, and the one model it edits and builds."""

    models: int
    root: Path
    dbt_dir: Path
    profile: str
    model: str
    schema: str
    reads: tuple[str, ...]  # the model's parents as schema.table: the read set Dagster hands over
    anchor: str  # `<expression> as <column>` in the model's SQL that every edit rewrites

    @property
    def key(self) -> list[str]:
        return ["main", self.schema, self.model]

    @property
    def model_file(self) -> Path:
        return next(self.dbt_dir.glob(f"models/**/{self.model}.sql"))


def synthetic_project(work: Path) -> Project:
    """A copy of dbt_project_synthetic under its own project root (the repository's stays untouched)."""
    root = work / "p10"
    dbt_dir = root / "dbt"
    shutil.copytree(
        REPO_ROOT / "dbt_project_synthetic",
        dbt_dir,
        ignore=shutil.ignore_patterns("target", "logs", ".dpone", "dbt_packages"),
    )
    (root / "dpone.yaml").write_text("dbt_project_dir: dbt\n", encoding="utf-8")
    return Project(
        10,
        root,
        dbt_dir,
        "dbt_project_synthetic",
        "daily_revenue",
        "marts",
        ("staging.stg_payments",),
        "sum(amount) as net_amount",
    )


def _generated_project(work: Path, models: int) -> Project:
    from bench.generator import DBT_DIR, PROJECT_NAME, generate, load_summary

    root = generate(models, 0, 1, base=work / "generated")
    summary = load_summary(root)
    nodes = {n["name"]: n for n in summary["nodes"]}
    probe = nodes[summary["probe"]]
    reads = tuple(nodes[p]["table"] for p in probe["parents"])
    return Project(models, root, root / DBT_DIR, PROJECT_NAME, probe["name"], probe["schema"], reads, " as amount,")


def _env(project: Project, work: Path, workspace: str = "prod") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DPONE_", "DAGSTER_"))}
    home = work / f"home_{workspace}"
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        DPONE_PROJECT_ROOT=str(project.root),
        DPONE_STATE_DIR=str(work / "state"),
        DPONE_WORKSPACE=workspace,
        DAGSTER_HOME=str(home),
        PYTHONPATH=str(REPO_ROOT),
    )
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path = REPO_ROOT) -> float:
    from bench.timing import timed_command

    return timed_command(args, env, cwd)


_BUILD_PROD = (
    "from dagster import materialize\n"
    "from dpone_dagster.integration.dbt.project import prepare_manifest\n"
    "prepare_manifest()\n"
    "from dpone_dagster.definitions import defs\n"
    "from dpone_dagster.defs.dbt.assets import synthetic_dbt_assets\n"
    "r = materialize([synthetic_dbt_assets], resources=dict(defs.resources or {}), raise_on_error=False)\n"
    "assert r.success\n"
)
_LAKE_PATHS = (
    "import json; from dpone_dagster.config import load_config; "
    "l = load_config().embedded_main_lake(); print(json.dumps([str(l.catalog), str(l.data_path)]))"
)


def prod_lake_paths(project: Project, work: Path) -> tuple[str, str]:
    """prod's DuckLake catalog and data path (as the configuration names them)."""
    found = subprocess.run(
        [sys.executable, "-c", _LAKE_PATHS], env=_env(project, work), capture_output=True, text=True, check=True
    )
    catalog, data_path = json.loads(found.stdout)
    return catalog, data_path


def prepare(project: Project, work: Path) -> Path:
    """prod built through Dagster, its manifest kept as the defer state, the fork created, the
    baseline's profile written; returns the defer state folder."""
    prod = _env(project, work)
    _run([sys.executable, "-c", _BUILD_PROD], prod)
    state = work / "prod_state"
    state.mkdir()
    shutil.copy(project.dbt_dir / "target" / "manifest.json", state / "manifest.json")
    _run([str(BIN / "dpone"), "fork", "create", FORK, "--parent", "prod"], prod)
    catalog, data_path = prod_lake_paths(project, work)
    dev = work / "dev"
    dev.mkdir()
    (work / "profiles").mkdir()
    (work / "profiles" / "profiles.yml").write_text(
        _PROFILE.format(
            profile=project.profile, dev=dev, prod_catalog=catalog.removeprefix("duckdb:"), prod_data=data_path
        )
    )
    return state


def _commands(project: Project, work: Path, state: Path) -> dict[str, Callable[[], float]]:
    dbt = str(BIN / "dbt")
    common = ["--project-dir", str(project.dbt_dir), "--quiet"]
    fork = _env(project, work, FORK)
    plugin_env = {
        **fork,
        "DPONE_DBT_TARGETS": f"{project.schema}.{project.model}",
        "DPONE_DBT_READS": ",".join(project.reads),
    }

    def baseline() -> float:
        return _run(
            [
                dbt,
                "build",
                "--select",
                project.model,
                "--defer",
                "--state",
                str(state),
                *common,
                "--profiles-dir",
                str(work / "profiles"),
                "--target-path",
                str(work / "target_dev"),
            ],
            _env(project, work),
        )

    def plugin() -> float:
        return _run(
            [
                dbt,
                "build",
                "--select",
                project.model,
                *common,
                "--profiles-dir",
                str(project.dbt_dir),
                "--target-path",
                str(work / "target_plugin"),
            ],
            plugin_env,
        )

    def materialize() -> float:
        return _run(
            [
                str(BIN / "dagster"),
                "asset",
                "materialize",
                "-m",
                "dpone_dagster.definitions",
                "--select",
                "/".join(project.key),
            ],
            fork,
        )

    return {"baseline": baseline, "plugin": plugin, "materialize": materialize}


def _graphql(server, project: Project, launched: list[str] | None = None) -> Callable[[], float]:
    """Launch the model through GraphQL (what the UI does) and wait until the run finished; with
    `launched`, record the path the run took (`dpone/run_launcher`: warm or default)."""
    from bench.screenshots import RELEASE_LOCATION

    def graphql() -> float:
        start = time.perf_counter()
        run_id = server.launch_assets(RELEASE_LOCATION, [project.key])
        status = _wait_for_run(server, run_id, timeout=900)
        seconds = time.perf_counter() - start
        details = server.run_details(run_id)
        if status != "SUCCESS":
            errors = [e["error"]["message"] for e in details["events"] if e.get("error")]
            messages = [e.get("message", "") for e in details["events"] if "rror" in (e.get("message") or "")]
            raise RuntimeError(f"the GraphQL-launched run ended {status}: {details['tags']} {errors} {messages[-3:]}")
        if launched is not None:  # "warm", or the fallback's code (docs/warm-runs.md)
            tags = details["tags"]
            launched.append(tags.get("dpone/run_launcher_fallback", tags.get("dpone/run_launcher", "none")))
        return seconds

    return graphql


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


@dataclass
class Editor:
    """The developer's edit: one expression of the model gains `+ n - n` (same rows and types, a
    new query for every tool: SQLMesh ignores a comment-only change), in every copy of the model."""

    anchor: str
    files: list[Path]
    count: int = 0
    originals: dict[Path, str] = field(default_factory=dict)

    def __call__(self) -> None:
        self.count += 1
        expression, _, column = self.anchor.rpartition(" as ")
        for path in self.files:
            original = self.originals.setdefault(path, path.read_text(encoding="utf-8"))
            edited = original.replace(self.anchor, f"{expression} + {self.count} - {self.count} as {column}", 1)
            if edited == original:
                raise RuntimeError(f"{path.name} has no {self.anchor!r} to edit")
            path.write_text(edited, encoding="utf-8")


_SQLMESH_PROFILE = """
{profile}:
  target: dev
  outputs:
    dev:
      type: duckdb
      path: "{warehouse}"
      schema: main
      threads: 1
"""


def _sqlmesh(project: Project, work: Path) -> tuple[Callable[[], float], Path] | None:
    """`sqlmesh plan dev` over its own copy of the dbt project (SQLMesh's dbt loader, a plain DuckDB
    file), prod planned once first; None when `DPONE_BENCH_SQLMESH` names no sqlmesh executable."""
    executable = os.environ.get("DPONE_BENCH_SQLMESH", "")
    if not executable or not Path(executable).is_file():
        return None
    copy = work / "sqlmesh" / "project"
    shutil.copytree(project.dbt_dir, copy, ignore=shutil.ignore_patterns("target", "logs", ".dpone", "flows"))
    (copy / "profiles.yml").write_text(
        _SQLMESH_PROFILE.format(profile=project.profile, warehouse=work / "sqlmesh" / "warehouse.duckdb")
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DPONE_", "DAGSTER_", "VIRTUAL_ENV"))}
    _run([executable, "init", "-t", "dbt"], env, cwd=copy)
    _run([executable, "plan", "--auto-apply", "--no-prompts"], env, cwd=copy)  # prod: built once, not timed

    def plan_dev() -> float:
        return _run([executable, "plan", "dev", "--auto-apply", "--no-prompts"], env, cwd=copy)

    return plan_dev, next(copy.glob(f"models/**/{project.model}.sql"))


def warm_fork_webserver(project: Project, work: Path):
    """A webserver for the fork with the warm run launcher, in a fork home as `dpone dev` writes it
    (sync coordinator), confined as `dpone dev` confines it (the launcher starts no worker unconfined).
    A context manager (`bench.screenshots.running_webserver`); its home is `work / "home_warm_ui"`."""
    from bench.screenshots import running_webserver, session_workspace
    from dpone_dagster.workspaces.dagster_home import WARM_RUNS_YAML

    warm_home = work / "home_warm_ui"
    return running_webserver(
        session_workspace(warm_home / "workspace.yaml"),
        dagster_home=warm_home,
        env=_env(project, work, FORK),
        inherit_env=False,
        instance_yaml=WARM_RUNS_YAML + "telemetry:\n  enabled: false\n",
        command_prefix=CONFINED,
    )


def measure(project: Project, work: Path, with_ui: bool = True) -> dict[str, list]:
    state = prepare(project, work)
    commands = _commands(project, work, state)
    edit = Editor(project.anchor, [project.model_file])
    sqlmesh = _sqlmesh(project, work)
    if sqlmesh is not None:
        commands["sqlmesh"], model_copy = sqlmesh
        edit.files.append(model_copy)
    servers: list = []
    launched: list[str] = []  # the path each warm-launcher run took (its `dpone/run_launcher` tag)
    if with_ui:
        from bench.screenshots import running_webserver, session_workspace

        env = _env(project, work, FORK)
        shown = subprocess.run(
            [str(BIN / "dpone"), "dev", "-m", "dpone_dagster.definitions", "--dry-run", "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        # dbt may log a line before the JSON (a project without partitioned models warns on the selector)
        home = Path(json.loads(shown[shown.index("\n{") + 1 if not shown.startswith("{") else 0 :])["dagster_home"])
        server_cm = running_webserver(
            session_workspace(home / "workspace.yaml"), dagster_home=home, env=env, inherit_env=False
        )
        servers.append(server_cm)
        commands["graphql"] = _graphql(server_cm.__enter__(), project)
        warm_cm = warm_fork_webserver(project, work)
        servers.append(warm_cm)
        commands["graphql_warm"] = _graphql(warm_cm.__enter__(), project, launched)
    times: dict[str, list] = {name: [] for name in commands}
    try:
        for round_ in range(ROUNDS + 1):  # round 0 warms up (first parse, first launch) and is not counted
            for name, command in commands.items():
                edit()
                seconds = command()
                if round_:
                    times[name].append(seconds)
    finally:
        for server_cm in servers:
            server_cm.__exit__(None, None, None)
    times["launched_warm"] = [float(path == "warm") for path in launched[1:]]  # round 0 not counted
    times["fallbacks"] = [path for path in launched[1:] if path != "warm"]
    return times


def rows_from(project: Project, times: dict[str, list]) -> list[dict[str, object]]:
    from bench.timing import ratio_row

    base = statistics.median(times["baseline"])
    load = os.getloadavg()[0]
    out = []
    for key, goal in GOALS.items():
        if key not in times:
            continue
        measured = statistics.median(times[key])
        row = ratio_row(
            f"peers, {project.models} models, edited {project.model}: {LABELS[key]} vs dbt build --defer",
            base,
            measured,
            "reported" if goal is None else f"<= {goal}x",
            f"median of {len(times[key])}, edited before each run; load average {load:.1f} on {os.cpu_count()} cores",
        )
        if goal is not None:
            row["met"] = measured / base <= goal
        if key == "graphql_warm" and times.get("launched_warm"):
            warm = int(sum(times["launched_warm"]))
            row["note"] += f"; {warm} of {len(times['launched_warm'])} counted runs launched warm"
            if times.get("fallbacks"):
                row["note"] += f" (the others: {', '.join(times['fallbacks'])})"
        out.append(row)
    name = f"peers, {project.models} models, edited {project.model}: SQLMesh plan dev vs dbt build --defer"
    if "sqlmesh" in times:
        measured = statistics.median(times["sqlmesh"])
        row = ratio_row(name, base, measured, "reported", f"median of {len(times['sqlmesh'])}; {SQLMESH_NOTE}")
        out.append(row)
    else:
        out.append({"name": name, "note": SQLMESH_MISSING})
    return out


def run() -> list[dict[str, object]]:
    from bench.timing import ensure_bytecode

    ensure_bytecode()  # every path starts Python processes: each reads the package's bytecode, as installed
    rows: list[dict[str, object]] = []
    for models in SIZES:
        work = Path(tempfile.mkdtemp(prefix=f"dpone_peers_{models}_"))
        try:
            project = synthetic_project(work) if models == 10 else _generated_project(work, models)
            times = measure(project, work, with_ui=os.environ.get("DPONE_BENCH_PEERS_UI", "1") == "1")
            if os.environ.get("DPONE_BENCH_PEERS_DUMP"):
                Path(f"{os.environ['DPONE_BENCH_PEERS_DUMP']}.{models}.json").write_text(json.dumps(times))
            rows += rows_from(project, times)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return rows


if __name__ == "__main__":
    from bench.__main__ import format_table

    print(format_table(run()))
