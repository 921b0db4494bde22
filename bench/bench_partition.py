"""One partition vs the same model unpartitioned: what a partitioned dbt run costs beyond its data (issue 21).

Both rows build `marts.daily_order_totals` of the demo project in prod through Dagster, in this
process, alternating in the same rounds: the baseline is the model as a plain (unpartitioned)
fork-aware dbt asset, the measured one is a single day-partition of the partitioned op (the window
passed as environment variables, so dbt partial-parses; with `--vars` it re-parsed the project).
Each side has its own lake (a state folder with the upstream built once), so the unpartitioned
build never records the partitioned table. Goal: ≤ 1.2×.

What a reader could get wrong: the figures are whole `materialize` calls (dbt start-up, the lake
recording, Dagster's in-process run) with the demo's tiny data, so they measure the fixed cost of a
partition run, not scanning; the median of BENCH_PARTITION_ROUNDS (default 3) is reported with the
load average, and ratios on a loaded two-core machine move by ±30%.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from bench.timing import ratio_row

REPO_ROOT = Path(__file__).resolve().parent.parent
DAY = "2024-01-10"


@contextmanager
def lake_environment(state_dir: Path, workspace: str = "prod") -> Iterator[None]:
    """The demo project's lake in `state_dir` as `workspace` sees it, in this process, for code that
    reads the environment (config, control store, dbt); `bench_pins` uses it for its forks too."""
    from dpone_dagster.control.store import reset_store_cache
    from dpone_dagster.integration.dbt.run import environment

    values = {"DPONE_PROJECT_ROOT": str(REPO_ROOT), "DPONE_STATE_DIR": str(state_dir), "DPONE_WORKSPACE": workspace}
    with environment(values):
        reset_store_cache()
        try:
            yield
        finally:
            reset_store_cache()


def _materialize(state_dir: Path, assets, selection, resources: Mapping, **options) -> None:
    from dagster import materialize

    with lake_environment(state_dir):
        result = materialize([assets], resources=dict(resources), selection=selection, raise_on_error=False, **options)
    if not result.success:
        raise RuntimeError(f"bench_partition: a materialization failed in {state_dir.name}")


def _timed(action: Callable[[], None]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def run() -> list[dict[str, object]]:
    from dagster import AssetKey

    from dpone_dagster.definitions import defs
    from dpone_dagster.defs.dbt.assets import DBT_PROJECT, TRANSLATOR, synthetic_dbt_assets
    from dpone_dagster.defs.dbt.partitioned import synthetic_dbt_daily_assets
    from dpone_dagster.integration.dbt.factory import fork_aware_dbt_assets
    from dpone_dagster.integration.dbt.partitioned import PARTITIONED_SELECT

    rounds = int(os.environ.get("BENCH_PARTITION_ROUNDS", "3"))
    daily = AssetKey(["main", "marts", "daily_order_totals"])
    upstream = [
        AssetKey(["main", *n.split(".")])
        for n in ("raw.raw_orders", "staging.stg_orders", "raw.raw_customers", "staging.stg_customers")
    ]
    plain = fork_aware_dbt_assets(
        project=DBT_PROJECT, translator=TRANSLATOR, select=PARTITIONED_SELECT, name="bench_unpartitioned_daily"
    )
    resources = defs.resources or {}
    with tempfile.TemporaryDirectory(prefix="bench_partition_") as work:
        whole, partitioned = Path(work) / "unpartitioned", Path(work) / "partitioned"
        for state in (whole, partitioned):
            _materialize(state, synthetic_dbt_assets, upstream, resources)
        times: dict[str, list[float]] = {"whole": [], "one": []}
        for _ in range(rounds):
            times["whole"].append(_timed(lambda: _materialize(whole, plain, [daily], resources)))
            times["one"].append(
                _timed(
                    lambda: _materialize(partitioned, synthetic_dbt_daily_assets, [daily], resources, partition_key=DAY)
                )
            )
    load = os.getloadavg()[0]
    row = ratio_row(
        "one partition vs the same model unpartitioned (daily_order_totals, prod)",
        statistics.median(times["whole"]),
        statistics.median(times["one"]),
        "<= 1.2x",
        f"median of {rounds} alternating materializations; load average {load:.1f} on {os.cpu_count()} cores",
    )
    row["met"] = row["ratio"] <= 1.2
    return [row]
