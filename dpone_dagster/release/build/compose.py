"""Composition: one development parent from the native compile and the ordinary capture.

`assemble_native_release` turns a `NativeCompilation` into the
`dpone.dbt-release-set.development.v1` document (source snapshot digest, per-project selection
fingerprints, empty route certifications, and the authority projection: policy, grant, repository
and commit digests). `compose_release` then checks the union (same snapshot, membership exactly the
grant's, budget, no logical write written twice, no selector, pack id or hook id claimed twice),
reads every exact source file through the verified source reader, assembles the
`dpone.release-set.v3` parent (profile `development_workspace_delivery_v1`), writes all members to a
private stage with the parent (which carries the integrity subject) last, rereads every byte from
the stage and verifies the whole bundle with `open_bundle`. Only the reread bytes are returned. A
membership whose single-document parent would pass the canonical cap (about 3,200 flows) is written
as a paged parent instead (`contracts/release_pages.py`, `pages.paginate`): the parent lists page
digests, each page a slice of the membership; every smaller membership keeps the single-document
parent, byte for byte. The two halves are callable apart (`check_composition`, then
`compose_checked`) so the release state machine can record `Checked` (identity known, every check
passed) before the source bytes are reacquired and `Composed` after.

What a reader could get wrong: composition is pure in its result. The identity depends only on the
documents and source bytes; no path, clock, or machine detail enters it, so 100 builds from
identical inputs give one identity, and any change to source, projection, command or grant gives
another.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dpone_dagster.contracts.canonical import MAX_DOCUMENT_BYTES, CanonicalError
from dpone_dagster.contracts.flows import CapturedWorkload, OrdinaryCapture
from dpone_dagster.contracts.identity import canonical_digest
from dpone_dagster.contracts.receipts import DevelopmentAuthorityReceipt
from dpone_dagster.contracts.release_documents import (
    ARTIFACT_WIRE,
    DbtChecksum,
    DbtDevelopmentReleaseSet,
    DbtNode,
    DbtProjectRelease,
    DevelopmentReleaseSetV3,
    NativeConstituent,
    OrdinaryConstituent,
    SourceSidecar,
    integrity_subject_for,
    ordinary_constituent_id,
)
from dpone_dagster.contracts.release_pages import (
    DevelopmentReleasePage,
    PagedDevelopmentReleaseSetV3,
    paged_integrity_subject_for,
)
from dpone_dagster.release.build.budget import require_within_budget
from dpone_dagster.release.build.bundle import (
    PARENT_PATH,
    DevelopmentParent,
    ReleaseBundle,
    content_sha256,
    native_path,
    open_bundle,
    ordinary_path,
    release_id_of,
    selection_path,
    sidecar_path,
)
from dpone_dagster.release.build.native import NativeCompilation
from dpone_dagster.release.build.pages import page_path, paginate
from dpone_dagster.release.errors import (
    AuthorityMissingError,
    LogicalWriteCollisionError,
    MembershipError,
    SourceClosureError,
)

SINGLE_PARENT_MAX_BYTES = MAX_DOCUMENT_BYTES
"""A parent whose single-document form is larger is paged. The canonical cap itself: the rule that
keeps every release composable before pages byte-identical (tests lower it to page a small release)."""


class VerifiedSourceFiles(Protocol):
    """Reads a file of the verified snapshot, re-checked against it (`SourceTree` is one)."""

    def read_bytes(self, path: str) -> bytes: ...


def assemble_native_release(
    compilation: NativeCompilation, authority: DevelopmentAuthorityReceipt
) -> DbtDevelopmentReleaseSet:
    """The development dbt release set of `compilation`, under `authority`; membership must match the grant."""
    if tuple(compilation.membership) != tuple(authority.native_membership):
        raise MembershipError(
            "release.membership_mismatch",
            f"dbt selected {len(compilation.membership)} native workloads; the grant names "
            f"{len(authority.native_membership)}, and the two sets differ",
        )
    projects = [
        DbtProjectRelease(
            project_name=project.name,
            selection_fingerprint=project.selection_fingerprint,
            nodes=[
                DbtNode(unique_id=node.unique_id, checksum=DbtChecksum(name="sha256", checksum=node.dbt_checksum))
                for node in project.nodes
            ],
            route_certifications=(),
        )
        for project in sorted(compilation.projects, key=lambda item: item.name)
    ]
    return DbtDevelopmentReleaseSet(
        artifact_wire=ARTIFACT_WIRE,
        projects=projects,
        **_development_binding(authority, compilation.source_snapshot_digest),
    )


def _development_binding(authority: DevelopmentAuthorityReceipt, snapshot_digest: str) -> dict[str, str]:
    """The fields every development release document binds: family, tier, authority, exact source."""
    return {
        "authority_family": "development",
        "purpose": "development_delivery",
        "trust_tier": "non_production",
        "policy_digest": authority.policy_digest,
        "grant_digest": authority.grant_digest,
        "source_repository_digest": authority.source_repository_digest,
        "source_commit": authority.source_commit,
        "source_snapshot_digest": snapshot_digest,
        "delivery_status": "delivered_dormant",
    }


@dataclass(frozen=True)
class CheckedComposition:
    """Inputs that passed every composition check, and the parent they produce (so the release identity).

    No source byte has been reread yet: `compose_checked` reacquires them, stages and verifies.
    """

    parent: DevelopmentParent
    documents: Mapping[str, bytes]
    sidecars: tuple[SourceSidecar, ...]

    @property
    def release_id(self) -> str:
        return release_id_of(self.parent)


def compose_release(
    *,
    authority: DevelopmentAuthorityReceipt,
    source: VerifiedSourceFiles,
    native: NativeCompilation | None,
    ordinary: OrdinaryCapture | None,
    stage_dir: Path | None = None,
) -> ReleaseBundle:
    """Compose, stage, reread and verify the development parent. Raises before anything leaves the stage."""
    checked = check_composition(authority=authority, native=native, ordinary=ordinary)
    return compose_checked(checked, source=source, stage_dir=stage_dir)


def check_composition(
    *, authority: DevelopmentAuthorityReceipt, native: NativeCompilation | None, ordinary: OrdinaryCapture | None
) -> CheckedComposition:
    """Every check of the union (membership, snapshot, claims, collisions, budget) and the parent it yields."""
    require_authority(authority)
    if native is None and ordinary is None:
        raise MembershipError("release.membership_empty", "a development release needs native or ordinary workloads")
    snapshots = {item.source_snapshot_digest for item in (native, ordinary) if item is not None}
    if len(snapshots) != 1:
        raise SourceClosureError(
            "release.source_closure_mismatch", "native and ordinary constituents come from different source snapshots"
        )
    workloads = tuple(ordinary.workloads) if ordinary is not None else ()
    _require_ordinary_membership(workloads, authority)
    if native is None and authority.native_membership:
        raise MembershipError(
            "release.membership_mismatch", "the grant names native workloads but no dbt project was compiled"
        )
    _require_unique_claims(workloads)
    _require_no_collisions(native, workloads)
    source_bytes = (native.source_bytes if native else 0) + sum(f.size for w in workloads for f in w.source_files)
    workload_count = (len(native.membership) if native else 0) + len(workloads)
    require_within_budget(workloads=workload_count, source_bytes=source_bytes, limits=authority.effective_limits)

    members: dict[str, bytes] = {}
    native_constituents: list[NativeConstituent] = []
    sidecars: list[SourceSidecar] = []
    if native is not None:
        document = assemble_native_release(native, authority)
        constituent_id = document.document_digest()
        native_constituents.append(
            NativeConstituent(
                constituent_id=constituent_id,
                artifact_wire=ARTIFACT_WIRE,
                project_names=sorted(project.name for project in native.projects),
            )
        )
        members[native_path(constituent_id)] = document.canonical_bytes()
        for project in native.projects:
            members[selection_path(constituent_id, project.name)] = project.selection_document
            sidecars.extend(_sidecars(constituent_id, ((f.path, f.content_sha256, f.size) for f in project.closure)))
    ordinary_constituents: list[OrdinaryConstituent] = []
    for workload in workloads:
        constituent_id = ordinary_constituent_id(workload)
        ordinary_constituents.append(
            OrdinaryConstituent(
                constituent_id=constituent_id,
                pack_id=workload.pack_id,
                selector=workload.selector,
                dag_id=workload.dag_id,
                fingerprint=workload.fingerprint,
                dag_content_sha256=workload.dag.content_sha256,
                hook_ids=workload.hook_order,
            )
        )
        members[ordinary_path(constituent_id)] = workload.canonical_bytes()
        sidecars.extend(_sidecars(constituent_id, ((f.path, f.content_sha256, f.size) for f in workload.source_files)))
    sidecars.sort(key=SourceSidecar.sort_key)
    native_constituents.sort(key=lambda item: item.constituent_id)
    binding = _development_binding(authority, snapshots.pop())
    parent, documents = development_parent(
        binding, native_constituents, ordinary_constituents, sidecars, authority.execution_subjects
    )
    members.update(documents)
    return CheckedComposition(parent, members, tuple(sidecars))


def development_parent(
    binding: Mapping[str, str],
    native: list[NativeConstituent],
    ordinary: list[OrdinaryConstituent],
    sidecars: list[SourceSidecar],
    execution_subjects: tuple,
) -> tuple[DevelopmentParent, dict[str, bytes]]:
    """The parent and its member documents.

    The single-document parent when it fits `SINGLE_PARENT_MAX_BYTES`, else pages.
    """
    try:
        single = DevelopmentReleaseSetV3(
            **binding,
            native_constituents=native,
            ordinary_constituents=ordinary,
            source_sidecars=sidecars,
            integrity_subject=integrity_subject_for(native, ordinary, sidecars),
            execution_subjects=execution_subjects,
            route_certifications=(),
        )
        single_bytes = single.canonical_bytes()
        if len(single_bytes) <= SINGLE_PARENT_MAX_BYTES:
            return single, {PARENT_PATH: single_bytes}
    except CanonicalError as error:
        if error.code != "canonical.too_large":
            raise
    encoded = [page.canonical_bytes() for page in paginate(ordinary, sidecars)]
    digests = [canonical_digest(DevelopmentReleasePage.KIND, data) for data in encoded]
    documents = {page_path(page_digest): data for page_digest, data in zip(digests, encoded, strict=True)}
    paged = PagedDevelopmentReleaseSetV3(
        **binding,
        native_constituents=native,
        pages=digests,
        integrity_subject=paged_integrity_subject_for(native, digests),
        execution_subjects=execution_subjects,
        route_certifications=(),
    )
    documents[PARENT_PATH] = paged.canonical_bytes()
    return paged, documents


def compose_checked(
    checked: CheckedComposition, *, source: VerifiedSourceFiles, stage_dir: Path | None = None
) -> ReleaseBundle:
    """Reacquire every exact source byte of `checked`, stage, reread and verify (`open_bundle`)."""
    members = dict(checked.documents)
    for sidecar in checked.sidecars:
        members[sidecar_path(sidecar.constituent_id, sidecar.path)] = _exact_bytes(source, sidecar)
    return _stage_and_verify(members, stage_dir, checked.release_id)


def require_authority(authority: object) -> DevelopmentAuthorityReceipt:
    """Refuse a missing (null) or foreign authority object before anything else is looked at."""
    if not isinstance(authority, DevelopmentAuthorityReceipt):
        raise AuthorityMissingError("release.authority_missing", "a verified development authority receipt is required")
    return authority


def _sidecars(constituent_id: str, files: Iterable[tuple[str, str, int]]) -> list[SourceSidecar]:
    return [
        SourceSidecar(constituent_id=constituent_id, path=path, content_sha256=sha, size=size)
        for path, sha, size in files
    ]


def _exact_bytes(source: VerifiedSourceFiles, sidecar: SourceSidecar) -> bytes:
    try:
        data = source.read_bytes(sidecar.path)
    except Exception as error:
        code = getattr(error, "code", "source.unreadable")
        raise SourceClosureError(
            "release.source_closure_mismatch", f"source file {sidecar.path!r} cannot be reacquired ({code})"
        ) from None
    if len(data) != sidecar.size or content_sha256(data) != sidecar.content_sha256:
        raise SourceClosureError(
            "release.source_closure_mismatch", f"source file {sidecar.path!r} drifted from its recorded digest"
        )
    return data


def _require_ordinary_membership(
    workloads: tuple[CapturedWorkload, ...], authority: DevelopmentAuthorityReceipt
) -> None:
    captured = tuple(sorted(workload.pack_id for workload in workloads))
    if captured != tuple(authority.ordinary_membership):
        raise MembershipError(
            "release.membership_mismatch",
            (
                f"{len(captured)} ordinary workloads were captured; the grant names "
                f"{len(authority.ordinary_membership)}, and the two sets differ"
            ),
        )


def _require_unique_claims(workloads: tuple[CapturedWorkload, ...]) -> None:
    for label, values in (
        ("pack id", [w.pack_id for w in workloads]),
        ("selector", [w.selector for w in workloads]),
        ("DAG id", [w.dag_id for w in workloads]),
    ):
        if len(values) != len(set(values)):
            raise MembershipError("release.membership_duplicate", f"two ordinary workloads claim the same {label}")
    for workload in workloads:
        if len(workload.hook_order) != len(set(workload.hook_order)):
            raise MembershipError(
                "release.membership_duplicate", f"workload {workload.pack_id!r} declares a hook id twice"
            )


def _require_no_collisions(native: NativeCompilation | None, workloads: tuple[CapturedWorkload, ...]) -> None:
    writers: dict[str, str] = {}
    claims: list[tuple[str, str]] = []
    if native is not None:
        claims.extend(
            (relation, uid) for project in native.projects for relation, uid in project.logical_writes.items()
        )
    claims.extend((relation, workload.pack_id) for workload in workloads for relation in workload.logical_writes)
    for relation, writer in claims:
        if relation in writers:
            raise LogicalWriteCollisionError(
                "release.logical_write_collision", f"{writers[relation]!r} and {writer!r} both write {relation!r}"
            )
        writers[relation] = writer


def _stage_and_verify(members: Mapping[str, bytes], stage_dir: Path | None, release_id: str) -> ReleaseBundle:
    """Write every member to a private stage (parent last), reread every byte, verify the bundle."""
    stage = Path(tempfile.mkdtemp(prefix="dpone-compose-", dir=stage_dir))
    try:
        os.chmod(stage, 0o700)
        for path in sorted(members, key=lambda item: item == PARENT_PATH):
            target = stage / path
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "xb") as handle:
                handle.write(members[path])
        reread = {
            candidate.relative_to(stage).as_posix(): candidate.read_bytes()
            for candidate in stage.rglob("*")
            if candidate.is_file()
        }
        return open_bundle(reread, expected_release_id=release_id)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
