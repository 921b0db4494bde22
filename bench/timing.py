"""The timing helper and the row shape every benchmark module shares.

`best_seconds` reports the best of several repeats, because the fastest run is the one least
disturbed by the machine; `ratio_row` builds the `{name, baseline_s, measured_s, ratio, goal, note}`
row `python -m bench` prints. The one thing a reader could get wrong: with `iterations > 1` the
result is seconds *per call* (the batch time divided by `iterations`), not per batch.

`ensure_bytecode` compiles the package as pip does for an installed wheel: where
`PYTHONDONTWRITEBYTECODE` is set (these machines set it), an editable checkout is otherwise compiled
from source by every timed process (~0.3 s for the definitions), which the peer baseline, a dbt with
its bytecode, never pays.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path


def ensure_bytecode() -> None:
    """Write the bytecode of `dpone_dagster` and `bench` where it is missing or stale (quiet, all cores)."""
    import compileall

    root = Path(__file__).resolve().parents[1]
    for package in ("dpone_dagster", "bench"):
        compileall.compile_dir(str(root / package), quiet=1, workers=0)


def best_seconds(action: Callable[[], object], repeats: int = 5, iterations: int = 1) -> float:
    """Best mean seconds per call of `action` over `repeats` batches of `iterations` calls."""
    if repeats < 1 or iterations < 1:
        raise ValueError("repeats and iterations must be at least 1")
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iterations):
            action()
        best = min(best, (time.perf_counter() - start) / iterations)
    return best


def ratio_row(name: str, baseline_s: float, measured_s: float, goal: str, note: str = "") -> dict[str, object]:
    """One benchmark row; the ratio is measured over baseline (infinite when the baseline is 0)."""
    return {
        "name": name,
        "baseline_s": baseline_s,
        "measured_s": measured_s,
        "ratio": measured_s / baseline_s if baseline_s else float("inf"),
        "goal": goal,
        "note": note,
    }


def timed_command(args: list[str], env: Mapping[str, str], cwd: Path) -> float:
    """Wall-clock seconds of one command (a fresh process); raises with its output's tail when it fails."""
    start = time.perf_counter()
    done = subprocess.run(args, env=dict(env), cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:5])} failed: {(done.stdout + done.stderr)[-1500:]}")
    return elapsed
