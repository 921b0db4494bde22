"""The paged development parent: a release whose membership does not fit one canonical document.

A development parent (`DevelopmentReleaseSetV3`) lists every ordinary constituent and every source
sidecar itself, so it passes the canonical cap (`canonical.MAX_DOCUMENT_BYTES`, 4 MiB) near 3,200
flows. Beyond that the composer writes, instead:

- `PagedDevelopmentReleaseSetV3` (`dpone.release-set.v3`, profile
  `development_workspace_delivery_paged_v1`): the same authority binding, native constituents and
  execution subjects as the single-document parent, plus `pages`, the ordered digests of its pages,
  and an `integrity_subject` over the native constituents and the page digests
  (`paged_integrity_subject_for`);
- `DevelopmentReleasePage` (`dpone.release-page.v1`): one content-addressed slice of the membership,
  its `ordinary_constituents` (sorted by pack id) and `source_sidecars` (sorted by constituent and
  path). Its identity is its digest in the domain `dpone.release-page.v1`, which is the name the
  parent lists; a page carries no authority and no release identity, so two releases may share one.

The membership of a paged parent is the concatenation of its pages in the order listed; read that
way, ordinary constituents must be strictly increasing by pack id and sidecars strictly increasing
by (constituent, path), exactly the order of the single-document parent's lists. That check, every
page present and digest-checked, and no member outside the pages, is the bundle's
(`release.build.pages.read_pages`), since it needs the member bytes.

What a reader could get wrong: the paged parent is not a different family or a different schema:
it is a v3 development profile, so the release identity stays "the parent's digest in its
profile-refined domain" and a paged and an unpaged parent can never share an identity. A release is
paged only when its single-document parent would not fit the cap, so every release composable before
pages existed keeps its bytes and identity. Pages are chunked by content (see the composer), so one
membership always gives one set of pages, but any chunking that verifies is a valid release.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from dpone_dagster.contracts.base import ContractModel
from dpone_dagster.contracts.bounds import MAX_LIST, MAX_WORKLOADS, Digest, sorted_unique
from dpone_dagster.contracts.grant import ExecutionSubject
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.release_documents import (
    RELEASE_SET_V3_SCHEMA,
    NativeConstituent,
    NoRouteCertifications,
    OrdinaryConstituent,
    SourceSidecar,
    _DevelopmentBinding,
    _ProfiledIdentity,
)

PAGED_DEVELOPMENT_PROFILE = "development_workspace_delivery_paged_v1"
RELEASE_PAGE_SCHEMA = "dpone.release-page.v1"
PAGED_INTEGRITY_SUBJECT_KIND = "dpone.release-integrity-subject.paged.v1"
MAX_PAGES = 4096
"""Pages one parent may list: at 1 KiB per page digest entry well under the cap, and far more than
10,000 workloads need (a page holds up to `MAX_PAGE_BYTES` of entries; ~40 pages at 10,000 flows)."""


class DevelopmentReleasePage(ContractModel):
    """One content-addressed slice of a paged parent's membership (no authority of its own)."""

    KIND = RELEASE_PAGE_SCHEMA

    schema_: Literal["dpone.release-page.v1"] = Field(default=RELEASE_PAGE_SCHEMA, alias="schema")
    ordinary_constituents: sorted_unique(OrdinaryConstituent, max_length=MAX_WORKLOADS, key=lambda item: item.pack_id)
    source_sidecars: sorted_unique(SourceSidecar, max_length=MAX_LIST * 4, key=SourceSidecar.sort_key)

    @model_validator(mode="after")
    def _not_empty(self) -> DevelopmentReleasePage:
        if not self.ordinary_constituents and not self.source_sidecars:
            raise ValueError("a release page holds at least one constituent or sidecar")
        return self


def paged_integrity_subject_for(
    native: tuple[NativeConstituent, ...] | list[NativeConstituent], pages: tuple[str, ...] | list[str]
) -> str:
    """The integrity subject of a paged parent: one digest over the native constituents and the page digests."""
    return digest(
        PAGED_INTEGRITY_SUBJECT_KIND,
        {"native": [item.model_dump(mode="json") for item in native], "pages": list(pages)},
    )


class PagedDevelopmentReleaseSetV3(_ProfiledIdentity, _DevelopmentBinding):
    """The development parent of a membership too large for one document: native constituents and page digests."""

    KIND = RELEASE_SET_V3_SCHEMA

    schema_: Literal["dpone.release-set.v3"] = Field(default=RELEASE_SET_V3_SCHEMA, alias="schema")
    profile: Literal["development_workspace_delivery_paged_v1"] = PAGED_DEVELOPMENT_PROFILE
    native_constituents: sorted_unique(NativeConstituent, max_length=256, key=lambda item: item.constituent_id)
    pages: tuple[Digest, ...] = Field(min_length=1, max_length=MAX_PAGES)
    integrity_subject: Digest
    execution_subjects: sorted_unique(ExecutionSubject, max_length=MAX_WORKLOADS, key=ExecutionSubject.sort_key)
    route_certifications: NoRouteCertifications

    @model_validator(mode="after")
    def _consistent(self) -> PagedDevelopmentReleaseSetV3:
        if len(set(self.pages)) != len(self.pages):
            raise ValueError("a page is listed twice")
        if self.integrity_subject != paged_integrity_subject_for(self.native_constituents, self.pages):
            raise ValueError("integrity_subject does not match the native constituents and pages")
        return self
