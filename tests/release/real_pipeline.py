"""The real release pipeline on the real `dbt_project_synthetic` (dbt models plus `flows/`), for tests and the bench.

`compile_recorded(tree)` runs the real sealed dbt compile and also returns what dbt itself produced
for each project (the parsed `manifest.json` and the `dbt ls` selection), so a test can replay that
exact dbt output, modified, through every check `compile_native` applies after dbt (closure, drift,
membership) without paying for another dbt run. `compose_real(...)` runs the stages after the compile
exactly as the Dagster assets do (`ReleasePipeline.capture_ordinary` → `reconstruct` → a synthetic
grant for exactly that membership → `verify_authority` → `compose`).

`release_tree(bundle)` is the golden projection of a release: every member path with the SHA-256
and size of its bytes, and the release identity.

What a reader could get wrong: only the authority is synthetic here (label-derived keys, a fixed
clock). The source, the dbt compile, the flow capture, the composition and the bundle
verification are the production code on the committed project.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dpone_dagster.authority.synthetic import SYNTHETIC_COMMIT, SYNTHETIC_REPOSITORY
from dpone_dagster.contracts.flows import OrdinaryCapture
from dpone_dagster.contracts.grant import ExecutionSubject
from dpone_dagster.contracts.receipts import DevelopmentAuthorityReceipt
from dpone_dagster.release.build import native as native_module
from dpone_dagster.release.build.bundle import ReleaseBundle
from dpone_dagster.release.build.native import NativeCompilation
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
from dpone_dagster.release.delivery.registry import ReleaseRegistry
from dpone_dagster.release.pipeline import ReleasePipeline, SourceIdentity
from tests.release.fabricated import SyntheticTarget

REPO = Path(__file__).resolve().parents[2]
SYNTHETIC_PROJECT = REPO / "dbt_project_synthetic"
IDENTITY = SourceIdentity(SYNTHETIC_REPOSITORY, SYNTHETIC_COMMIT)

DbtOutput = tuple[dict[str, Any], list[str]]


@dataclass(frozen=True)
class RealRelease:
    bundle: ReleaseBundle
    authority: DevelopmentAuthorityReceipt
    ordinary: OrdinaryCapture | None
    target: SyntheticTarget


def pipeline_for(target: SyntheticTarget, root: Path, work_dir: Path | None = None) -> ReleasePipeline:
    """A pipeline over a local registry and cache under `root` (nothing is written until publish/install)."""
    return ReleasePipeline(
        authority_ports=target.authority.ports,
        pinned_policy_digest=target.authority.policy_digest,
        registry=ReleaseRegistry(LocalDirectoryStore(root / "registry")),
        cache=ReleaseCache(root / "cache", admission=target.issuer, clock=target.clock),
        admission=target.issuer,
        clock=target.clock,
        work_dir=work_dir,
    )


def compile_recorded(tree, work_dir: Path | None = None) -> tuple[NativeCompilation, dict[str, DbtOutput]]:
    """The real compile of `tree`, and per project a deep copy of what dbt produced."""
    recorded: dict[str, DbtOutput] = {}
    real_run = native_module._run_dbt

    def recording(inputs, private, profile_name, name, selection, timeout_seconds):
        manifest, selected = real_run(inputs, private, profile_name, name, selection, timeout_seconds)
        recorded[name] = (copy.deepcopy(manifest), list(selected))
        return manifest, selected

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(native_module, "_run_dbt", recording)
        compilation = native_module.compile_native(tree, work_dir=work_dir)
    return compilation, recorded


def replay_compile(
    tree,
    recorded: Mapping[str, DbtOutput],
    *,
    edit: Callable[[dict[str, Any], list[str]], None] | None = None,
    during: Callable[[], None] | None = None,
) -> NativeCompilation:
    """`compile_native(tree)` with dbt's recorded output in place of a dbt run.

    `edit(manifest, selected)` may change a private copy of dbt's output; `during()` runs where dbt
    would run (after the inputs were copied and checked, before any post-dbt check).
    """

    def replayed(inputs, private, profile_name, name, selection, timeout_seconds):
        manifest, selected = copy.deepcopy(recorded[name][0]), list(recorded[name][1])
        if edit is not None:
            edit(manifest, selected)
        if during is not None:
            during()
        return manifest, selected

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(native_module, "_run_dbt", replayed)
        return native_module.compile_native(tree)


def compose_real(
    tree,
    native: NativeCompilation | None,
    root: Path,
    *,
    target: SyntheticTarget | None = None,
    work_dir: Path | None = None,
    **grant_overrides: object,
) -> RealRelease:
    """Capture the flows, verify a synthetic grant for exactly this membership, compose and verify the bundle."""
    target = target or SyntheticTarget()
    pipeline = pipeline_for(target, root, work_dir)
    ordinary = pipeline.capture_ordinary(tree)
    reconstructed = pipeline.reconstruct(IDENTITY, native, ordinary)
    grant_bytes, signatures = target.signed_grant(
        native=reconstructed.native_membership,
        ordinary=reconstructed.ordinary_membership,
        execution_subjects=[ExecutionSubject(**s) for s in ordinary.execution_subjects()] if ordinary else [],
        **grant_overrides,
    )
    authority = pipeline.verify_authority(grant_bytes, signatures, reconstructed)
    bundle = pipeline.compose(authority=authority, source=tree, native=native, ordinary=ordinary)
    return RealRelease(bundle=bundle, authority=authority, ordinary=ordinary, target=target)


def release_tree(bundle: ReleaseBundle) -> dict[str, Any]:
    """The golden projection: release identity and every member's SHA-256 and size, by path."""
    return {
        "release_id": bundle.release_id,
        "members": {
            path: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
            for path, data in sorted(bundle.members.items())
        },
    }
