"""Issue 20 item 5: a policy may not list a small-order or non-canonical Ed25519 key.

With the identity point as a public key, the signature (R = identity, S = 0) verifies over every
message in `cryptography`; a policy listing it next to two real keys would let that one forgery
count toward a 2-of-3 threshold. The keys are checked on their bytes (`contracts.ed25519_keys`).
"""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from dpone_dagster.authority.ed25519 import Ed25519SignatureVerifier
from dpone_dagster.authority.memory import InMemoryPolicySource
from dpone_dagster.authority.ports import AuthorityPorts
from dpone_dagster.authority.synthetic import SyntheticAuthority, synthetic_source
from dpone_dagster.authority.verification import verify_grant
from dpone_dagster.contracts.canonical import dumps, loads
from dpone_dagster.contracts.ed25519_keys import key_defect
from dpone_dagster.contracts.grant import DetachedSignature, GrantSignatures, signing_payload
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.policy import DevelopmentPolicy, signer_key_id
from dpone_dagster.errors import DponeError

# The eight points of order 1, 2, 4 and 8 on edwards25519, canonically encoded.
SMALL_ORDER = (
    "0100000000000000000000000000000000000000000000000000000000000000",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "0000000000000000000000000000000000000000000000000000000000000080",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
)
NON_CANONICAL = (
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # y = p (not reduced)
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # y = p + 1, the identity spelt again
    "0100000000000000000000000000000000000000000000000000000000000080",  # x = 0 with the sign bit set
)
IDENTITY = SMALL_ORDER[0]
UNIVERSAL_FORGERY = bytes.fromhex(IDENTITY) + bytes(32)  # R = identity, S = 0


def _with_key(policy: DevelopmentPolicy, public_key_hex: str) -> bytes:
    """The policy's canonical bytes with one more signer, written by hand (the model refuses to)."""
    value = loads(policy.canonical_bytes())
    value["signers"] = sorted(
        [
            *value["signers"],
            {"algorithm": "ed25519", "key_id": signer_key_id(public_key_hex), "public_key": public_key_hex},
        ],
        key=lambda signer: signer["key_id"],
    )
    return dumps(value)


def test_cryptography_accepts_the_universal_forgery_so_bytes_are_checked_by_hand() -> None:
    for message in (b"one grant", b"any other grant"):
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(IDENTITY)).verify(UNIVERSAL_FORGERY, message)


@pytest.mark.parametrize("public_key", SMALL_ORDER)
def test_every_small_order_point_is_recognized(public_key: str) -> None:
    assert key_defect(bytes.fromhex(public_key)) == "small_order"


@pytest.mark.parametrize("public_key", NON_CANONICAL)
def test_non_canonical_encodings_are_recognized(public_key: str) -> None:
    assert key_defect(bytes.fromhex(public_key)) == "non_canonical"


def test_real_keys_pass(authority: SyntheticAuthority) -> None:
    assert all(key_defect(bytes.fromhex(signer.public_key_hex)) is None for signer in authority.signers)


@pytest.mark.parametrize(
    ("public_key", "code"),
    [(key, "policy.signer_key_small_order") for key in SMALL_ORDER]
    + [(key, "policy.signer_key_non_canonical") for key in NON_CANONICAL],
)
def test_a_policy_listing_a_weak_key_is_refused_before_any_signature_counts(authority, public_key, code) -> None:
    """2 real keys + the weak one, threshold 2: one real signature plus the forgery must not verify."""
    authority = SyntheticAuthority(signer_count=2, threshold=2)
    policy_bytes = _with_key(authority.policy, public_key)
    policy_digest = digest(DevelopmentPolicy.KIND, policy_bytes)
    grant_bytes = authority.grant(policy_digest=policy_digest).canonical_bytes()
    signatures = sorted(
        [
            authority.signers[0].sign_bytes(grant_bytes),
            DetachedSignature(key_id=signer_key_id(public_key), signature=UNIVERSAL_FORGERY.hex()),
        ],
        key=DetachedSignature.sort_key,
    )
    ports = AuthorityPorts(
        authority.clock,
        InMemoryPolicySource({policy_digest: policy_bytes}),
        authority.epochs,
        authority.sequences,
        authority.ports.signatures,
    )
    with pytest.raises(DponeError) as raised:
        verify_grant(
            grant_bytes,
            GrantSignatures(grant_digest=digest("dpone.development-authority.v1", grant_bytes), signatures=signatures),
            pinned_policy_digest=policy_digest,
            source=synthetic_source(),
            ports=ports,
        )
    assert raised.value.code == code
    assert authority.sequences.highest(policy_digest, "synthetic-dev") is None


def test_the_signature_adapter_refuses_a_small_order_key_on_its_own() -> None:
    assert not Ed25519SignatureVerifier().verify(bytes.fromhex(IDENTITY), UNIVERSAL_FORGERY, signing_payload(b"{}"))
