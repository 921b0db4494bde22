"""The maximum release, part three (issue 20 #8): paged registry commits and deployment records.

Synthetic and fast: the default fabricated release is delivered once as shipped (one v1 commit, one
v2 record: the old formats, byte for byte) and once with the single-document cap lowered so its
member list pages (`member_pages.SINGLE_DOCUMENT_MAX_BYTES`, like the parent's threshold in
test_paged_parent). The 50,000-member case builds the member list directly and runs the listing's
write and read halves.

What a reader could get wrong: the forged commits here are written straight into the store; a commit
is not authority, so the refusal must come from its pages and the bundle, never from who wrote it.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from typer.testing import CliRunner

from dpone_dagster.cli import app
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.canonical import MAX_DOCUMENT_BYTES
from dpone_dagster.contracts.release_records import (
    MAX_MEMBERS,
    DeploymentRecord,
    MemberDigest,
    PagedDeploymentRecord,
    PagedReleaseCommit,
    ReleaseCommit,
    ReleaseMemberPage,
)
from dpone_dagster.errors import DponeError
from dpone_dagster.release.build import pages
from dpone_dagster.release.delivery import member_pages
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.delivery.member_pages import (
    commit_documents,
    member_page_path,
    read_member_pages,
    record_documents,
)
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
from dpone_dagster.release.delivery.registry import ReleaseRegistry, commit_key
from dpone_dagster.release.source.local_files import LocalFiles

RECORD_FIELDS = dict(
    release_id="sha256:" + "a" * 64,
    deployment_id="synthetic-dev:" + "a" * 64,
    environment="synthetic-dev",
    trust_tier="non_production",
    grant_digest="sha256:" + "b" * 64,
    authority_expires_at="2027-01-01T00:00:00Z",
    revocation_epoch=0,
    installed_at="2026-01-01T00:00:00Z",
)


@pytest.fixture
def paging(monkeypatch):
    """Page every member list of more than a few members (the real cap pages ~20,000)."""
    monkeypatch.setattr(member_pages, "SINGLE_DOCUMENT_MAX_BYTES", 1024)
    monkeypatch.setattr(pages, "MIN_PAGE_BYTES", 1)
    monkeypatch.setattr(pages, "MAX_PAGE_BYTES", 1024)


def deliver(tmp_path, target, release):
    bundle, authority = release.bundle, release.authority
    registry = ReleaseRegistry(LocalDirectoryStore(tmp_path / "registry"))
    registry.publish(
        bundle, authority=authority, receipt=target.publication(bundle, authority), admission=target.issuer
    )
    fetched = registry.fetch(bundle.release_id)
    cache = ReleaseCache(tmp_path / "cache", admission=target.issuer, clock=target.clock)
    cache.materialize(fetched, authority=authority, receipt=target.materialization(fetched, authority))
    directory = cache.root / "deployments" / bundle.release_id.removeprefix("sha256:")
    return registry, cache, directory


def code_of(call) -> str:
    with pytest.raises(DponeError) as raised:
        call()
    return raised.value.code


def test_a_small_release_keeps_the_v1_commit_and_v2_record(tmp_path, target, release):
    registry, cache, directory = deliver(tmp_path, target, release)
    commit = (tmp_path / "registry" / commit_key(release.bundle.release_id)).read_bytes()
    members = release.bundle.member_digests()
    assert commit == ReleaseCommit(release_id=release.bundle.release_id, members=members).canonical_bytes()
    assert isinstance(parse_document(DeploymentRecord, (directory / "deployment.json").read_bytes()), DeploymentRecord)
    assert not (tmp_path / "registry" / "member-pages").exists() and not (directory / "member-pages").exists()


def test_a_paged_release_publishes_installs_activates_and_shows(paging, tmp_path, target, release):
    registry, cache, directory = deliver(tmp_path, target, release)
    bundle = release.bundle
    commit = parse_document(PagedReleaseCommit, (tmp_path / "registry" / commit_key(bundle.release_id)).read_bytes())
    assert len(commit.member_pages) > 2 and commit.member_count == len(bundle.members)
    assert all((tmp_path / "registry" / member_page_path(page)).is_file() for page in commit.member_pages)
    assert dict(registry.fetch(bundle.release_id).members) == dict(bundle.members)
    record = cache.load(bundle.release_id).record
    assert isinstance(record, PagedDeploymentRecord) and record.member_pages == commit.member_pages
    assert registry.unreferenced_blobs() == []
    activated = cache.activate(bundle.release_id, receipt=target.activation(bundle, release.authority))
    assert activated.changed
    for location in (directory, tmp_path / "registry" / commit_key(bundle.release_id)):
        shown = CliRunner().invoke(app, ["release", "show", "--json", str(location)])
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.output)["members"] == len(bundle.members)
    # an identical retry finds the commit and writes nothing
    again = registry.publish(
        bundle,
        authority=release.authority,
        receipt=target.publication(bundle, release.authority),
        admission=target.issuer,
    )
    assert again.already_published and again.bytes_written == 0


@pytest.mark.parametrize("where", ["registry", "cache"])
def test_a_tampered_or_removed_member_page_refuses(paging, tmp_path, target, release, where):
    registry, cache, directory = deliver(tmp_path, target, release)
    root = tmp_path / "registry" if where == "registry" else directory
    read = (
        (lambda: registry.fetch(release.bundle.release_id))
        if where == "registry"
        else (lambda: cache.load(release.bundle.release_id))
    )
    record = cache.load(release.bundle.release_id).record
    page = root / member_page_path(record.member_pages[1])
    original = page.read_bytes()
    page.chmod(0o600)
    page.write_bytes(original.replace(b'"size":', b'"size":1', 1))
    assert code_of(read) == "release.page_digest_mismatch"
    page.unlink()
    assert code_of(read) == "release.page_missing"


def _forge_commit(tmp_path, release, pages_listed, count) -> None:
    path = tmp_path / "registry" / commit_key(release.bundle.release_id)
    forged = PagedReleaseCommit(release_id=release.bundle.release_id, member_count=count, member_pages=pages_listed)
    path.chmod(0o600)
    path.write_bytes(forged.canonical_bytes())


def test_a_commit_that_drops_or_reorders_a_page_refuses(paging, tmp_path, target, release):
    registry, _, _ = deliver(tmp_path, target, release)
    listed = parse_document(
        PagedReleaseCommit, (tmp_path / "registry" / commit_key(release.bundle.release_id)).read_bytes()
    )
    fetch = lambda: registry.fetch(release.bundle.release_id)  # noqa: E731
    _forge_commit(tmp_path, release, listed.member_pages[1:], listed.member_count)
    assert code_of(fetch) == "release.page_count_mismatch"
    swapped = (listed.member_pages[1], listed.member_pages[0], *listed.member_pages[2:])
    _forge_commit(tmp_path, release, swapped, listed.member_count)
    assert code_of(fetch) == "release.page_out_of_order"


def test_a_member_on_two_pages_refuses():
    members = _members(40)
    first = ReleaseMemberPage(members=members[:21])
    second = ReleaseMemberPage(members=members[20:])
    stored = {member_page_path(page.document_digest()): page.canonical_bytes() for page in (first, second)}
    commit = PagedReleaseCommit(
        release_id="sha256:" + "c" * 64,
        member_count=41,
        member_pages=(first.document_digest(), second.document_digest()),
    )
    assert code_of(lambda: read_member_pages(commit, stored.get)) == "release.page_member_duplicate"


def test_a_stray_page_in_an_installed_deployment_refuses(paging, tmp_path, target, release):
    _, cache, directory = deliver(tmp_path, target, release)
    stray = ReleaseMemberPage(members=_members(1))
    (directory / member_page_path(stray.document_digest())).write_bytes(stray.canonical_bytes())
    assert code_of(lambda: cache.load(release.bundle.release_id)) == "release.integrity_mismatch"


def test_an_undeliverable_membership_refuses_before_any_write(monkeypatch, tmp_path, target, release):
    monkeypatch.setattr(member_pages, "MAX_PAGED_MEMBERS", len(release.bundle.members) - 1)
    bundle, authority = release.bundle, release.authority
    store = LocalDirectoryStore(tmp_path / "registry")
    publish = lambda: ReleaseRegistry(store).publish(  # noqa: E731
        bundle, authority=authority, receipt=target.publication(bundle, authority), admission=target.issuer
    )
    assert code_of(publish) == "release.membership_undeliverable"
    assert list(store.keys()) == []
    cache = ReleaseCache(tmp_path / "cache", admission=target.issuer, clock=target.clock)
    install = lambda: cache.materialize(  # noqa: E731
        bundle, authority=authority, receipt=target.materialization(bundle, authority)
    )
    assert code_of(install) == "release.membership_undeliverable"
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.json"))


def test_a_page_no_commit_names_is_unreferenced(paging, tmp_path, target, release):
    registry, _, _ = deliver(tmp_path, target, release)
    orphan = ReleaseMemberPage(members=_members(2))
    registry.store.put_if_absent(member_page_path(orphan.document_digest()), orphan.canonical_bytes())
    assert registry.unreferenced_blobs() == [member_page_path(orphan.document_digest())]


def _members(count: int) -> list[MemberDigest]:
    return [
        MemberDigest(
            path=f"sources/{index:064x}/flows/flow_{index:05d}/sql/flow_{index:05d}.sql",
            content_sha256=hashlib.sha256(str(index).encode()).hexdigest(),
            size=1000 + index,
        )
        for index in range(count)
    ]


def test_fifty_thousand_members_page_under_the_cap_and_read_back():
    members = _members(MAX_MEMBERS)
    assert code_of(
        lambda: ReleaseCommit(release_id=RECORD_FIELDS["release_id"], members=members).canonical_bytes()
    ) == ("canonical.too_large")  # the v1 commit that refused 10,000 workloads
    commit = commit_documents(RECORD_FIELDS["release_id"], members)
    record = record_documents(members, **RECORD_FIELDS)
    assert isinstance(commit.document, PagedReleaseCommit) and isinstance(record.document, PagedDeploymentRecord)
    assert len(commit.data) < MAX_DOCUMENT_BYTES and dict(commit.pages) == dict(record.pages)
    assert all(len(data) <= pages.MAX_PAGE_BYTES for data in commit.pages.values())
    assert list(read_member_pages(commit.document, commit.pages.get)) == members
    assert list(read_member_pages(record.document, record.pages.get)) == members


@pytest.mark.parametrize("paged", [False, True])
def test_a_staged_byte_that_differs_is_never_installed(request, tmp_path, target, release, paged):
    """Install rereads its stage byte for byte against the verified release before the rename."""
    if paged:
        request.getfixturevalue("paging")

    class Flipping(LocalFiles):
        def write_unsynced(self, path, data):
            flipped = data[:-1] + bytes([data[-1] ^ 1]) if path.name == "deployment.json" else data
            super().write_unsynced(path, flipped)

    bundle, authority = release.bundle, release.authority
    cache = ReleaseCache(tmp_path / "cache", admission=target.issuer, clock=target.clock, files=Flipping())
    install = lambda: cache.materialize(  # noqa: E731
        bundle, authority=authority, receipt=target.materialization(bundle, authority)
    )
    assert code_of(install) == "release.durability_uncertain"
    assert cache.deployments() == [] and cache.staging() == []
