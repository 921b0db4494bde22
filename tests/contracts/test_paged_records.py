"""The paged registry and cache records: closed, strict, bound, and outside the dispatch table like v1/v2."""

from __future__ import annotations

import json

import pytest

from dpone_dagster.contracts.base import ContractError, parse_document
from dpone_dagster.contracts.canonical import dumps
from dpone_dagster.contracts.dispatch import DispatchError, read_document
from dpone_dagster.contracts.release_records import (
    DeploymentRecord,
    MemberDigest,
    PagedDeploymentRecord,
    PagedReleaseCommit,
    ReleaseMemberPage,
    deployment_subject,
)

DIGEST = "sha256:" + "a" * 64
PAGES = ("sha256:" + "1" * 64, "sha256:" + "2" * 64)
FIELDS = dict(
    release_id=DIGEST,
    deployment_id="synthetic-dev:" + "a" * 64,
    environment="synthetic-dev",
    trust_tier="non_production",
    grant_digest="sha256:" + "b" * 64,
    authority_expires_at="2027-01-01T00:00:00Z",
    revocation_epoch=2,
    installed_at="2026-01-01T00:00:00Z",
)


def _record() -> PagedDeploymentRecord:
    return PagedDeploymentRecord.bound(**FIELDS, member_count=40_000, member_pages=PAGES)


def test_paged_records_round_trip_and_are_not_dispatchable() -> None:
    page = ReleaseMemberPage(members=[MemberDigest(path="release.json", content_sha256="b" * 64, size=10)])
    commit = PagedReleaseCommit(release_id=DIGEST, member_count=40_000, member_pages=PAGES)
    for document in (page, commit, _record()):
        assert parse_document(type(document), document.canonical_bytes()) == document
        with pytest.raises(DispatchError) as refused:
            read_document(document.canonical_bytes())
        assert refused.value.code == "dispatch.unknown_document"


@pytest.mark.parametrize(
    "edit",
    [
        {"member_count": 39_999},
        {"member_pages": list(reversed(PAGES))},
        {"revocation_epoch": 3},
        {"authority_expires_at": "2028-01-01T00:00:00Z"},
    ],
)
def test_an_edited_paged_record_does_not_parse(edit) -> None:
    value = json.loads(_record().canonical_bytes())
    value.update(edit)
    with pytest.raises(ContractError):
        parse_document(PagedDeploymentRecord, dumps(value))


def test_the_v3_subject_is_its_own_and_a_v2_record_is_unchanged() -> None:
    record = _record()
    assert record.integrity_subject == deployment_subject(record.model_dump(mode="json", by_alias=True))
    members = [MemberDigest(path="release.json", content_sha256="b" * 64, size=10)]
    v2 = DeploymentRecord.bound(**FIELDS, members=members)
    body = {"schema": "dpone.deployment-record.v2", **FIELDS, "members": [m.model_dump(mode="json") for m in members]}
    assert v2.integrity_subject == deployment_subject(body)  # the v2 rule, as persisted before pages


def test_a_page_listed_twice_or_an_empty_page_refuses() -> None:
    with pytest.raises(ContractError):
        PagedReleaseCommit(release_id=DIGEST, member_count=2, member_pages=(PAGES[0], PAGES[0]))
    with pytest.raises(ContractError):
        ReleaseMemberPage(members=[])
    with pytest.raises(ContractError):
        PagedReleaseCommit(release_id=DIGEST, member_count=0, member_pages=PAGES)
