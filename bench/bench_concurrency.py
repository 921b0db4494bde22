"""Bench row: 9 runs at once (8 fork dbt runs + 1 prod run) vs the same 9 one after another.

Both are measured in one pytest run of tests/scale/test_concurrency.py (PostgreSQL catalog + moto S3,
Dagster storage on PostgreSQL, one gRPC code server per deployment, `dagster-daemon` with the queued
run coordinator and the default launcher: one run-worker process per run). The test first runs the
nine at once (and asserts no failure, no lost table, no cross-workspace write), then, with
DPONE_CONCURRENCY_REPORT set, submits the same nine one at a time, each after the previous finished.

What a reader could get wrong: the ratio is throughput (runs/minute queued-at-once over runs/minute
one-after-another), so > 1 is better; the goal is 0 failures, not a speed-up, and on a 2-core machine
the nine run workers, nine dbt processes and their definition loads compete for the same cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = 9


def run() -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="dpone-bench-conc-") as tmp:
        report = Path(tmp) / "report.json"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
             "tests/scale/test_concurrency.py"],
            cwd=ROOT, env={**os.environ, "DPONE_CONCURRENCY_REPORT": str(report)},
            capture_output=True, text=True,
        )
        failed = done.returncode != 0 or not report.exists()
        timings = {} if failed else json.loads(report.read_text(encoding="utf-8"))
    if failed:
        return [{
            "name": f"{RUNS} concurrent runs (8 forks + prod) on PostgreSQL + S3 vs sequential",
            "goal": "0 failures", "met": False,
            "note": "failed: " + (done.stdout.strip().splitlines() or ["no output"])[-1][:120],
        }]
    concurrent, sequential = timings["concurrent_s"], timings["sequential_s"]
    ratio = sequential / concurrent  # throughput ratio: (9/concurrent) / (9/sequential)
    return [{
        "name": f"{RUNS} concurrent runs (8 forks + prod) on PostgreSQL + S3 vs sequential",
        "baseline_s": sequential,
        "measured_s": concurrent,
        "ratio": ratio,
        "goal": "0 failures (throughput ratio reported)",
        "met": True,
        "note": (
            f"{RUNS * 60 / concurrent:.1f} runs/min at once vs {RUNS * 60 / sequential:.1f} one after "
            f"another; ratio = throughput gain; all nine overlapped: {timings['all_nine_overlapped']}; "
            f"{os.cpu_count()} cores"
        ),
    }]
