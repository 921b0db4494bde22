"""The release bundle: the exact member files of one development release, and their full verification.

Layout of a bundle (member path → bytes); every byte is bound, directly or through a digest, by
the parent document, whose profile-refined digest is the release identity:

- `release.json`: the `dpone.release-set.v3` parent (profile `development_workspace_delivery_v1`);
- `native/<hex>.json`: a `dpone.dbt-release-set.development.v1` document, `<hex>` its constituent id;
- `native/<hex>/<project>.selection.json`: the selection preimage of one project (its digest is that
  project's `selection_fingerprint`): selected nodes with their compiled digests and logical writes;
- `ordinary/<hex>.json`: one captured ordinary workload, `<hex>` its constituent id;
- `sources/<hex>/<path>`: every exact source file (the parent's `source_sidecars`);
- `pages/<hex>.json`: only under a paged parent (profile `development_workspace_delivery_paged_v1`,
  `contracts/release_pages.py`), the `dpone.release-page.v1` pages that list its ordinary
  constituents and sidecars instead of the parent itself (`pages.read_pages` verifies them).

`open_bundle` is the one "full sealed-projection and artifact-integrity validation": publication,
registry reads, cache installation, activation (twice), recovery, repair and the CLI all call it.

What a reader could get wrong: the release identity is the parent's digest in the domain
`dpone.release-set.v3.<profile>`; the same bytes under another v3 profile would have another identity.
Read a release's membership from `ReleaseBundle.ordinary_constituents` / `.source_sidecars`, never
from `bundle.parent`: a paged parent holds page digests, not the members.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from dpone_dagster.contracts.base import ContractModel, parse_document
from dpone_dagster.contracts.canonical import CanonicalError, loads_canonical
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.dispatch import DispatchError, read_development_document
from dpone_dagster.contracts.flows import CapturedWorkload
from dpone_dagster.contracts.identity import canonical_digest, digest
from dpone_dagster.contracts.receipts import DevelopmentAuthorityReceipt
from dpone_dagster.contracts.release_documents import (
    ORDINARY_CONSTITUENT_KIND,
    SELECTION_KIND,
    DbtDevelopmentReleaseSet,
    DevelopmentReleaseSetV3,
    OrdinaryConstituent,
    SourceSidecar,
)
from dpone_dagster.contracts.release_pages import PagedDevelopmentReleaseSetV3
from dpone_dagster.contracts.release_records import MemberDigest
from dpone_dagster.contracts.target import DeploymentProjection
from dpone_dagster.release.build.pages import read_pages
from dpone_dagster.release.errors import IntegrityError

PARENT_PATH = "release.json"
DevelopmentParent = DevelopmentReleaseSetV3 | PagedDevelopmentReleaseSetV3


def content_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def release_id_of(parent: DevelopmentParent) -> str:
    """The release identity: the parent's digest in its profile-refined domain (`identity_kind()`)."""
    return parent.document_digest()


def native_path(constituent_id: str) -> str:
    return f"native/{_hex(constituent_id)}.json"


def selection_path(constituent_id: str, project_name: str) -> str:
    return f"native/{_hex(constituent_id)}/{project_name}.selection.json"


def ordinary_path(constituent_id: str) -> str:
    return f"ordinary/{_hex(constituent_id)}.json"


def sidecar_path(constituent_id: str, path: str) -> str:
    return f"sources/{_hex(constituent_id)}/{path}"


def _hex(constituent_id: str) -> str:
    return constituent_id.removeprefix("sha256:")


@dataclass(frozen=True)
class ReleaseBundle:
    """A verified development release: identity, parsed documents and every member's bytes."""

    release_id: str
    parent: DevelopmentParent
    native: tuple[DbtDevelopmentReleaseSet, ...]
    selections: Mapping[str, Mapping[str, Any]]
    ordinary: tuple[CapturedWorkload, ...]
    members: Mapping[str, bytes]
    ordinary_constituents: tuple[OrdinaryConstituent, ...]
    source_sidecars: tuple[SourceSidecar, ...]

    @property
    def native_membership(self) -> tuple[str, ...]:
        return tuple(sorted(uid for document in self.native for uid in document.native_membership))

    @property
    def ordinary_membership(self) -> tuple[str, ...]:
        return tuple(sorted(item.pack_id for item in self.ordinary_constituents))

    @property
    def workload_count(self) -> int:
        return len(self.native_membership) + len(self.ordinary_membership)

    @property
    def source_bytes(self) -> int:
        return sum(sidecar.size for sidecar in self.source_sidecars)

    @property
    def total_bytes(self) -> int:
        return sum(len(data) for data in self.members.values())

    def member_digests(self) -> tuple[MemberDigest, ...]:
        return tuple(
            MemberDigest(path=path, content_sha256=content_sha256(data), size=len(data))
            for path, data in sorted(self.members.items())
        )


def open_bundle(members: Mapping[str, bytes], *, expected_release_id: str | None = None) -> ReleaseBundle:
    """Verify every byte of `members` against the parent and return the bundle; raise on any drift."""
    members = dict(members)
    parent_bytes = members.get(PARENT_PATH)
    if parent_bytes is None:
        raise IntegrityError("release.integrity_mismatch", "the release has no parent document")
    parent = _read_parent(parent_bytes)
    release_id = release_id_of(parent)
    if expected_release_id is not None and release_id != expected_release_id:
        raise IntegrityError(
            "release.integrity_mismatch", "the parent document does not have the expected release identity"
        )
    expected_paths = {PARENT_PATH}
    if isinstance(parent, PagedDevelopmentReleaseSetV3):
        ordinary_constituents, source_sidecars, page_paths = read_pages(members, parent)
        expected_paths |= page_paths
    else:
        ordinary_constituents, source_sidecars = parent.ordinary_constituents, parent.source_sidecars
    native = []
    selections: dict[str, Mapping[str, Any]] = {}
    for constituent in parent.native_constituents:
        document = _native_document(members, constituent.constituent_id, parent)
        if tuple(sorted(project.project_name for project in document.projects)) != tuple(constituent.project_names):
            raise IntegrityError(
                "release.integrity_mismatch", "a native constituent names other projects than its document"
            )
        expected_paths.add(native_path(constituent.constituent_id))
        for project in document.projects:
            path = selection_path(constituent.constituent_id, project.project_name)
            expected_paths.add(path)
            selections[project.project_name] = _selection(members, path, project)
        native.append(document)
    ordinary = []
    for constituent in ordinary_constituents:
        path = ordinary_path(constituent.constituent_id)
        expected_paths.add(path)
        workload = _ordinary_workload(members, path, constituent)
        ordinary.append(workload)
    for sidecar in source_sidecars:
        path = sidecar_path(sidecar.constituent_id, sidecar.path)
        expected_paths.add(path)
        data = members.get(path)
        if data is None or len(data) != sidecar.size or content_sha256(data) != sidecar.content_sha256:
            raise IntegrityError("release.integrity_mismatch", f"source file {sidecar.path!r} is missing or altered")
    extra = set(members) - expected_paths
    if extra:
        raise IntegrityError(
            "release.integrity_mismatch", f"the release holds {len(extra)} member(s) its parent does not bind"
        )
    return ReleaseBundle(
        release_id=release_id,
        parent=parent,
        native=tuple(native),
        selections=MappingProxyType(selections),
        ordinary=tuple(ordinary),
        members=MappingProxyType(members),
        ordinary_constituents=tuple(ordinary_constituents),
        source_sidecars=tuple(source_sidecars),
    )


def _read_parent(data: bytes) -> DevelopmentParent:
    try:
        parent = read_development_document(data)
    except DispatchError as error:
        raise IntegrityError(
            "release.not_development_family", f"the parent is not a development release ({error.code})"
        ) from None
    except (CanonicalError, CodedError) as error:
        raise IntegrityError("release.integrity_mismatch", f"the parent document is invalid ({error.code})") from None
    if not isinstance(parent, (DevelopmentReleaseSetV3, PagedDevelopmentReleaseSetV3)):
        raise IntegrityError(
            "release.not_development_family", "the parent is a development document but not a release parent"
        )
    return parent


def _native_document(
    members: Mapping[str, bytes], constituent_id: str, parent: DevelopmentParent
) -> DbtDevelopmentReleaseSet:
    document = _bound_document(
        DbtDevelopmentReleaseSet,
        DbtDevelopmentReleaseSet.KIND,
        members.get(native_path(constituent_id)),
        constituent_id,
    )
    if document is None:
        raise IntegrityError("release.integrity_mismatch", "a native constituent document is missing or altered")
    bound = ("policy_digest", "grant_digest", "source_repository_digest", "source_commit", "source_snapshot_digest")
    if any(getattr(document, field) != getattr(parent, field) for field in bound):
        raise IntegrityError(
            "release.integrity_mismatch", "a native constituent was built under other authority or source"
        )
    return document


def _selection(members: Mapping[str, bytes], path: str, project) -> Mapping[str, Any]:
    data = members.get(path)
    try:
        value = loads_canonical(data) if data is not None else None
    except (CanonicalError, CodedError):
        value = None
    if value is None or canonical_digest(SELECTION_KIND, data) != project.selection_fingerprint:
        raise IntegrityError(
            "release.integrity_mismatch", f"the selection of project {project.project_name!r} is missing or altered"
        )
    nodes = {node["unique_id"] for node in value.get("nodes", [])} if isinstance(value, dict) else set()
    if nodes != {node.unique_id for node in project.nodes}:
        raise IntegrityError(
            "release.integrity_mismatch", f"the selection of project {project.project_name!r} names other nodes"
        )
    return MappingProxyType(value)


def _ordinary_workload(members: Mapping[str, bytes], path: str, constituent) -> CapturedWorkload:
    workload = _bound_document(
        CapturedWorkload, ORDINARY_CONSTITUENT_KIND, members.get(path), constituent.constituent_id
    )
    if workload is None:
        raise IntegrityError(
            "release.integrity_mismatch", f"ordinary constituent {constituent.pack_id!r} is missing or altered"
        )
    if (
        workload.pack_id != constituent.pack_id
        or workload.selector != constituent.selector
        or workload.dag_id != constituent.dag_id
        or workload.fingerprint != constituent.fingerprint
        or workload.dag.content_sha256 != constituent.dag_content_sha256
        or tuple(workload.hook_order) != tuple(constituent.hook_ids)
    ):
        raise IntegrityError(
            "release.integrity_mismatch", f"ordinary constituent {constituent.pack_id!r} disagrees with the parent"
        )
    return workload


def _bound_document(model: type[ContractModel], kind: str, data: bytes | None, expected: str):
    """`data` parsed once as `model` if it is the `kind` document `expected` names, else None.

    `parse_document` proves the bytes canonical (they re-serialize exactly), so the identity is the
    domain-separated hash of these very bytes: the same value `digest(kind, data)` gives, without
    parsing and re-serializing the document a second time (one per workload, 10,000 in a release).
    """
    if data is None:
        return None
    try:
        document = parse_document(model, data)
    except (CanonicalError, CodedError) as error:
        if _document_digest(kind, data) == expected:  # the bound bytes themselves are not a valid document
            raise IntegrityError(
                "release.integrity_mismatch", f"a constituent document is invalid ({error.code})"
            ) from None
        return None
    return document if canonical_digest(kind, data) == expected else None


def _document_digest(kind: str, data: bytes) -> str | None:
    try:
        return digest(kind, data)
    except (CanonicalError, CodedError):
        return None


def deployment_id_of(release_id: str, environment: str) -> str:
    """The deployment of `release_id` into `environment`. Persisted in receipts: must never change."""
    return f"{environment}:{release_id.removeprefix('sha256:')}"


def deployment_projection(bundle: ReleaseBundle, authority: DevelopmentAuthorityReceipt) -> DeploymentProjection:
    """The integrity-checked deployment projection operation receipts are issued against.

    Environment comes from the verified authority whose grant digest the parent binds; tier and
    grant digest from the verified parent itself; never from labels, names or flags.
    """
    if authority.grant_digest != bundle.parent.grant_digest:
        raise IntegrityError(
            "release.integrity_mismatch", "the authority presented is not the grant this release was built under"
        )
    return DeploymentProjection(
        release_id=bundle.release_id,
        deployment_id=deployment_id_of(bundle.release_id, authority.environment),
        environment=authority.environment,
        trust_tier=bundle.parent.trust_tier,
        grant_digest=bundle.parent.grant_digest,
    )
