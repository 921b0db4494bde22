"""Domain-separated identities: golden vectors and the invariants that make them safe to persist."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from dpone_dagster.contracts.canonical import CanonicalError
from dpone_dagster.contracts.identity import (
    IdentityError,
    canonical_model_bytes,
    digest,
    domain_prefix,
    require_digest,
)


class _Aliased(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    schema_: str = Field(alias="schema")
    value: int


# Golden vectors: these digests are persisted; a change here breaks every stored identity.
GOLDEN = [
    ("dpone.example.v1", {"a": 1}, "dpone:dpone.example.v1\x00" + '{"a":1}'),
    ("dpone.other.v1", {"a": 1}, "dpone:dpone.other.v1\x00" + '{"a":1}'),
    ("dpone.example.v1", [], "dpone:dpone.example.v1\x00[]"),
]


@pytest.mark.parametrize(("kind", "value", "preimage"), GOLDEN)
def test_digest_is_sha256_of_domain_prefix_and_canonical_bytes(kind: str, value: object, preimage: str) -> None:
    expected = "sha256:" + hashlib.sha256(preimage.encode()).hexdigest()
    assert digest(kind, value) == expected


def test_pinned_golden_digest_never_changes() -> None:
    # Pinned literal: if this fails, every persisted identity would change. Do not "fix" the vector.
    assert digest("dpone.example.v1", {"a": 1}) == (
        "sha256:f5d045fd8a6d4fcdb5b96383e91486fe606796925cc0f714a3536c174e0a428e"
    )


def test_model_bytes_and_dict_agree_and_use_aliases() -> None:
    model = _Aliased(schema="dpone.x.v1", value=3)
    assert canonical_model_bytes(model) == b'{"schema":"dpone.x.v1","value":3}'
    assert digest("dpone.x.v1", model) == digest("dpone.x.v1", {"schema": "dpone.x.v1", "value": 3})
    assert digest("dpone.x.v1", model) == digest("dpone.x.v1", b'{"schema":"dpone.x.v1","value":3}')


def test_bytes_must_already_be_canonical() -> None:
    with pytest.raises(CanonicalError) as caught:
        digest("dpone.x.v1", b'{"value":3, "schema":"dpone.x.v1"}')
    assert caught.value.code == "canonical.non_canonical"


@pytest.mark.parametrize("kind", ["", "Upper", "has space", "a\x00b", "trailing.", "x" * 200, 7])
def test_invalid_kind_is_refused(kind: object) -> None:
    with pytest.raises(IdentityError) as caught:
        domain_prefix(kind)  # type: ignore[arg-type]
    assert caught.value.code == "identity.invalid_kind"


def test_require_digest() -> None:
    good = digest("dpone.x.v1", [])
    assert require_digest(good) == good
    for bad in ["sha256:" + "A" * 64, "sha512:" + "a" * 64, good[:-1], good + "\n", None]:
        with pytest.raises(IdentityError) as caught:
            require_digest(bad)  # type: ignore[arg-type]
        assert caught.value.code == "identity.invalid_digest"


_kinds = st.from_regex(r"\A[a-z][a-z0-9]{0,6}(\.[a-z0-9]{1,6}){0,3}\Z")


@settings(max_examples=200, deadline=None)
@given(_kinds, _kinds, st.dictionaries(st.text(max_size=5), st.integers(-9, 9), max_size=4))
def test_same_bytes_never_share_a_digest_across_kinds(kind_a: str, kind_b: str, value: dict[str, int]) -> None:
    if kind_a == kind_b:
        assert digest(kind_a, value) == digest(kind_b, value)
    else:
        assert digest(kind_a, value) != digest(kind_b, value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=5), st.integers(-9, 9), max_size=4))
def test_digest_is_well_formed(value: dict[str, int]) -> None:
    require_digest(digest("dpone.x.v1", value))
