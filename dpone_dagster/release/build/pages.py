"""Pages of a paged development parent: cutting the membership into pages, and reading it back verified.

`paginate` cuts the ordinary constituents (pack id order) and then the source sidecars ((constituent,
path) order) into `DevelopmentReleasePage`s of at most `MAX_PAGE_BYTES` canonical bytes each. The cut
is by content: after an entry whose digest ends in `00`, once the page holds `MIN_PAGE_BYTES`, or when
the next entry would pass `MAX_PAGE_BYTES`, and always where the ordinary entries end. Changing one
flow therefore changes the pages around its entries, not every page after it, and an unchanged page
is the same content-addressed member in both releases.

`read_pages` is the page half of `open_bundle`: every page the parent lists must be present at
`pages/<hex>.json` (`release.page_missing`), hash to the digest listed (`release.page_digest_mismatch`)
and be a valid page; read in the order listed, the pages' entries must be strictly increasing
(`release.page_out_of_order`) and no pack id, selector, constituent id or sidecar may appear twice,
within the pages or against a native constituent (`release.page_member_duplicate`).

The same machinery pages the member list of a registry commit and of a deployment record
(`release.delivery.member_pages`): `chunk_entries` cuts it, `read_page` reads one page verified, and
the same codes refuse a missing, altered, repeated or misordered page entry.

What a reader could get wrong: the composer writes pages only when the single-document parent does
not fit the canonical cap (see `compose`); a reader accepts any chunking that verifies, not only
the one `paginate` produces. A page binds no authority: the parent's digest list is what ties it to
one release, so the same page bytes may serve many releases.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from dpone_dagster.contracts.base import ContractModel, parse_document
from dpone_dagster.contracts.canonical import CanonicalError
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.identity import canonical_digest
from dpone_dagster.contracts.release_documents import OrdinaryConstituent, SourceSidecar
from dpone_dagster.contracts.release_pages import (
    DevelopmentReleasePage,
    PagedDevelopmentReleaseSetV3,
)
from dpone_dagster.release.errors import IntegrityError

MIN_PAGE_BYTES = 64 * 1024
MAX_PAGE_BYTES = 1024 * 1024
_ENVELOPE_BYTES = 128  # the page's schema and list brackets, with room to spare


_Page = TypeVar("_Page", bound=ContractModel)


class PageError(CodedError):
    codes = {
        "release.page_missing": (
            "A page that a paged release parent, registry commit or deployment record lists is absent; "
            "the copy is incomplete."
        ),
        "release.page_digest_mismatch": (
            "A page's bytes do not hash to the digest its parent, commit or record lists; "
            "the copy is corrupt or was altered."
        ),
        "release.page_member_duplicate": (
            "A constituent, source file or stored member appears twice across the pages of one document "
            "(or a page reuses a native constituent's id); the release is refused."
        ),
        "release.page_out_of_order": (
            "Pages read in the order listed do not give the membership (or member list) in canonical order; "
            "the release is refused."
        ),
        "release.page_count_mismatch": (
            "The pages of a paged registry commit or deployment record do not hold the member count it "
            "states; a page was removed or replaced."
        ),
        "release.membership_undeliverable": (
            "The release has more members than a registry commit or deployment record can list, even paged; "
            "it is refused before anything is written."
        ),
    }


def page_path(page_digest: str) -> str:
    return f"pages/{page_digest.removeprefix('sha256:')}.json"


def paginate(
    ordinary: Sequence[OrdinaryConstituent], sidecars: Sequence[SourceSidecar]
) -> tuple[DevelopmentReleasePage, ...]:
    """The pages of a membership (`ordinary` sorted by pack id, `sidecars` by `SourceSidecar.sort_key`)."""
    pages = [
        DevelopmentReleasePage(ordinary_constituents=chunk, source_sidecars=())
        for chunk in chunk_entries(ordinary, lambda c: c.constituent_id)
    ]
    pages += [
        DevelopmentReleasePage(ordinary_constituents=(), source_sidecars=chunk)
        for chunk in chunk_entries(sidecars, lambda s: s.content_sha256)
    ]
    return tuple(pages)


def chunk_entries(entries: Sequence, hash_of: Callable[[object], str]) -> list[list]:
    """`entries` (in their canonical order) cut by content into runs of at most `MAX_PAGE_BYTES` encoded."""
    chunks: list[list] = []
    current: list = []
    size = _ENVELOPE_BYTES
    for entry in entries:
        entry_bytes = len(entry.canonical_bytes()) + 1
        if current and size + entry_bytes > MAX_PAGE_BYTES:
            chunks.append(current)
            current, size = [], _ENVELOPE_BYTES
        current.append(entry)
        size += entry_bytes
        if size >= MIN_PAGE_BYTES and hash_of(entry).endswith("00"):
            chunks.append(current)
            current, size = [], _ENVELOPE_BYTES
    if current:
        chunks.append(current)
    return chunks


def read_pages(
    members: Mapping[str, bytes], parent: PagedDevelopmentReleaseSetV3
) -> tuple[tuple[OrdinaryConstituent, ...], tuple[SourceSidecar, ...], frozenset[str]]:
    """The verified membership of a paged parent: ordinary constituents, sidecars, and the page paths read."""
    ordinary: list[OrdinaryConstituent] = []
    sidecars: list[SourceSidecar] = []
    seen_packs: set[str] = set()
    seen_selectors: set[str] = set()
    seen_ids = {item.constituent_id for item in parent.native_constituents}
    seen_sidecars: set[tuple[str, str]] = set()
    for page_digest in parent.pages:
        page = _page(members, page_digest)
        for constituent in page.ordinary_constituents:
            if (
                constituent.pack_id in seen_packs
                or constituent.selector in seen_selectors
                or constituent.constituent_id in seen_ids
            ):
                raise PageError(
                    "release.page_member_duplicate",
                    f"ordinary constituent {constituent.pack_id!r} appears twice across the pages",
                )
            if ordinary and constituent.pack_id < ordinary[-1].pack_id:
                raise PageError(
                    "release.page_out_of_order", "the pages do not list ordinary constituents in pack id order"
                )
            seen_packs.add(constituent.pack_id)
            seen_selectors.add(constituent.selector)
            seen_ids.add(constituent.constituent_id)
            ordinary.append(constituent)
        for sidecar in page.source_sidecars:
            key = sidecar.sort_key()
            if key in seen_sidecars:
                raise PageError(
                    "release.page_member_duplicate", f"source file {sidecar.path!r} appears twice across the pages"
                )
            if sidecars and key < sidecars[-1].sort_key():
                raise PageError(
                    "release.page_out_of_order", "the pages do not list source files in (constituent, path) order"
                )
            seen_sidecars.add(key)
            sidecars.append(sidecar)
    if not sidecars:
        raise IntegrityError("release.integrity_mismatch", "a paged parent's pages list no source file")
    if any(sidecar.constituent_id not in seen_ids for sidecar in sidecars):
        raise IntegrityError(
            "release.integrity_mismatch", "a source file of the pages belongs to no constituent of the release"
        )
    return tuple(ordinary), tuple(sidecars), frozenset(page_path(item) for item in parent.pages)


def _page(members: Mapping[str, bytes], page_digest: str) -> DevelopmentReleasePage:
    return read_page(members.get(page_path(page_digest)), page_digest, DevelopmentReleasePage)


def read_page(data: bytes | None, page_digest: str, model: type[_Page]) -> _Page:
    """The page `page_digest` names, from its stored bytes (None: absent), verified against that digest."""
    if data is None:
        raise PageError("release.page_missing", f"page {page_digest} is missing")
    if canonical_digest(model.KIND, data) != page_digest:
        raise PageError("release.page_digest_mismatch", f"page {page_digest} does not hash to its listed digest")
    try:
        return parse_document(model, data)
    except (CanonicalError, CodedError) as error:
        raise IntegrityError(
            "release.integrity_mismatch", f"page {page_digest} is not a valid release page ({error.code})"
        ) from None
