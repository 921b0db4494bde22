"""Property tests: no single-byte change to a signed grant survives; threshold counts distinct keys."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpone_dagster.authority.synthetic import SyntheticAuthority, synthetic_source
from dpone_dagster.authority.verification import verify_grant
from dpone_dagster.contracts.grant import DetachedSignature
from dpone_dagster.errors import DponeError

_AUTHORITY = SyntheticAuthority()
_GRANT_BYTES, _SIGNATURES = _AUTHORITY.signed()


def _verify_fresh(grant_bytes: bytes, signatures) -> None:
    authority = SyntheticAuthority()
    verify_grant(
        grant_bytes,
        signatures,
        pinned_policy_digest=authority.policy_digest,
        source=synthetic_source(),
        ports=authority.ports,
    )


def test_the_untampered_grant_verifies() -> None:
    _verify_fresh(_GRANT_BYTES, _SIGNATURES)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(_GRANT_BYTES) - 1), st.integers(0, 255))
def test_any_single_byte_change_to_the_grant_is_rejected(index: int, value: int) -> None:
    if _GRANT_BYTES[index] == value:
        value = (value + 1) % 256
    tampered = _GRANT_BYTES[:index] + bytes([value]) + _GRANT_BYTES[index + 1 :]
    with pytest.raises(DponeError):
        _verify_fresh(tampered, list(_SIGNATURES.signatures))


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 1), st.integers(0, 127), st.sampled_from("0123456789abcdef"))
def test_any_single_character_change_to_a_signature_is_rejected(which: int, index: int, char: str) -> None:
    signatures = list(_SIGNATURES.signatures)
    original = signatures[which].signature
    if original[index] == char:
        char = "0" if char != "0" else "1"
    signatures[which] = DetachedSignature(
        key_id=signatures[which].key_id, signature=original[:index] + char + original[index + 1 :]
    )
    with pytest.raises(DponeError) as caught:
        _verify_fresh(_GRANT_BYTES, signatures)
    assert caught.value.code == "authority.signature_invalid"


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_accepted_iff_distinct_signers_reach_the_threshold(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 4), label="n")
    k = data.draw(st.integers(1, n), label="k")
    authority = SyntheticAuthority(signer_count=n, threshold=k)
    grant_bytes = authority.grant().canonical_bytes()
    chosen = data.draw(st.lists(st.integers(0, n - 1), max_size=2 * n), label="signers (with repeats)")
    signatures = [authority.signers[i].sign_bytes(grant_bytes) for i in chosen]
    distinct = len(set(chosen))
    try:
        receipt = verify_grant(
            grant_bytes,
            signatures,
            pinned_policy_digest=authority.policy_digest,
            source=synthetic_source(),
            ports=authority.ports,
        )
    except DponeError as error:
        assert distinct < k and error.code == "authority.threshold_not_met"
    else:
        assert distinct >= k and len(receipt.signer_key_ids) == distinct
