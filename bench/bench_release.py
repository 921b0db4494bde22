"""Release benchmarks: bundle verification against raw SHA-256, delivery time at 10x the workloads, and
determinism of the real pipeline.

Rows are `{name, baseline_s, measured_s, ratio, goal, met}` with the baseline measured in the same run on
the same machine, so the ratio is meaningful where absolute seconds are not.

- Verification: `open_bundle` (parse and check the parent, every constituent, every sidecar) over a
  release carrying ~32 MiB of source, against `hashlib.sha256` over exactly the same member bytes.
  Goal: verification throughput at least 50% of raw hashing, i.e. time ratio <= 2.
- Scale: compose + publish (local registry) + materialize (local cache) of a release with 10x the
  native and ordinary workloads, against the same path at 1x. Goal: ratio <= 12.
- Determinism: the real pipeline on the committed `dbt_project_synthetic` (models + flows): 100 runs
  of flow capture + grant + compose + bundle verification on one real dbt compile, each under a
  fresh target and in a fresh stage directory, plus `DPONE_BENCH_FULL_RUNS` (default 2) full runs
  that extract the source and run dbt in fresh directories. Goal: exactly one distinct identity
  (the note says whether it equals the golden file of `tests/release/test_real_release.py`).

The one thing a reader could get wrong: the first two rows run on fabricated inputs
(`tests.release.fabricated`, no dbt) under one synthetic policy whose workload limit is raised for
the bench; only the determinism row runs dbt and the flow capture. Nothing here uses a real authority.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench.timing import best_seconds, ratio_row
from dpone_dagster.authority.synthetic import SyntheticAuthority, synthetic_limits
from dpone_dagster.release.build.bundle import open_bundle
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
from dpone_dagster.release.delivery.registry import ReleaseRegistry
from dpone_dagster.release.source.snapshot import open_source
from tests.release.fabricated import SyntheticTarget, synthetic_release
from tests.release.real_pipeline import SYNTHETIC_PROJECT, compose_real, pipeline_for, release_tree

SOURCE_FILES = 32
SOURCE_FILE_BYTES = 1024 * 1024
BASE_MODELS = 10
BASE_WORKLOADS = 10
DETERMINISM_RUNS = 100
GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "release" / "golden" / "real_release_tree.json"


def _target() -> SyntheticTarget:
    limits = synthetic_limits(max_workloads=10_000, max_source_bytes=200 * 1024 * 1024)
    return SyntheticTarget(authority=SyntheticAuthority(policy_options={"limits": limits}))


def _verification_row() -> dict[str, object]:
    line = b"select 1 as synthetic_value -- padding to a realistic SQL file size\n"
    big = (line * (SOURCE_FILE_BYTES // len(line) + 1))[:SOURCE_FILE_BYTES]
    edit = {
        f"flows/transfer/sql/bulk_{index:02d}.sql": big[:-8] + f"{index:08d}".encode() for index in range(SOURCE_FILES)
    }
    release = synthetic_release(_target(), edit=edit, max_source_bytes=64 * 1024 * 1024)
    members = dict(release.bundle.members)
    total = sum(len(data) for data in members.values())

    def raw_hash() -> None:
        for data in members.values():
            hashlib.sha256(data).digest()

    def verify() -> None:
        open_bundle(members, expected_release_id=release.bundle.release_id)

    return _with_met(
        ratio_row(
            f"open_bundle over {len(members)} members ({total / 2**20:.1f} MiB) vs raw SHA-256 of the same bytes",
            best_seconds(raw_hash, 5),
            best_seconds(verify, 5),
            "ratio <= 2 (verification throughput >= 50% of raw SHA-256)",
        ),
        2,
    )


def _delivery_seconds(scale: int) -> float:
    models = {f"model_{index:05d}": f"marts.table_{index:05d}" for index in range(BASE_MODELS * scale)}
    workloads = {
        f"flow_{index:05d}": ((f"raw.flow_{index:05d}",), ("prepare",)) for index in range(BASE_WORKLOADS * scale)
    }

    def deliver() -> None:
        target = _target()
        root = Path(tempfile.mkdtemp(prefix="dpone-bench-"))
        try:
            release = synthetic_release(target, models=models, workloads=workloads)
            ReleaseRegistry(LocalDirectoryStore(root / "registry")).publish(
                release.bundle,
                authority=release.authority,
                receipt=target.publication(release.bundle, release.authority),
                admission=target.issuer,
            )
            cache = ReleaseCache(root / "cache", admission=target.issuer, clock=target.clock)
            cache.materialize(
                release.bundle,
                authority=release.authority,
                receipt=target.materialization(release.bundle, release.authority),
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)

    return best_seconds(deliver, 3)


def _scale_row() -> dict[str, object]:
    base = BASE_MODELS + BASE_WORKLOADS
    return _with_met(
        ratio_row(
            f"compose + publish + materialize at {10 * base} workloads vs {base}",
            _delivery_seconds(1),
            _delivery_seconds(10),
            "ratio <= 12 (near-linear in the workload count)",
        ),
        12,
    )


def _with_met(row: dict[str, object], bound: float) -> dict[str, object]:
    row["met"] = float(row["ratio"]) <= bound
    row["goal"] = f"{row['goal']}: {'met' if row['met'] else 'NOT met'}"
    return row


def _full_run(root: Path) -> tuple[float, dict[str, object]]:
    """Extract the source, compile with dbt, capture, compose: all in fresh directories under `root`."""
    root.mkdir(parents=True)
    start = time.perf_counter()
    with open_source(SYNTHETIC_PROJECT, work_dir=root) as tree:
        native = pipeline_for(SyntheticTarget(), root / "state", work_dir=root).compile_native(tree)
        bundle = compose_real(tree, native, root / "state", work_dir=root).bundle
    return time.perf_counter() - start, release_tree(bundle)


def _determinism_row(runs: int = DETERMINISM_RUNS) -> dict[str, object]:
    full_runs = max(1, int(os.environ.get("DPONE_BENCH_FULL_RUNS", "2")))
    work = Path(tempfile.mkdtemp(prefix="dpone-bench-determinism-"))
    trees: list[dict[str, object]] = []
    compose_seconds: list[float] = []
    try:
        with open_source(SYNTHETIC_PROJECT, work_dir=work) as tree:
            native = pipeline_for(SyntheticTarget(), work / "state", work_dir=work).compile_native(tree)
            for run in range(runs):
                stage = work / f"stage-{run}"
                stage.mkdir()
                start = time.perf_counter()
                bundle = compose_real(
                    tree, native, work / f"state-{run}", target=SyntheticTarget(), work_dir=stage
                ).bundle
                compose_seconds.append(time.perf_counter() - start)
                trees.append(release_tree(bundle))
        full_seconds = []
        for run in range(full_runs):
            seconds, produced = _full_run(work / f"full-{run}")
            full_seconds.append(seconds)
            trees.append(produced)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    identities = {str(item["release_id"]) for item in trees}
    distinct_trees = {json.dumps(item, sort_keys=True) for item in trees}
    met = len(identities) == 1 and len(distinct_trees) == 1
    golden = json.loads(GOLDEN.read_text())["release_id"] if GOLDEN.is_file() else None
    return {
        "name": f"{runs}-run determinism on the real pipeline: distinct identities = {len(identities)}",
        "baseline_s": min(full_seconds),
        "measured_s": min(compose_seconds),
        "ratio": min(compose_seconds) / min(full_seconds),
        "goal": f"distinct identities = 1: {'met' if met else 'NOT met'}",
        "met": met,
        "note": f"{runs} x capture+grant+compose+bundle on one real dbt compile, + {full_runs} full runs with dbt in "
        f"fresh dirs (baseline_s: one full run; measured_s: one run after compile); distinct member trees: "
        f"{len(distinct_trees)}; identity {'equals' if identities == {golden} else 'DIFFERS from'} the golden file",
    }


def run() -> list[dict[str, object]]:
    return [_verification_row(), _scale_row(), _determinism_row()]


if __name__ == "__main__":
    for row in run():
        print(
            (
                f"{row['ratio']:8.3g}x  {row['measured_s']:9.3f} s vs {row['baseline_s']:9.3f} s  {row['name']}  "
                f"[{row['goal']}]"
            )
        )
