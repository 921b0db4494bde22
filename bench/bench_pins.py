"""Pinned vs live defer: the same fork job in a pinned fork and in a live one, same run (issue 21).

One throwaway lake (a state folder): prod built once through Dagster (every unpartitioned dbt asset
of the demo project, tracked), then two forks of prod created through `dpone_dagster.api.create_fork`
— one with `pin=True` (what `dpone fork create --pin` does), one live. The job is one dbt model,
`main/marts/daily_revenue` (upstream deferred to prod), materialized through Dagster in this process
(`dagster.materialize`, as `bench_partition` does) together with the asset checks a `dagster asset
materialize --select` of that model runs (dbt tests, `fork_staleness`, `diff_against_parent`): the
staleness check is where a pinned fork does extra work (it reads the ancestors' current snapshots).
One uncounted warm-up round (each fork's first resolution), then BENCH_PINS_ROUNDS (default 3)
rounds, each four runs in ABBA order (live, pinned, pinned, live; the next round BAAB), because runs
in one process slow down over a session (the load, the forks' growing catalogs) and a plain
alternation charges that drift to whichever side goes second. A round's ratio is its two pinned
runs over its two live runs; the row is the median of the round ratios, goal <= 1.05x, with every
run and the 1-minute load average before and after. With BENCH_PINS_COMMANDS=1 a second row times
the same job as `dagster asset materialize` (a fresh process per run, imports and definitions load
included: the path where issue 21 saw 1.4-2.0x in loaded rounds), same forks, same round scheme.

What a reader could get wrong: in-process runs leave Python start-up, imports and the definitions
load out (both sides would pay them alike), so the ratio is of the run itself and a 5% goal is
tighter than it would be over whole processes; on a loaded two-core machine single runs still
move by more than 5%, so read the spread in the note, not only the median.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.bench_partition import REPO_ROOT, lake_environment
from bench.timing import ratio_row

MODEL = "main/marts/daily_revenue"
FORKS = {"live": "wm-fork-bench-live", "pinned": "wm-fork-bench-pinned"}
ROUNDS = int(os.environ.get("BENCH_PINS_ROUNDS", "3"))
GOAL = 1.05


def _definitions():
    """The dbt assets and every check on them, as the code location defines them."""
    from dpone_dagster.definitions import defs
    from dpone_dagster.defs.dbt.assets import synthetic_dbt_assets

    keys = set(synthetic_dbt_assets.keys)
    checks = [c for c in defs.asset_checks or () if {k.asset_key for k in c.check_keys} & keys]
    return [synthetic_dbt_assets, *checks], defs.resources or {}


def _materialize(state_dir: Path, workspace: str, selection) -> float:
    """Seconds of one in-process `materialize` of `selection` (with its checks) in `workspace`."""
    from dagster import materialize

    definitions, resources = _definitions()
    with lake_environment(state_dir, workspace):
        start = time.perf_counter()
        result = materialize(definitions, resources=dict(resources), selection=selection, raise_on_error=False)
        elapsed = time.perf_counter() - start
    if not result.success:
        raise RuntimeError(f"bench_pins: the materialization failed in {workspace}")
    checked = [e for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    if workspace != "prod" and not checked:
        raise RuntimeError("bench_pins: the fork job ran no asset check (the selection lost them)")
    return elapsed


def _prepare(state_dir: Path) -> None:
    """Prod built once, then the two forks (refused unless exactly the pinned one has pins)."""
    from dagster import AssetSelection

    from dpone_dagster import api
    from dpone_dagster.defs.dbt.assets import synthetic_dbt_assets
    from dpone_dagster.lake.resolution.pins import pins

    _materialize(state_dir, "prod", AssetSelection.assets(*synthetic_dbt_assets.keys))
    found = {}
    with lake_environment(state_dir, "prod"):
        config = api.load()
        for side, fork in FORKS.items():
            api.create_fork(fork, owner="bench", pin=side == "pinned", config=config)
            found[side] = pins(config, fork, "main")
    if not found["pinned"] or found["live"]:
        raise RuntimeError(f"bench_pins: expected one pinned and one live fork, found pins {found}")


def _command(state_dir: Path, workspace: str) -> float:
    """Seconds of `dagster asset materialize --select MODEL` in `workspace`, a fresh process."""
    from bench.timing import timed_command

    env = {k: v for k, v in os.environ.items() if not k.startswith(("DPONE_", "DAGSTER_", "DBT_"))}
    home = state_dir / "dagster_homes" / workspace
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        DPONE_PROJECT_ROOT=str(REPO_ROOT),
        DPONE_STATE_DIR=str(state_dir),
        DPONE_WORKSPACE=workspace,
        DAGSTER_HOME=str(home),
    )
    dagster = Path(sys.executable).parent / "dagster"
    return timed_command(
        [str(dagster), "asset", "materialize", "-m", "dpone_dagster.definitions", "--select", MODEL], env, REPO_ROOT
    )


def _rounds(job: Callable[[str], float]) -> dict[str, object]:
    """One uncounted run per side, then ROUNDS rounds of `job(side)` in ABBA / BAAB order."""
    warm = {side: job(side) for side in ("live", "pinned")}
    times: dict[str, list[float]] = {"live": [], "pinned": []}
    load_before = os.getloadavg()[0]
    for round_no in range(ROUNDS):
        first, second = ("live", "pinned") if round_no % 2 == 0 else ("pinned", "live")
        for side in (first, second, second, first):  # ABBA: a drift within the round weighs on both alike
            times[side].append(job(side))
    return {"times": times, "warm": warm, "loads": (load_before, os.getloadavg()[0])}


def measure(state_dir: Path, *, commands: bool = False) -> dict[str, dict[str, object]]:
    """{'in-process' [, 'command']: the rounds of that path}; the forks are shared by both paths."""
    from dagster import AssetKey

    _prepare(state_dir)
    model = [AssetKey.from_user_string(MODEL)]
    out = {"in-process": _rounds(lambda side: _materialize(state_dir, FORKS[side], model))}
    if commands:
        out["command"] = _rounds(lambda side: _command(state_dir, FORKS[side]))
    return out


def round_ratios(times: dict[str, list[float]]) -> list[float]:
    """Per round, pinned over live: the sum of its two pinned runs over the sum of its two live runs."""
    live, pinned = times["live"], times["pinned"]
    return [(pinned[i] + pinned[i + 1]) / (live[i] + live[i + 1]) for i in range(0, len(live) - 1, 2)]


LABELS = {
    "in-process": "pinned vs live fork: one dbt model materialized (daily_revenue, in-process Dagster)",
    "command": "pinned vs live fork: dagster asset materialize daily_revenue (a fresh process each)",
}


def rows(results: dict[str, dict]) -> list[dict[str, object]]:
    out = []
    for path, result in results.items():
        times = result["times"]
        ratios = round_ratios(times)
        paired = statistics.median(ratios)
        live, pinned = statistics.median(times["live"]), statistics.median(times["pinned"])
        start, end = result["loads"]
        spread = " / ".join(f"{side} " + " ".join(f"{t:.2f}" for t in times[side]) for side in ("live", "pinned"))
        warm = " / ".join(f"{side} {t:.2f}" for side, t in result["warm"].items())
        row = ratio_row(
            LABELS[path],
            live,
            pinned,
            f"<= {GOAL}x",
            f"median of {len(ratios)} round ratios {paired:.3f}x ({' '.join(f'{r:.3f}' for r in ratios)}); "
            f"runs (s) {spread}; warm-up {warm}; "
            f"load avg {start:.2f} -> {end:.2f} on {os.cpu_count()} cores",
        )
        row["ratio"] = paired
        row["met"] = paired <= GOAL
        out.append(row)
    return out


def run() -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="dpone-bench-pins-") as work:
        return rows(measure(Path(work), commands=os.environ.get("BENCH_PINS_COMMANDS") == "1"))


if __name__ == "__main__":
    from bench.__main__ import format_table

    print(format_table(run()))
