"""Code-location load of the shop project adopted with `dpone init`, against a bare dagster-dbt location
over the same shop dbt project (issue 18: goal <= 1.2x).

A work folder gets a copy of tests/fixtures/shop twice: `dg/` as it is (a dg project: `dpone init`
writes the component's defs.yaml, the location is `shop.definitions`, which loads the defs folder)
and `plain/` without the dg project's files (`dpone init` writes a `definitions.py` with the
factory). Beside the dg copy's dbt project sits a tiny module, `bare_shop_location.py`: only what
the dagster-dbt documentation shows (a `DbtProject` over the same `shop_dbt` folder with a
target folder of its own, one `@dbt_assets`, a `DbtCliResource`; the same shape as
bench/bare_dbt_location.py, which stays the baseline of bench_load). Each measurement is a fresh
process that imports the location module and builds its repository, timed inside the process
(`LOAD_TIMER`, interpreter start-up left out). One uncounted warm-up load of each location, then
`BENCH_ADOPTION_ROUNDS` (default 3) interleaved rounds; each row reports the medians and the
median of the per-round ratios, with the load average (`uptime`) before and after.

What a reader could get wrong: the dg row includes Dagster's own defs-folder loader, which imports
every `dagster_dg_cli.registry_modules` entry point installed in the environment (dagster's,
dagster_dbt's, dagster_aws's and dpone's own) on every load, whatever the project uses; the plain
row has no such scan. The manifests are prepared by the warm-up, never timed.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SHOP = REPO_ROOT / "tests" / "fixtures" / "shop"
GOAL = 1.2
BIN = Path(sys.executable).parent

LOAD_TIMER = (
    "import importlib, sys, time\n"
    "start = time.perf_counter()\n"
    "import dagster as dg\n"
    "from dagster.components.definitions import LazyDefinitions\n"
    "module = importlib.import_module(sys.argv[1])\n"
    "(found,) = [v for v in vars(module).values() if isinstance(v, (dg.Definitions, LazyDefinitions))]\n"
    "defs = found() if isinstance(found, LazyDefinitions) else found\n"
    "defs.get_repository_def()\n"
    "print(time.perf_counter() - start)\n"
)

BARE_LOCATION = '''"""A bare dagster-dbt location over the shop's dbt project (written by bench/bench_adoption.py)."""

from pathlib import Path

from dagster import AssetExecutionContext, Definitions
from dagster_dbt import DbtCliResource, DbtProject, dbt_assets

project = DbtProject(project_dir=Path(__file__).resolve().parent / "shop_dbt", target_path="target_bare")


@dbt_assets(manifest=project.manifest_path, project=project)
def bare_dbt_assets(context: AssetExecutionContext, dbt: DbtCliResource):
    yield from dbt.cli(["build"], context=context).stream()


defs = Definitions(assets=[bare_dbt_assets], resources={"dbt": DbtCliResource(project_dir=project)})
'''


def _env() -> dict[str, str]:
    """This interpreter's environment without any dpone, Dagster home or dbt path setting of the caller's."""
    dropped = ("DPONE_", "DAGSTER_HOME", "DBT_TARGET_PATH", "DBT_LOG_PATH", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:4])} failed in {cwd.name}: {(done.stdout + done.stderr)[-2000:]}")
    return done.stdout


def load_seconds(module: str, cwd: Path, env: dict[str, str]) -> float:
    """Seconds a fresh process in `cwd` takes to import `module` and build its repository."""
    return float(_run([sys.executable, "-c", LOAD_TIMER, module], cwd, {**env, "PYTHONPATH": str(cwd)}).split()[-1])


def prepare(work: Path, env: dict[str, str]) -> dict[str, tuple[str, Path]]:
    """The adopted copies and the bare location: {name: (module, folder it loads from)}."""
    dg_root, plain_root = work / "dg", work / "plain"
    shutil.copytree(SHOP, dg_root)
    shutil.copytree(SHOP / "shop_dbt", plain_root / "shop_dbt")
    for root in (dg_root, plain_root):
        _run([str(BIN / "dpone"), "init"], root, env)
    (dg_root / "bare_shop_location.py").write_text(BARE_LOCATION)
    dbt_dir = dg_root / "shop_dbt"  # the bare location's manifest, in its own target folder, dbt's own profile
    _run(
        [str(BIN / "dbt"), "parse", "--profiles-dir", ".", "--target", "dev", "--target-path", "target_bare"],
        dbt_dir,
        env,
    )
    return {
        "bare": ("bare_shop_location", dg_root),
        "dg": ("shop.definitions", dg_root),
        "plain": ("definitions", plain_root),
    }


def _load_average() -> str:
    """The 1, 5 and 15 minute load averages, as `uptime` prints them."""
    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())


def run() -> list[dict[str, object]]:
    rounds = int(os.environ.get("BENCH_ADOPTION_ROUNDS", "3"))
    env = _env()
    load_before = _load_average()
    with tempfile.TemporaryDirectory(prefix="dpone-bench-adoption-") as folder:
        locations = prepare(Path(folder), env)
        timings: dict[str, list[float]] = {name: [] for name in locations}
        for module, cwd in locations.values():
            load_seconds(module, cwd, env)  # warm-up: manifests, bytecode
        for _ in range(rounds):
            for name, (module, cwd) in locations.items():
                timings[name].append(load_seconds(module, cwd, env))
    load_after = _load_average()
    rows = []
    for name, label in (
        ("dg", "adopted shop load: dg project + component (dpone init) vs bare dagster-dbt"),
        ("plain", "adopted shop load: definitions.py + factory (dpone init) vs bare dagster-dbt"),
    ):
        ratios = [m / b for m, b in zip(timings[name], timings["bare"])]
        ratio = statistics.median(ratios)
        every = ", ".join(f"{m:.1f}/{b:.1f}" for m, b in zip(timings[name], timings["bare"]))
        rows.append(
            {
                "name": label,
                "baseline_s": statistics.median(timings["bare"]),
                "measured_s": statistics.median(timings[name]),
                "ratio": ratio,
                "goal": f"<= {GOAL}x bare dagster-dbt",
                "met": ratio <= GOAL,
                "note": f"median of {rounds} paired rounds (s: {every}); {load_before} before, {load_after} after",
            }
        )
    return rows


if __name__ == "__main__":
    from bench.__main__ import format_table

    print(format_table(run()))
