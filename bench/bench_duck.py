"""Connection open time: `duck.connect()` (ducklake only) vs one that also loads postgres_scanner and httpfs.

The second is what every connection paid before those two were loaded on demand (a lake with a
PostgreSQL catalog or an S3 data path loads them in `ResolvedLake.apply`). Goal: <= 0.5x. The thing a
reader could get wrong: both sides open a fresh in-memory DuckDB each time, so the figure includes
DuckDB's own start-up, which both pay.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from bench.timing import best_seconds, ratio_row
from dpone_dagster.lake.duck import DEFAULT_EXTENSIONS, ON_DEMAND_EXTENSIONS, connect

GOAL = 0.5


def run() -> list[dict[str, object]]:
    directory = Path(tempfile.mkdtemp(prefix="dpone-bench-duck-"))
    try:

        def opened(extensions):
            return lambda: connect(extensions=extensions, extension_directory=directory).close()

        everything = best_seconds(opened((*DEFAULT_EXTENSIONS, *ON_DEMAND_EXTENSIONS)), repeats=5, iterations=3)
        needed = best_seconds(opened(DEFAULT_EXTENSIONS), repeats=5, iterations=3)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    row = ratio_row(
        "duck.connect(): ducklake only vs + postgres_scanner, httpfs",
        everything,
        needed,
        f"ratio <= {GOAL:g}",
        "an embedded lake (DuckDB catalog, local data path) loads neither on-demand extension",
    )
    row["met"] = row["ratio"] <= GOAL
    return [row]
