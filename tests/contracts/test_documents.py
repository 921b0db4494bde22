"""Golden vectors per family, closed dispatch, and production readers refusing development documents."""

from __future__ import annotations

import json

import pytest

from dpone_dagster.contracts.base import ContractError
from dpone_dagster.contracts.canonical import dumps, loads
from dpone_dagster.contracts.dispatch import (
    DOCUMENT_TYPES,
    DispatchError,
    family_of,
    read_development_document,
    read_document,
    read_production_document,
)
from dpone_dagster.contracts.identity import digest
from dpone_dagster.errors import DponeError

from .document_examples import VECTORS, examples

EXAMPLES = examples()
GOLDEN_DIGESTS = json.loads((VECTORS / "digests.json").read_text())


def _stem(schema: str, profile: str | None) -> str:
    return schema if profile is None else f"{schema}.{profile}"


STEMS = sorted(_stem(*key) for key in DOCUMENT_TYPES)
FAMILY = {_stem(*key): entry.family for key, entry in DOCUMENT_TYPES.items()}
DEVELOPMENT = [stem for stem in STEMS if FAMILY[stem] == "development"]
NOT_PRODUCTION = [stem for stem in STEMS if FAMILY[stem] != "production"]
PRODUCTION = [stem for stem in STEMS if FAMILY[stem] == "production"]


def _vector(stem: str) -> bytes:
    return (VECTORS / f"{stem}.json").read_bytes()


def test_every_dispatchable_type_has_a_golden_vector_and_an_example() -> None:
    assert sorted(EXAMPLES) == STEMS
    assert sorted(GOLDEN_DIGESTS) == STEMS
    assert {"production", "synthetic", "development"} == set(FAMILY.values())


@pytest.mark.parametrize("stem", STEMS)
def test_golden_bytes_and_digest_are_stable(stem: str) -> None:
    data = _vector(stem)
    assert EXAMPLES[stem].canonical_bytes() == data
    kind = EXAMPLES[stem].identity_kind()
    assert digest(kind, data) == GOLDEN_DIGESTS[stem] == EXAMPLES[stem].document_digest()


@pytest.mark.parametrize("stem", STEMS)
def test_read_document_round_trips_and_classifies(stem: str) -> None:
    document = read_document(_vector(stem))
    assert document == EXAMPLES[stem]
    assert family_of(document) == FAMILY[stem]


@pytest.mark.parametrize("stem", PRODUCTION)
def test_production_reader_reads_production(stem: str) -> None:
    assert read_production_document(_vector(stem)) == EXAMPLES[stem]
    with pytest.raises(DispatchError) as caught:
        read_development_document(_vector(stem))
    assert caught.value.code == "dispatch.family_refused"


@pytest.mark.parametrize("stem", NOT_PRODUCTION)
def test_production_reader_refuses_every_non_production_document(stem: str) -> None:
    with pytest.raises(DispatchError) as caught:
        read_production_document(_vector(stem))
    assert caught.value.code == "dispatch.family_refused"


@pytest.mark.parametrize("stem", DEVELOPMENT)
@pytest.mark.parametrize(
    "relabel",
    [
        {"trust_tier": "production"},
        {"purpose": "production_release"},
        {"schema": "dpone.release-set.v3", "profile": "production_workspace_composition_v1"},
        {"schema": "dpone.release-set.v2"},
        {"profile": "production_plain_transfer_composition_v1"},
    ],
)
def test_relabelled_development_documents_never_read_as_production(stem: str, relabel: dict) -> None:
    value = loads(_vector(stem))
    value.update(relabel)
    with pytest.raises(DponeError):
        read_production_document(dumps(value))


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ({"schema": "dpone.release-set.v9"}, "dispatch.unknown_document"),
        ({"schema": "dpone.release-set.v3"}, "dispatch.unknown_document"),
        (
            {"schema": "dpone.release-set.v3", "profile": "development_workspace_delivery_v2"},
            "dispatch.unknown_document",
        ),
        (
            {"schema": "dpone.release-set.v2", "profile": "development_workspace_delivery_v1"},
            "dispatch.unknown_document",
        ),
        ({"no_schema": True}, "dispatch.unknown_document"),
        ([], "dispatch.unknown_document"),
    ],
)
def test_unknown_documents_fail(value: object, code: str) -> None:
    with pytest.raises(DispatchError) as caught:
        read_document(dumps(value))
    assert caught.value.code == code


@pytest.mark.parametrize("stem", STEMS)
def test_unknown_fields_are_refused_in_every_family(stem: str) -> None:
    value = loads(_vector(stem))
    value["zz_extra"] = 1
    with pytest.raises(ContractError) as caught:
        read_document(dumps(value))
    assert caught.value.code == "contract.unknown_field"


@pytest.mark.parametrize("stem", STEMS)
def test_omitting_a_member_is_refused(stem: str) -> None:
    value = loads(_vector(stem))
    removable = sorted(key for key in value if key not in ("schema", "profile"))
    del value[removable[0]]
    with pytest.raises(DponeError):
        read_document(dumps(value))


@pytest.mark.parametrize(
    "stem", ["dpone.dbt-release-set.development.v1", "dpone.release-set.v3.development_workspace_delivery_v1"]
)
@pytest.mark.parametrize("status", ["executed", "passed", "succeeded", None])
def test_development_delivery_status_can_never_claim_execution(stem: str, status: object) -> None:
    value = loads(_vector(stem))
    value["delivery_status"] = status
    with pytest.raises(ContractError) as caught:
        read_document(dumps(value))
    assert caught.value.code == "contract.invalid"


def test_development_documents_carry_no_route_certifications() -> None:
    value = loads(_vector("dpone.release-set.v3.development_workspace_delivery_v1"))
    value["route_certifications"] = [
        {"route_id": "r", "evidence_digest": digest("dpone.x.v1", []), "certified_at": "2026-01-01T00:00:00Z"}
    ]
    with pytest.raises(ContractError):
        read_document(dumps(value))
    native = loads(_vector("dpone.dbt-release-set.development.v1"))
    native["projects"][0]["route_certifications"] = ["certified"]
    with pytest.raises(ContractError):
        read_document(dumps(native))


def test_parent_integrity_subject_is_checked() -> None:
    value = loads(_vector("dpone.release-set.v3.development_workspace_delivery_v1"))
    value["source_sidecars"][0]["size"] += 1
    with pytest.raises(ContractError) as caught:
        read_document(dumps(value))
    assert "integrity_subject" in caught.value.message


def test_v3_identity_domain_includes_the_profile() -> None:
    kinds = {EXAMPLES[stem].identity_kind() for stem in STEMS if stem.startswith("dpone.release-set.v3.")}
    assert kinds == {stem for stem in STEMS if stem.startswith("dpone.release-set.v3.")}


def test_non_canonical_vector_spelling_is_refused() -> None:
    data = _vector("dpone.development-authority.v1")
    with pytest.raises(DponeError) as caught:
        read_document(data + b"\n")
    assert caught.value.code == "canonical.non_canonical"
