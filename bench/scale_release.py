"""One full release of a generated project: source copy, native compile, capture, grant, compose, publish, install.

Used by `bench_scale` in a child process (so its peak RSS is its own). The stages are the production
code the Dagster release assets run (`tests/release/real_pipeline.py`); only the authority is
synthetic, with its workload and source-size limits (policy and grant) raised to the design's 10,000
workloads (the synthetic grant's default 10 MB is less than 10,000 flows' 17.6 MB of sources).

What a reader could get wrong: the source is read with the production default `SourceLimits`
(`DEFAULT_MAX_MEMBERS`, 100,000 members with directories: the policy maximum of 10,000 workloads
at 8 members each plus 20,000 for the rest of the project); a generated flow is 6 members.
At 10,000 workloads the release stops in compose with `canonical.too_large`: the parent (one
ordinary constituent and its source sidecars per flow, ~1.3 KB a flow) and its integrity subject are
single canonical documents capped at 4 MiB (`contracts/canonical.MAX_DOCUMENT_BYTES`), about
3,200 flows.
"""

from __future__ import annotations

import time
from pathlib import Path

MAX_WORKLOADS = 10_000
MAX_SOURCE_BYTES = 500 * 1024 * 1024


def full_release(source_root: Path, work: Path) -> float:
    """Seconds for the whole pipeline on `source_root` (a dbt project with `flows/`), all state under `work`."""
    from dpone_dagster.authority.synthetic import SyntheticAuthority, synthetic_limits
    from dpone_dagster.release.delivery.install import ReleaseCache
    from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
    from dpone_dagster.release.delivery.registry import ReleaseRegistry
    from dpone_dagster.release.source.snapshot import open_source
    from tests.release.fabricated import SyntheticTarget
    from tests.release.real_pipeline import compose_real, pipeline_for

    policy_limits = synthetic_limits(max_workloads=MAX_WORKLOADS, max_source_bytes=MAX_SOURCE_BYTES)
    target = SyntheticTarget(authority=SyntheticAuthority(policy_options={"limits": policy_limits}))
    start = time.perf_counter()
    with open_source(source_root, work_dir=work) as tree:
        native = pipeline_for(target, work / "state", work_dir=work).compile_native(tree)
        release = compose_real(
            tree, native, work / "state", target=target, work_dir=work, max_source_bytes=MAX_SOURCE_BYTES
        )
    bundle, authority = release.bundle, release.authority
    ReleaseRegistry(LocalDirectoryStore(work / "registry")).publish(
        bundle, authority=authority, receipt=target.publication(bundle, authority), admission=target.issuer
    )
    cache = ReleaseCache(work / "cache", admission=target.issuer, clock=target.clock)
    cache.materialize(bundle, authority=authority, receipt=target.materialization(bundle, authority))
    return time.perf_counter() - start
