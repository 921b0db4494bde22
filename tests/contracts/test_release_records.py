"""Release-cache and registry records: closed, strict, and deliberately outside the dispatch table."""

from __future__ import annotations

import json

import pytest

from dpone_dagster.contracts.base import ContractError, parse_document
from dpone_dagster.contracts.canonical import dumps
from dpone_dagster.contracts.dispatch import DispatchError, read_document
from dpone_dagster.contracts.release_records import CurrentPointer, MemberDigest, ReleaseCommit

DIGEST = "sha256:" + "a" * 64


def _commit() -> ReleaseCommit:
    return ReleaseCommit(
        release_id=DIGEST, members=[MemberDigest(path="release.json", content_sha256="b" * 64, size=10)]
    )


def test_a_record_round_trips_through_its_own_model() -> None:
    commit = _commit()
    assert parse_document(ReleaseCommit, commit.canonical_bytes()) == commit


def test_a_record_refuses_unknown_fields_and_prefixed_content_hashes() -> None:
    value = json.loads(_commit().canonical_bytes())
    value["note"] = "x"
    with pytest.raises(ContractError) as unknown:
        parse_document(ReleaseCommit, dumps(value))
    assert unknown.value.code == "contract.unknown_field"
    with pytest.raises(ContractError) as prefixed:
        MemberDigest(path="release.json", content_sha256=DIGEST, size=1)
    assert prefixed.value.code == "contract.invalid"


def test_records_are_not_dispatchable_documents() -> None:
    pointer = CurrentPointer(
        release_id=DIGEST, deployment_id="synthetic-dev:" + "a" * 64, previous_release_id=None, audit_sequence=1
    )
    for record in (_commit(), pointer):
        with pytest.raises(DispatchError) as refused:
            read_document(record.canonical_bytes())
        assert refused.value.code == "dispatch.unknown_document"
