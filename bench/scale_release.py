"""One full release of a generated project: source copy, native compile, capture, grant, compose, publish, install.

Used by `bench_scale` in a child process (so its peak RSS is its own). The stages are the production
code the Dagster release assets run (`tests/release/real_pipeline.py`); only the authority is
synthetic, with its workload and source-size limits (policy and grant) raised to the design's 10,000
workloads (the synthetic grant's default 10 MB is less than 10,000 flows' 17.6 MB of sources).

What a reader could get wrong: the source is read with the production default `SourceLimits`
(`DEFAULT_MAX_MEMBERS`, 100,000 members with directories: the policy maximum of 10,000 workloads
at 8 members each plus 20,000 for the rest of the project); a generated flow is 6 members.
Past about 3,200 flows the parent (one ordinary constituent and its source sidecars per flow, ~1.3 KB
a flow) no longer fits one canonical document (`contracts/canonical.MAX_DOCUMENT_BYTES`, 4 MiB) and
is composed as a paged parent (`contracts/release_pages.py`), and past about 20,000 members the
registry commit and the deployment record list their members on pages too
(`release/delivery/member_pages.py`). `synthetic_release_stages` runs the
delivery half alone (compose, publish, install) on fabricated constituents, stage by stage, and
reports the code of the first refusal as its result.
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


def synthetic_release_stages(models: int, flows: int, work: Path) -> dict[str, object]:
    """Compose, publish and install a synthetic release of `models` + `flows` workloads; seconds per stage.

    No dbt compile and no flow capture: the constituents are fabricated (`tests/release/fabricated`),
    so this measures the delivery path alone (compose with its stage-and-reread, `open_bundle`,
    registry publish, cache install). A stage that refuses ends the run; its code is the result.
    """
    from dpone_dagster.authority.synthetic import SyntheticAuthority, synthetic_limits
    from dpone_dagster.contracts.grant import ExecutionSubject
    from dpone_dagster.errors import DponeError
    from dpone_dagster.release.build.compose import compose_release
    from dpone_dagster.release.delivery.install import ReleaseCache
    from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
    from dpone_dagster.release.delivery.registry import ReleaseRegistry
    from tests.release.fabricated import (
        MemorySource,
        SyntheticTarget,
        synthetic_capture,
        synthetic_native,
        synthetic_native_files,
        synthetic_workload,
        synthetic_workload_files,
    )

    policy_limits = synthetic_limits(max_workloads=MAX_WORKLOADS, max_source_bytes=MAX_SOURCE_BYTES)
    target = SyntheticTarget(authority=SyntheticAuthority(policy_options={"limits": policy_limits}))
    start = time.perf_counter()
    names = {f"m{index:04d}": f"marts.m{index:04d}" for index in range(models)}
    files = synthetic_native_files("shop", list(names))
    packs = [f"flow_{index:05d}" for index in range(flows)]
    for pack in packs:
        files.update(synthetic_workload_files(pack, (f"raw.{pack}",)))
    source = MemorySource(files)
    native = synthetic_native(files, source.snapshot.digest, "shop", names)
    ordinary = synthetic_capture(
        source.snapshot.digest, [synthetic_workload(pack, (f"raw.{pack}",), files=files) for pack in packs]
    )
    authority = target.verify(
        native=native.membership,
        ordinary=packs,
        source_bytes=source.snapshot.total_bytes,
        execution_subjects=[ExecutionSubject(**subject) for subject in ordinary.execution_subjects()],
    )
    result: dict[str, object] = {"inputs_s": time.perf_counter() - start}
    try:
        start = time.perf_counter()
        bundle = compose_release(authority=authority, source=source, native=native, ordinary=ordinary, stage_dir=work)
        result.update(
            compose_s=time.perf_counter() - start, members=len(bundle.members), paged=hasattr(bundle.parent, "pages")
        )
        start = time.perf_counter()
        ReleaseRegistry(LocalDirectoryStore(work / "registry")).publish(
            bundle, authority=authority, receipt=target.publication(bundle, authority), admission=target.issuer
        )
        result["publish_s"] = time.perf_counter() - start
        start = time.perf_counter()
        cache = ReleaseCache(work / "cache", admission=target.issuer, clock=target.clock)
        cache.materialize(bundle, authority=authority, receipt=target.materialization(bundle, authority))
        result["install_s"] = time.perf_counter() - start
    except DponeError as error:
        result["refusal"] = f"{error.code}: {str(error)[:200]}"
    return result
