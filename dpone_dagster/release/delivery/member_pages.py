"""The member list of a registry commit and of a deployment record: one document when it fits, else pages.

A release's member list (path, SHA-256, size per member; `ReleaseBundle.member_digests()`) is about
130-200 bytes a member, so one canonical document (`canonical.MAX_DOCUMENT_BYTES`, 4 MiB) holds
about 20,000 members. `commit_documents` and `record_documents` keep the single document
(`dpone.release-commit.v1`, `dpone.deployment-record.v2`) whenever it fits, byte for byte what they
always wrote, and otherwise write the paged form (`dpone.release-commit.v2`,
`dpone.deployment-record.v3`) plus its `dpone.release-member-page.v1` pages, cut by the same
content-defined chunking as the paged release parent (`release.build.pages.chunk_entries`). Pages
live at `member-pages/<hex>.json` (`<hex>`: the page's digest in the domain
`dpone.release-member-page.v1`), in the registry and inside an installed deployment alike.

`read_member_pages` is the one verified reader: every listed page present (`release.page_missing`),
hashing to its listed digest (`release.page_digest_mismatch`), paths strictly increasing across the
pages (`release.page_out_of_order`, `release.page_member_duplicate`), and exactly `member_count`
members (`release.page_count_mismatch`).

What a reader could get wrong: the single-or-paged choice is made separately for the commit and for
the record (the record is ~600 bytes larger), so near the cap a paged record may sit beside a single
commit; both list the same members. `require_deliverable` is the only size limit of delivery: a member
list within `MAX_PAGED_MEMBERS` always pages (even at the longest paths, well under `MAX_PAGES`), so
publish checks it once, before the first blob, for the commit and for the record install will write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dpone_dagster.contracts.base import ContractModel
from dpone_dagster.contracts.canonical import MAX_DOCUMENT_BYTES, CanonicalError
from dpone_dagster.contracts.identity import canonical_digest
from dpone_dagster.contracts.release_pages import MAX_PAGES
from dpone_dagster.contracts.release_records import (
    MAX_MEMBERS,
    MAX_PAGED_MEMBERS,
    DeploymentRecord,
    MemberDigest,
    PagedDeploymentRecord,
    PagedReleaseCommit,
    ReleaseCommit,
    ReleaseMemberPage,
)
from dpone_dagster.release.build.pages import PageError, chunk_entries, read_page

MEMBER_PAGES = "member-pages/"
SINGLE_DOCUMENT_MAX_BYTES = MAX_DOCUMENT_BYTES
"""A commit or record whose single-document form is larger is paged. The canonical cap itself: every
member list that could be delivered before pages keeps its bytes (tests lower it to page a small one)."""


def member_page_path(page_digest: str) -> str:
    return f"{MEMBER_PAGES}{page_digest.removeprefix('sha256:')}.json"


@dataclass(frozen=True)
class Listed:
    """A commit or record ready to write: its document, its bytes, and the pages it needs (path -> bytes)."""

    document: ContractModel
    data: bytes
    pages: Mapping[str, bytes] = field(default_factory=dict)


def require_deliverable(members: Sequence[MemberDigest]) -> None:
    """Refuse (`release.membership_undeliverable`) a member list no commit or record can list, even paged."""
    if len(members) > MAX_PAGED_MEMBERS:
        raise PageError(
            "release.membership_undeliverable",
            f"the release has {len(members)} members; a commit or record lists at most {MAX_PAGED_MEMBERS}",
        )


def commit_documents(release_id: str, members: Sequence[MemberDigest]) -> Listed:
    """The registry commit of `release_id` (single document when it fits, else paged) and its pages."""
    return _listed(
        lambda: ReleaseCommit(release_id=release_id, members=members),
        lambda count, digests: PagedReleaseCommit(release_id=release_id, member_count=count, member_pages=digests),
        members,
    )


def record_documents(members: Sequence[MemberDigest], **fields: Any) -> Listed:
    """The bound deployment record of `members` with the authority `fields` (single when it fits, else paged)."""
    return _listed(
        lambda: DeploymentRecord.bound(**fields, members=members),
        lambda count, digests: PagedDeploymentRecord.bound(**fields, member_count=count, member_pages=digests),
        members,
    )


def _listed(
    single: Callable[[], ContractModel],
    paged: Callable[[int, tuple[str, ...]], ContractModel],
    members: Sequence[MemberDigest],
) -> Listed:
    require_deliverable(members)
    if len(members) <= MAX_MEMBERS:
        try:
            document = single()
            data = document.canonical_bytes()
            if len(data) <= SINGLE_DOCUMENT_MAX_BYTES:
                return Listed(document, data)
        except CanonicalError as error:
            if error.code != "canonical.too_large":
                raise
    pages = paginate_members(members)
    document = paged(len(members), tuple(pages))
    return Listed(document, document.canonical_bytes(), {member_page_path(key): data for key, data in pages.items()})


def paginate_members(members: Sequence[MemberDigest]) -> dict[str, bytes]:
    """The member pages of `members` (path order), page digest -> canonical bytes, in page order."""
    require_deliverable(members)
    chunks = chunk_entries(members, lambda member: member.content_sha256)
    if len(chunks) > MAX_PAGES:
        raise PageError(
            "release.membership_undeliverable", f"the member list needs {len(chunks)} pages, more than {MAX_PAGES}"
        )
    pages: dict[str, bytes] = {}
    for chunk in chunks:
        data = ReleaseMemberPage(members=chunk).canonical_bytes()
        pages[canonical_digest(ReleaseMemberPage.KIND, data)] = data
    return pages


def read_member_pages(
    listing: PagedReleaseCommit | PagedDeploymentRecord, read: Callable[[str], bytes | None]
) -> tuple[MemberDigest, ...]:
    """The verified member list of a paged commit or record; `read(path)` gives a page's stored bytes or None."""
    members: list[MemberDigest] = []
    for page_digest in listing.member_pages:
        page = read_page(read(member_page_path(page_digest)), page_digest, ReleaseMemberPage)
        if members and page.members[0].path <= members[-1].path:
            code = "release.page_member_duplicate" if page.members[0].path == members[-1].path else None
            raise PageError(
                code or "release.page_out_of_order",
                "a member is listed twice across the pages" if code else "the pages do not list members in path order",
            )
        members.extend(page.members)
        if len(members) > listing.member_count:
            break
    if len(members) != listing.member_count:
        raise PageError(
            "release.page_count_mismatch",
            f"the pages hold {len(members)} members, the document lists {listing.member_count}",
        )
    return tuple(members)


def members_of(
    document: ReleaseCommit | PagedReleaseCommit | ContractModel, read: Callable[[str], bytes | None]
) -> tuple[MemberDigest, ...]:
    """The member list of a commit or record of any version (pages read and verified when it is paged)."""
    if isinstance(document, (PagedReleaseCommit, PagedDeploymentRecord)):
        return read_member_pages(document, read)
    return tuple(document.members)
