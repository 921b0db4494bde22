"""Code-location load time: dpone-dagster against a bare dagster-dbt location, same dbt project.

Each measurement is a fresh Python process that imports a definitions module and builds its
repository (what a code server or a run worker does on start), timed inside the process so
interpreter start-up is left out. Runs alternate between the two locations; the row reports the
median of each. Goal: the whole dpone-dagster location loads in at most 1.5x the bare one.

What a reader could get wrong: the manifest is prepared before timing. A load that has to run
`dbt parse` is not what a deployed location or a `dagster dev` run worker does.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 5
GOAL = 1.5

_TIMER = (
    "import importlib, time\n"
    "start = time.perf_counter()\n"
    "from dagster import Definitions\n"
    "loaded = [importlib.import_module(m) for m in {modules!r}]\n"
    "defs = Definitions.merge(*(m.build_defs() if hasattr(m, 'build_defs') else m.defs for m in loaded))\n"
    "defs.get_repository_def()\n"
    "print(time.perf_counter() - start)\n"
)


def load_seconds(modules: tuple[str, ...], env: dict[str, str]) -> float:
    """Seconds a fresh process takes to import `modules` and build their merged repository."""
    done = subprocess.run(
        [sys.executable, "-c", _TIMER.format(modules=modules)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"loading {', '.join(modules)} failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def run() -> list[dict[str, object]]:
    from dpone_dagster.integration.dbt.project import prepare_manifest

    prepare_manifest()
    with tempfile.TemporaryDirectory(prefix="dpone-bench-") as state:
        env = {**os.environ, "DPONE_PROJECT_ROOT": str(REPO_ROOT), "DPONE_STATE_DIR": state}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        locations = {
            "bare": ("bench.bare_dbt_location",),
            "dbt_domain": ("dpone_dagster.defs.dbt", "dpone_dagster.defs.lake"),
            "location": ("dpone_dagster.definitions",),
        }
        timings: dict[str, list[float]] = {name: [] for name in locations}
        for modules in locations.values():
            load_seconds(modules, env)
        for _ in range(ROUNDS):
            for name, modules in locations.items():
                timings[name].append(load_seconds(modules, env))
    medians = {name: statistics.median(values) for name, values in timings.items()}
    rows = []
    for name, label in (
        ("location", "code location load (all domains)"),
        ("dbt_domain", "dbt + lake domain defs load"),
    ):
        ratio = medians[name] / medians["bare"]
        rows.append(
            {
                "name": label,
                "baseline_s": medians["bare"],
                "measured_s": medians[name],
                "ratio": ratio,
                "goal": f"<= {GOAL}x bare dagster-dbt",
                "note": f"median of {ROUNDS}, fresh process each" + ("" if ratio <= GOAL else "; GOAL MISSED"),
            }
        )
    return rows
