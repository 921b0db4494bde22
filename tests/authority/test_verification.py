"""verify_policy / verify_grant: every refusal, threshold counting, rollback, effective limits."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from dpone_dagster.authority.errors import AuthorityError
from dpone_dagster.authority.memory import InMemoryPolicySource
from dpone_dagster.authority.ports import AcceptedSequence, AuthorityPorts
from dpone_dagster.authority.synthetic import (
    SYNTHETIC_EPOCH_START,
    SyntheticAuthority,
    SyntheticSigner,
    synthetic_limits,
    synthetic_policy,
    synthetic_source,
)
from dpone_dagster.authority.verification import verify_grant, verify_policy
from dpone_dagster.contracts.base import ContractError
from dpone_dagster.contracts.bounds import format_timestamp
from dpone_dagster.contracts.canonical import CanonicalError, dumps
from dpone_dagster.contracts.grant import DetachedSignature, DevelopmentGrant
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.policy import DeliveryLimits, repository_digest
from dpone_dagster.errors import DponeError


def _verify(authority: SyntheticAuthority, grant_bytes: bytes, signatures, **kwargs):
    kwargs.setdefault("source", synthetic_source())
    kwargs.setdefault("pinned_policy_digest", authority.policy_digest)
    kwargs.setdefault("ports", authority.ports)
    return verify_grant(grant_bytes, signatures, **kwargs)


def _refused(code: str, authority: SyntheticAuthority, grant_bytes: bytes, signatures, **kwargs) -> DponeError:
    with pytest.raises(DponeError) as caught:
        _verify(authority, grant_bytes, signatures, **kwargs)
    assert caught.value.code == code, caught.value
    return caught.value


def test_valid_grant_yields_a_complete_receipt(authority: SyntheticAuthority) -> None:
    grant = authority.grant()
    grant_bytes, signatures = authority.signed(grant)
    receipt = _verify(authority, grant_bytes, signatures)
    assert receipt.policy_digest == authority.policy_digest
    assert receipt.grant_digest == digest(DevelopmentGrant.KIND, grant_bytes) == grant.document_digest()
    assert receipt.signer_key_ids == tuple(sorted(s.key_id for s in authority.signers[:2]))
    assert receipt.environment == "synthetic-dev"
    assert receipt.source_commit == grant.source_commit
    assert receipt.native_membership == grant.native_membership
    assert receipt.execution_subjects == grant.execution_subjects
    assert receipt.verified_at == format_timestamp(authority.now)
    assert receipt.effective_limits.max_workloads == 10  # grant (10) < policy (100)
    assert receipt.trust_tier == "non_production" and receipt.authority_family == "development"
    assert authority.sequences.highest(authority.policy_digest, "synthetic-dev") == AcceptedSequence(
        1, receipt.grant_digest
    )


def test_threshold_k_minus_one_rejected_k_accepted(authority: SyntheticAuthority) -> None:
    grant_bytes, one = authority.signed(signers=1)
    _refused("authority.threshold_not_met", authority, grant_bytes, one)
    _, two = authority.signed(signers=2)
    assert _verify(authority, grant_bytes, two).signer_key_ids


def test_a_key_counted_twice_is_one(authority: SyntheticAuthority) -> None:
    grant_bytes, signatures = authority.signed(signers=1)
    doubled = list(signatures.signatures) * 2
    _refused("authority.threshold_not_met", authority, grant_bytes, doubled)
    # Ed25519 is deterministic; a second, different-looking signature by the same key must not count either.
    with_third = doubled + [authority.signers[0].sign_bytes(grant_bytes)]
    _refused("authority.threshold_not_met", authority, grant_bytes, with_third)


def test_one_key_listed_under_two_signer_entries_is_impossible() -> None:
    signer = SyntheticSigner("solo")
    with pytest.raises(ContractError):
        synthetic_policy([signer, signer], 2)


def test_unknown_signer_refused(authority: SyntheticAuthority) -> None:
    grant_bytes, signatures = authority.signed()
    stranger = SyntheticSigner("stranger").sign_bytes(grant_bytes)
    _refused("authority.unknown_signer", authority, grant_bytes, [*signatures.signatures, stranger])


def test_forged_signature_refused(authority: SyntheticAuthority) -> None:
    grant_bytes, signatures = authority.signed()
    first = signatures.signatures[0]
    flipped = ("0" if first.signature[0] != "0" else "1") + first.signature[1:]
    forged = DetachedSignature(key_id=first.key_id, signature=flipped)
    _refused("authority.signature_invalid", authority, grant_bytes, [forged, *signatures.signatures[1:]])


def test_signature_set_for_another_grant_refused(authority: SyntheticAuthority) -> None:
    grant_bytes, _ = authority.signed()
    other_bytes, other_signatures = authority.signed(authority.grant(sequence=2))
    _refused("authority.signature_invalid", authority, grant_bytes, other_signatures)


def test_signature_over_another_document_kind_does_not_verify(authority: SyntheticAuthority) -> None:
    grant_bytes = authority.grant().canonical_bytes()
    # A signature over the bare bytes (no domain prefix) must not be accepted.
    keys = [
        Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"dpone synthetic signer\x00" + s.label.encode()).digest())
        for s in authority.signers[:2]
    ]
    bare = [
        DetachedSignature(key_id=s.key_id, signature=k.sign(grant_bytes).hex()) for s, k in zip(authority.signers, keys)
    ]
    _refused("authority.signature_invalid", authority, grant_bytes, bare)


def test_policy_digest_mismatch(authority: SyntheticAuthority) -> None:
    other = synthetic_policy(authority.signers, 1, policy_id="synthetic-other")
    ports = AuthorityPorts(
        clock=authority.clock,
        policies=InMemoryPolicySource({authority.policy_digest: other.canonical_bytes()}),
        epochs=authority.epochs,
        sequences=authority.sequences,
        signatures=authority.ports.signatures,
    )
    grant_bytes, signatures = authority.signed()
    _refused("authority.policy_digest_mismatch", authority, grant_bytes, signatures, ports=ports)
    with pytest.raises(AuthorityError) as caught:
        verify_policy(other.canonical_bytes(), authority.policy_digest)
    assert caught.value.code == "authority.policy_digest_mismatch"


def test_verify_policy_accepts_exact_bytes_only(authority: SyntheticAuthority) -> None:
    data = authority.policy.canonical_bytes()
    assert verify_policy(data, authority.policy_digest) == authority.policy
    with pytest.raises(CanonicalError):
        verify_policy(data.replace(b",", b", ", 1), authority.policy_digest)


def test_grant_under_another_policy_refused(authority: SyntheticAuthority) -> None:
    grant = authority.grant(policy_digest=digest("dpone.development-policy.v1", {"other": True}))
    _refused("authority.grant_policy_mismatch", authority, *authority.signed(grant))


def test_environment_not_allowed(authority: SyntheticAuthority) -> None:
    _refused(
        "authority.environment_not_allowed", authority, *authority.signed(authority.grant(environment="synthetic-prod"))
    )


def test_window_too_long_against_policy_and_absolute_bound() -> None:
    short = SyntheticAuthority(policy_options={"max_grant_validity_seconds": 3600})
    _refused("authority.window_too_long", short, *short.signed())  # 24h grant, 1h policy

    authority = SyntheticAuthority()
    eight_days = authority.grant(expires_at=format_timestamp(SYNTHETIC_EPOCH_START + timedelta(days=7, seconds=1)))
    _refused("authority.window_too_long", authority, *authority.signed(eight_days))
    seven_days = authority.grant(expires_at=format_timestamp(SYNTHETIC_EPOCH_START + timedelta(days=7)))
    assert _verify(authority, *authority.signed(seven_days))


def test_clock_window_boundaries() -> None:
    def at(moment: datetime) -> SyntheticAuthority:
        return SyntheticAuthority(now=moment)

    start, end = SYNTHETIC_EPOCH_START, SYNTHETIC_EPOCH_START + timedelta(days=1)
    early = at(start - timedelta(seconds=1))
    _refused("authority.not_yet_valid", early, *early.signed())
    assert _verify(at(start), *at(start).signed())
    last = at(end - timedelta(seconds=1))
    assert _verify(last, *last.signed())
    expired = at(end)
    _refused("authority.expired", expired, *expired.signed())


def test_revoked_and_future_epochs(authority: SyntheticAuthority) -> None:
    grant_bytes, signatures = authority.signed()
    authority.epochs.revoke()
    _refused("authority.revoked", authority, grant_bytes, signatures)
    current = authority.grant(revocation_epoch=1, sequence=2)
    assert _verify(authority, *authority.signed(current))
    ahead = authority.grant(revocation_epoch=2, sequence=3)
    _refused("authority.epoch_mismatch", authority, *authority.signed(ahead))


def test_rollback_protection_and_identical_retry(authority: SyntheticAuthority) -> None:
    newer = authority.signed(authority.grant(sequence=5))
    assert _verify(authority, *newer)
    assert _verify(authority, *newer), "an identical retry re-verifies"
    _refused("authority.rollback", authority, *authority.signed(authority.grant(sequence=4)))
    conflicting = authority.grant(sequence=5, max_workloads=9)
    _refused("authority.sequence_conflict", authority, *authority.signed(conflicting))
    assert _verify(authority, *authority.signed(authority.grant(sequence=6)))


def test_sequence_is_scoped_per_environment() -> None:
    authority = SyntheticAuthority(policy_options={"environments": ("synthetic-a", "synthetic-b")})
    assert _verify(authority, *authority.signed(authority.grant(environment="synthetic-a", sequence=9)))
    assert _verify(authority, *authority.signed(authority.grant(environment="synthetic-b", sequence=1)))


def test_a_refused_grant_never_advances_the_sequence(authority: SyntheticAuthority) -> None:
    over_budget = authority.grant(sequence=50, max_source_bytes=1)
    _refused("authority.budget_exceeded", authority, *authority.signed(over_budget))
    assert authority.sequences.highest(authority.policy_digest, "synthetic-dev") is None
    assert _verify(authority, *authority.signed(authority.grant(sequence=2)))


def test_concurrent_newer_acceptance_is_a_rollback(authority: SyntheticAuthority) -> None:
    class RacingStore:
        def __init__(self) -> None:
            self.calls = 0

        def highest(self, policy_digest, environment):
            self.calls += 1
            return None if self.calls == 1 else AcceptedSequence(99, digest("dpone.x.v1", []))

        def accept(self, policy_digest, environment, accepted):
            return False

        def raise_epoch(self, policy_digest, environment, epoch):
            return epoch

    ports = AuthorityPorts(
        authority.clock, authority.ports.policies, authority.epochs, RacingStore(), authority.ports.signatures
    )
    _refused("authority.rollback", authority, *authority.signed(), ports=ports)


@pytest.mark.parametrize(
    "source_override",
    [
        {"commit": "f" * 40},
        {"repository": "example.invalid/synthetic/other"},
    ],
)
def test_source_mismatch(authority: SyntheticAuthority, source_override: dict) -> None:
    _refused("authority.source_mismatch", authority, *authority.signed(), source=synthetic_source(**source_override))


def test_grant_for_another_repository_refused(authority: SyntheticAuthority) -> None:
    grant = authority.grant(source_repository_digest=repository_digest("example.invalid/synthetic/other"))
    _refused("authority.source_mismatch", authority, *authority.signed(grant))


@pytest.mark.parametrize(
    "source_override",
    [
        {"native_membership": ["model.synthetic_shop.customers"]},
        {"ordinary_membership": ["synthetic_transfer", "synthetic_transfer_extra"]},
        {"native_membership": [], "ordinary_membership": ["synthetic_transfer"]},
    ],
)
def test_membership_mismatch(authority: SyntheticAuthority, source_override: dict) -> None:
    _refused(
        "authority.membership_mismatch", authority, *authority.signed(), source=synthetic_source(**source_override)
    )


@pytest.mark.parametrize(
    ("grant_override", "source_override", "declared"),
    [
        ({"max_workloads": 2}, {}, None),  # 3 workloads vs grant 2
        ({"max_source_bytes": 100}, {}, None),  # 120 000 bytes vs grant 100
        ({}, {"peak_cpu_millicores": 2_001}, None),  # policy cpu 2 000
        ({}, {"peak_memory_bytes": 4 * 2**30 + 1}, None),  # policy memory
        ({}, {}, synthetic_limits(max_source_bytes=119_999)),  # declared workload limit is tightest
    ],
)
def test_budget_exceeded(authority: SyntheticAuthority, grant_override, source_override, declared) -> None:
    _refused(
        "authority.budget_exceeded",
        authority,
        *authority.signed(authority.grant(**grant_override)),
        source=synthetic_source(**source_override),
        declared_limits=declared,
    )


def test_effective_limits_are_the_fieldwise_minimum(authority: SyntheticAuthority) -> None:
    declared = DeliveryLimits(
        max_workloads=50, max_source_bytes=9_000_000, max_cpu_millicores=1_500, max_memory_bytes=8 * 2**30
    )
    receipt = _verify(authority, *authority.signed(), declared_limits=declared)
    assert receipt.effective_limits == DeliveryLimits(
        max_workloads=10,  # grant
        max_source_bytes=9_000_000,  # declared
        max_cpu_millicores=1_500,  # declared
        max_memory_bytes=4 * 2**30,  # policy
    )


def _ports_with(authority: SyntheticAuthority, **replace) -> AuthorityPorts:
    values = dict(
        clock=authority.clock,
        policies=authority.ports.policies,
        epochs=authority.epochs,
        sequences=authority.sequences,
        signatures=authority.ports.signatures,
    )
    values.update(replace)
    return AuthorityPorts(**values)


class _Broken:
    def __getattr__(self, name):
        def fail(*args, **kwargs):
            raise OSError("/private/root/secret.sqlite: connection refused for user=admin password=hunter2")

        return fail


@pytest.mark.parametrize("port", ["clock", "policies", "epochs", "sequences", "signatures"])
def test_failing_ports_fail_closed_without_leaking(authority: SyntheticAuthority, port: str) -> None:
    error = _refused(
        "authority.unavailable", authority, *authority.signed(), ports=_ports_with(authority, **{port: _Broken()})
    )
    assert "private" not in str(error) and "hunter2" not in str(error)
    assert error.__cause__ is None


def test_naive_clock_and_bad_epoch_are_unavailable(authority: SyntheticAuthority) -> None:
    class NaiveClock:
        def now(self):
            return datetime(2026, 1, 5, 10, 0, 0)

    class NegativeEpochs:
        def current_epoch(self, policy_digest, environment):
            return -1

    _refused("authority.unavailable", authority, *authority.signed(), ports=_ports_with(authority, clock=NaiveClock()))
    _refused(
        "authority.unavailable", authority, *authority.signed(), ports=_ports_with(authority, epochs=NegativeEpochs())
    )


def test_unknown_policy_digest_is_unavailable(authority: SyntheticAuthority) -> None:
    _refused(
        "authority.unavailable",
        authority,
        *authority.signed(),
        pinned_policy_digest=digest("dpone.development-policy.v1", {"missing": 1}),
    )


def _resign(authority: SyntheticAuthority, grant_bytes: bytes) -> list[DetachedSignature]:
    return [signer.sign_bytes(grant_bytes) for signer in authority.signers[:2]]


def test_signed_grant_with_unknown_field_refused(authority: SyntheticAuthority) -> None:
    body = authority.grant().model_dump(mode="json", by_alias=True)
    body["execute_now"] = True
    grant_bytes = dumps(body)
    _refused("contract.unknown_field", authority, grant_bytes, _resign(authority, grant_bytes))


def test_signed_grant_with_duplicate_key_refused(authority: SyntheticAuthority) -> None:
    grant_bytes = authority.grant().canonical_bytes()
    duplicated = grant_bytes.replace(b'{"environment"', b'{"environment":"synthetic-x","environment"', 1)
    assert duplicated != grant_bytes
    _refused("canonical.duplicate_key", authority, duplicated, _resign(authority, duplicated))


def test_signed_non_canonical_grant_refused(authority: SyntheticAuthority) -> None:
    spaced = authority.grant().canonical_bytes().replace(b",", b", ", 1)
    _refused("canonical.non_canonical", authority, spaced, _resign(authority, spaced))


def test_receipt_is_deterministic_and_secret_free(authority: SyntheticAuthority) -> None:
    first = _verify(authority, *authority.signed())
    second = _verify(authority, *authority.signed())
    assert first.canonical_bytes() == second.canonical_bytes()
    assert b"private" not in first.canonical_bytes()
