"""The maximum release, part two (issue 20 #8): a parent of content-addressed pages, composed and verified.

Synthetic and fast: no dbt compile. A small synthetic release is composed once with the single-document
threshold lowered (so it pages) and once as shipped (so it does not); the page checks are proven on
a paged parent re-expressed by hand from a small release (`repage`), where each forged case is valid
in every respect but the one its test names. The 10,000-member case builds the constituents and
sidecars directly and runs the composer's parent step and the reader's page step.

What a reader could get wrong: `open_bundle` is called without an expected identity in the forged
cases on purpose: a forger's parent has a new identity, and the refusal may not depend on knowing it.
"""

from __future__ import annotations

import hashlib

import pytest

from dpone_dagster.authority.synthetic import SyntheticAuthority, synthetic_limits
from dpone_dagster.contracts.bounds import MAX_WORKLOADS
from dpone_dagster.contracts.canonical import MAX_DOCUMENT_BYTES
from dpone_dagster.contracts.release_documents import DevelopmentReleaseSetV3, OrdinaryConstituent, SourceSidecar
from dpone_dagster.contracts.release_pages import (
    DevelopmentReleasePage,
    PagedDevelopmentReleaseSetV3,
    paged_integrity_subject_for,
)
from dpone_dagster.release.build import compose, pages
from dpone_dagster.release.build.bundle import PARENT_PATH, open_bundle
from dpone_dagster.release.build.pages import PageError, page_path, paginate, read_pages
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
from dpone_dagster.release.delivery.registry import ReleaseRegistry, blob_key
from dpone_dagster.release.errors import IntegrityError
from tests.release.fabricated import SyntheticTarget, synthetic_release

WORKLOADS = {f"w{index:02d}": ((f"raw.t{index:02d}",), ()) for index in range(12)}
BINDING_FIELDS = (
    "authority_family",
    "purpose",
    "trust_tier",
    "policy_digest",
    "grant_digest",
    "source_repository_digest",
    "source_commit",
    "source_snapshot_digest",
    "delivery_status",
)


@pytest.fixture(scope="module")
def target() -> SyntheticTarget:
    return SyntheticTarget(
        authority=SyntheticAuthority(policy_options={"limits": synthetic_limits(max_workloads=MAX_WORKLOADS)})
    )


@pytest.fixture(scope="module")
def single(target):
    return synthetic_release(target, workloads=WORKLOADS).bundle


def repage(bundle, slices: list[tuple[list[OrdinaryConstituent], list[SourceSidecar]]]) -> dict[str, bytes]:
    """`bundle`'s members with its parent re-expressed as a paged parent of exactly these page slices."""
    members = {path: data for path, data in bundle.members.items() if path != PARENT_PATH}
    built = [DevelopmentReleasePage(ordinary_constituents=o, source_sidecars=s) for o, s in slices]
    for page in built:
        members[page_path(page.document_digest())] = page.canonical_bytes()
    digests = [page.document_digest() for page in built]
    parent = PagedDevelopmentReleaseSetV3(
        **{field: getattr(bundle.parent, field) for field in BINDING_FIELDS},
        native_constituents=bundle.parent.native_constituents,
        pages=digests,
        integrity_subject=paged_integrity_subject_for(bundle.parent.native_constituents, digests),
        execution_subjects=bundle.parent.execution_subjects,
        route_certifications=(),
    )
    members[PARENT_PATH] = parent.canonical_bytes()
    return members


def halves(bundle) -> list[tuple[list, list]]:
    ordinary, sidecars = list(bundle.ordinary_constituents), list(bundle.source_sidecars)
    return [(ordinary[:6], sidecars[:10]), (ordinary[6:], sidecars[10:])]


def test_a_small_membership_keeps_the_single_document_parent(single):
    assert isinstance(single.parent, DevelopmentReleaseSetV3)
    assert not any(path.startswith("pages/") for path in single.members)


def test_beyond_the_threshold_compose_writes_pages_that_round_trip(target, single, monkeypatch):
    monkeypatch.setattr(compose, "SINGLE_PARENT_MAX_BYTES", 1024)
    monkeypatch.setattr(pages, "MIN_PAGE_BYTES", 1)
    monkeypatch.setattr(pages, "MAX_PAGE_BYTES", 2048)
    paged = synthetic_release(target, workloads=WORKLOADS).bundle
    assert isinstance(paged.parent, PagedDevelopmentReleaseSetV3)
    assert len(paged.parent.pages) > 2
    assert all(len(paged.members[page_path(item)]) <= 2048 for item in paged.parent.pages)
    reopened = open_bundle(paged.members, expected_release_id=paged.release_id)
    # the same membership as the single-document parent, under another identity
    assert reopened.ordinary_constituents == single.ordinary_constituents
    assert reopened.source_sidecars == single.source_sidecars
    assert reopened.ordinary_membership == single.ordinary_membership
    assert reopened.release_id != single.release_id


def test_a_paged_release_publishes_fetches_installs_and_loads(target, monkeypatch, tmp_path):
    monkeypatch.setattr(compose, "SINGLE_PARENT_MAX_BYTES", 1024)
    monkeypatch.setattr(pages, "MIN_PAGE_BYTES", 1)
    monkeypatch.setattr(pages, "MAX_PAGE_BYTES", 2048)
    release = synthetic_release(target, workloads=WORKLOADS)
    bundle, authority = release.bundle, release.authority
    store = LocalDirectoryStore(tmp_path / "registry")
    registry = ReleaseRegistry(store)
    registry.publish(
        bundle, authority=authority, receipt=target.publication(bundle, authority), admission=target.issuer
    )
    fetched = registry.fetch(bundle.release_id)
    assert (
        dict(fetched.members) == dict(bundle.members) and fetched.ordinary_constituents == bundle.ordinary_constituents
    )
    cache = ReleaseCache(tmp_path / "cache", admission=target.issuer, clock=target.clock)
    cache.materialize(fetched, authority=authority, receipt=target.materialization(fetched, authority))
    assert cache.load(bundle.release_id).bundle.source_sidecars == bundle.source_sidecars
    # a page altered in the registry's blob store is refused on fetch
    page = bundle.members[page_path(bundle.parent.pages[0])]
    blob = tmp_path / "registry" / blob_key(hashlib.sha256(page).hexdigest())
    blob.chmod(0o644)
    blob.write_bytes(page[:-1] + b" }")
    with pytest.raises(PageError) as refused:  # the registry reads blobs by name; the page check is what refuses
        registry.fetch(bundle.release_id)
    assert refused.value.code == "release.page_digest_mismatch"


def test_a_hand_paged_parent_opens(single):
    reopened = open_bundle(repage(single, halves(single)))
    assert reopened.ordinary_constituents == single.ordinary_constituents
    assert reopened.source_sidecars == single.source_sidecars


def test_a_missing_page_refuses(single):
    members = repage(single, halves(single))
    second = sorted(path for path in members if path.startswith("pages/"))[1]
    del members[second]
    with pytest.raises(PageError) as refused:
        open_bundle(members)
    assert refused.value.code == "release.page_missing"


def test_a_tampered_page_refuses(single):
    members = repage(single, halves(single))
    path = next(path for path in members if path.startswith("pages/"))
    members[path] = members[path].replace(b'"size":', b'"size":1', 1)
    with pytest.raises(PageError) as refused:
        open_bundle(members)
    assert refused.value.code == "release.page_digest_mismatch"


@pytest.mark.parametrize("which", ["ordinary", "sidecar"])
def test_a_member_on_two_pages_refuses(single, which):
    (o1, s1), (o2, s2) = halves(single)
    if which == "ordinary":
        slices = [(o1, s1), (o1[-1:] + o2, s2)]
    else:
        slices = [(o1, s1), (o2, s1[-1:] + s2)]
    with pytest.raises(PageError) as refused:
        open_bundle(repage(single, slices))
    assert refused.value.code == "release.page_member_duplicate"


@pytest.mark.parametrize("which", ["ordinary", "sidecar"])
def test_pages_listed_out_of_order_refuse(single, which):
    (o1, s1), (o2, s2) = halves(single)
    slices = [(o2, s1), (o1, s2)] if which == "ordinary" else [(o1, s2), (o2, s1)]
    with pytest.raises(PageError) as refused:
        open_bundle(repage(single, slices))
    assert refused.value.code == "release.page_out_of_order"


def test_a_constituent_left_off_every_page_refuses(single):
    (o1, s1), (o2, s2) = halves(single)
    dropped = o2[0].constituent_id
    slices = [(o1, s1), (o2[1:], [s for s in s2 if s.constituent_id != dropped])]
    slices[0] = (o1, [s for s in s1 if s.constituent_id != dropped])
    with pytest.raises(IntegrityError) as refused:  # its ordinary document is now a member nothing binds
        open_bundle(repage(single, slices))
    assert refused.value.code == "release.integrity_mismatch"
    assert "does not bind" in refused.value.message


def test_a_source_file_of_no_constituent_refuses(single):
    (o1, s1), (o2, s2) = halves(single)
    slices = [(o1, s1), (o2[1:], s2)]  # o2[0] dropped, its sidecars kept
    with pytest.raises(IntegrityError) as refused:
        open_bundle(repage(single, slices))
    assert refused.value.code == "release.integrity_mismatch"
    assert "belongs to no constituent" in refused.value.message


def _entries(count: int, changed: int | None = None) -> tuple[list[OrdinaryConstituent], list[SourceSidecar]]:
    def hexed(label: str) -> str:
        return hashlib.sha256(label.encode()).hexdigest()

    ordinary, sidecars = [], []
    for index in range(count):
        pack = f"flow_{index:05d}"
        cid = "sha256:" + hexed(pack + ("changed" if index == changed else ""))
        ordinary.append(
            OrdinaryConstituent(
                constituent_id=cid,
                pack_id=pack,
                selector=f"flow:{pack}",
                dag_id=pack,
                fingerprint="sha256:" + hexed("fp" + pack),
                dag_content_sha256=hexed("dag" + pack),
                hook_ids=(),
            )
        )
        sidecars.append(
            SourceSidecar(
                constituent_id=cid, path=f"flows/{pack}/sql/{pack}.sql", content_sha256=hexed("sql" + pack), size=100
            )
        )
    sidecars.sort(key=SourceSidecar.sort_key)
    return ordinary, sidecars


def test_ten_thousand_members_compose_into_pages_under_the_cap_and_read_back(single):
    ordinary, sidecars = _entries(MAX_WORKLOADS)
    binding = {field: getattr(single.parent, field) for field in BINDING_FIELDS}
    parent, documents = compose.development_parent(binding, [], ordinary, sidecars, ())
    assert isinstance(parent, PagedDevelopmentReleaseSetV3)
    assert len(documents[PARENT_PATH]) < MAX_DOCUMENT_BYTES
    assert all(len(data) <= pages.MAX_PAGE_BYTES for path, data in documents.items() if path != PARENT_PATH)
    read_ordinary, read_sidecars, page_paths = read_pages(documents, parent)
    assert list(read_ordinary) == ordinary and list(read_sidecars) == sidecars
    assert page_paths == set(documents) - {PARENT_PATH}


def test_one_changed_flow_changes_few_pages():
    before = {page.document_digest() for page in paginate(*_entries(4_000))}
    after = {page.document_digest() for page in paginate(*_entries(4_000, changed=1_234))}
    assert len(before) > 4
    assert len(before - after) <= 3  # the page of its constituent and the page(s) of its sidecar
