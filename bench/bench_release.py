"""Release benchmarks: bundle verification against raw SHA-256, and delivery time at 10x the workloads.

Rows are `{name, baseline_s, measured_s, ratio, goal}` with the baseline measured in the same run on
the same machine, so the ratio is meaningful where absolute seconds are not.

- Verification: `open_bundle` (parse and check the parent, every constituent, every sidecar) over a
  release carrying ~32 MiB of source, against `hashlib.sha256` over exactly the same member bytes.
  Goal: verification throughput at least 50% of raw hashing, i.e. time ratio <= 2.
- Scale: compose + publish (local registry) + materialize (local cache) of a release with 10x the
  native and ordinary workloads, against the same path at 1x. Goal: ratio <= 12.

The one thing a reader could get wrong: both sizes run under one synthetic policy whose workload
limit is raised for the bench; nothing here uses a real authority.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from dpone_dagster.authority.synthetic import SyntheticAuthority, synthetic_limits
from dpone_dagster.release.bundle import open_bundle
from dpone_dagster.release.install import ReleaseCache
from dpone_dagster.release.object_stores import LocalDirectoryStore
from dpone_dagster.release.registry import ReleaseRegistry
from tests.release.fabricated import SyntheticTarget, synthetic_release

from bench.timing import best_seconds, ratio_row

SOURCE_FILES = 32
SOURCE_FILE_BYTES = 1024 * 1024
BASE_MODELS = 10
BASE_WORKLOADS = 10


def _target() -> SyntheticTarget:
    limits = synthetic_limits(max_workloads=10_000, max_source_bytes=200 * 1024 * 1024)
    return SyntheticTarget(authority=SyntheticAuthority(policy_options={"limits": limits}))


def _verification_row() -> dict[str, object]:
    line = b"select 1 as synthetic_value -- padding to a realistic SQL file size\n"
    big = (line * (SOURCE_FILE_BYTES // len(line) + 1))[:SOURCE_FILE_BYTES]
    edit = {f"flows/transfer/sql/bulk_{index:02d}.sql": big[:-8] + f"{index:08d}".encode() for index in range(SOURCE_FILES)}
    release = synthetic_release(_target(), edit=edit, max_source_bytes=64 * 1024 * 1024)
    members = dict(release.bundle.members)
    total = sum(len(data) for data in members.values())

    def raw_hash() -> None:
        for data in members.values():
            hashlib.sha256(data).digest()

    def verify() -> None:
        open_bundle(members, expected_release_id=release.bundle.release_id)

    return ratio_row(
        f"open_bundle over {len(members)} members ({total / 2**20:.1f} MiB) vs raw SHA-256 of the same bytes",
        best_seconds(raw_hash, 5),
        best_seconds(verify, 5),
        "ratio <= 2 (verification throughput >= 50% of raw SHA-256)",
    )


def _delivery_seconds(scale: int) -> float:
    models = {f"model_{index:05d}": f"marts.table_{index:05d}" for index in range(BASE_MODELS * scale)}
    workloads = {f"flow_{index:05d}": ((f"raw.flow_{index:05d}",), ("prepare",)) for index in range(BASE_WORKLOADS * scale)}

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
            cache.materialize(release.bundle, authority=release.authority, receipt=target.materialization(release.bundle, release.authority))
        finally:
            shutil.rmtree(root, ignore_errors=True)

    return best_seconds(deliver, 3)


def _scale_row() -> dict[str, object]:
    base = BASE_MODELS + BASE_WORKLOADS
    return ratio_row(
        f"compose + publish + materialize at {10 * base} workloads vs {base}",
        _delivery_seconds(1),
        _delivery_seconds(10),
        "ratio <= 12 (near-linear in the workload count)",
    )


def run() -> list[dict[str, object]]:
    return [_verification_row(), _scale_row()]


if __name__ == "__main__":
    for row in run():
        print(f"{row['ratio']:8.2f}x  {row['measured_s']:9.3f} s vs {row['baseline_s']:9.3f} s  {row['name']}  [{row['goal']}]")
