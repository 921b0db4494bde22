"""Target admission: receipts are bound, not interchangeable, re-checked live, and fail closed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dpone_dagster.authority.memory import ControllableCurrentTarget, FixedClock
from dpone_dagster.authority.synthetic import SyntheticAuthority, synthetic_source
from dpone_dagster.authority.target_admission import (
    ActivationAuthorityError,
    ReceiptIssuer,
    RecoveryRequiredError,
)
from dpone_dagster.authority.verification import verify_grant
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.receipts import (
    ActivationReceipt,
    DevelopmentAuthorityReceipt,
    MaterializationReceipt,
    PublicationReceipt,
)
from dpone_dagster.contracts.target import DeploymentProjection, TargetConfiguration
from dpone_dagster.errors import DponeError

RELEASE_ID = digest("dpone.release-set.v3.development_workspace_delivery_v1", {"synthetic": "release"})
DEPLOYMENT_ID = "synthetic-deployment-0001"


@pytest.fixture
def verified(authority: SyntheticAuthority) -> DevelopmentAuthorityReceipt:
    grant_bytes, signatures = authority.signed()
    return verify_grant(
        grant_bytes,
        signatures,
        pinned_policy_digest=authority.policy_digest,
        source=synthetic_source(),
        ports=authority.ports,
    )


@pytest.fixture
def live(authority: SyntheticAuthority) -> ControllableCurrentTarget:
    return ControllableCurrentTarget(authority.policy_digest)


@pytest.fixture
def issuer(authority: SyntheticAuthority, live: ControllableCurrentTarget) -> ReceiptIssuer:
    target = TargetConfiguration(
        environment="synthetic-dev", trust_tier="non_production", policy_digest=authority.policy_digest
    )
    return ReceiptIssuer(target, live, authority.clock, epoch_marks=authority.sequences)


def _projection(verified: DevelopmentAuthorityReceipt, **overrides) -> DeploymentProjection:
    values = dict(
        release_id=RELEASE_ID,
        deployment_id=DEPLOYMENT_ID,
        environment="synthetic-dev",
        trust_tier="non_production",
        grant_digest=verified.grant_digest,
    )
    values.update(overrides)
    return DeploymentProjection(**values)


@pytest.fixture
def require(verified):
    """`issuer.require_current` for this test's release, deployment and authority (each overridable)."""

    def run(issuer: ReceiptIssuer, receipt, kind, **kwargs):
        kwargs.setdefault("release_id", RELEASE_ID)
        kwargs.setdefault("deployment_id", DEPLOYMENT_ID)
        kwargs.setdefault("authority", verified)
        return issuer.require_current(receipt, kind, **kwargs)

    return run


def _code(call) -> DponeError:
    with pytest.raises(DponeError) as caught:
        call()
    return caught.value


def test_issued_receipts_bind_everything(issuer, verified, authority, require) -> None:
    receipt = issuer.issue_publication(verified, _projection(verified))
    assert receipt.release_id == RELEASE_ID and receipt.deployment_id == DEPLOYMENT_ID
    assert receipt.target_environment == "synthetic-dev" and receipt.trust_tier == "non_production"
    assert receipt.target_policy_digest == authority.policy_digest
    assert receipt.grant_digest == verified.grant_digest
    assert receipt.revocation_epoch == 0
    assert receipt.verified_at == "2026-01-05T10:00:00Z"
    assert receipt.expires_at == "2026-01-05T11:00:00Z"  # one-hour lifetime, before the grant's expiry
    assert require(issuer, receipt, PublicationReceipt) is receipt


def test_receipt_expiry_never_outlives_the_grant(authority, verified, live) -> None:
    target = TargetConfiguration(
        environment="synthetic-dev", trust_tier="non_production", policy_digest=authority.policy_digest
    )
    late = ReceiptIssuer(target, live, FixedClock(authority.now + timedelta(hours=22, minutes=30)))
    receipt = late.issue_materialization(verified, _projection(verified))
    assert receipt.expires_at == verified.expires_at


def test_the_three_kinds_are_not_interchangeable(issuer, verified, require) -> None:
    projection = _projection(verified)
    receipts = {
        PublicationReceipt: issuer.issue_publication(verified, projection),
        MaterializationReceipt: issuer.issue_materialization(verified, projection),
        ActivationReceipt: issuer.issue_activation(verified, projection, purpose="activate"),
    }
    for held_kind, receipt in receipts.items():
        for required_kind in receipts:
            if held_kind is required_kind:
                assert require(issuer, receipt, required_kind) is receipt
            else:
                error = _code(lambda: require(issuer, receipt, required_kind))
                assert error.code == "admission.receipt_kind_mismatch"
    digests = {receipt.document_digest() for receipt in receipts.values()}
    assert len(digests) == 3


def test_activation_purpose_is_bound(issuer, verified, require) -> None:
    repair = issuer.issue_activation(verified, _projection(verified), purpose="audit_repair")
    assert require(issuer, repair, ActivationReceipt, purpose="audit_repair")
    error = _code(lambda: require(issuer, repair, ActivationReceipt, purpose="pointer_recovery"))
    assert error.code == "admission.binding_mismatch"


def test_missing_and_unknown_receipts(issuer, verified, require) -> None:
    assert _code(lambda: require(issuer, None, PublicationReceipt)).code == "admission.receipt_missing"
    assert _code(lambda: require(issuer, verified, PublicationReceipt)).code == "admission.receipt_unknown"
    receipt = issuer.issue_publication(verified, _projection(verified))
    assert _code(lambda: require(issuer, receipt, DevelopmentAuthorityReceipt)).code == "admission.receipt_unknown"


@pytest.mark.parametrize("field", ["release_id", "deployment_id"])
def test_receipt_for_another_release_or_deployment_refused(issuer, verified, field, require) -> None:
    receipt = issuer.issue_publication(verified, _projection(verified))
    other = {"release_id": digest("dpone.x.v1", ["other"]), "deployment_id": "synthetic-deployment-0002"}[field]
    assert (
        _code(lambda: require(issuer, receipt, PublicationReceipt, **{field: other})).code
        == "admission.binding_mismatch"
    )


@pytest.mark.parametrize(
    "projection_override",
    [{"environment": "synthetic-other"}, {"grant_digest": digest("dpone.development-authority.v1", {"x": 1})}],
)
def test_issue_refuses_mismatched_projection(issuer, verified, projection_override) -> None:
    error = _code(lambda: issuer.issue_publication(verified, _projection(verified, **projection_override)))
    assert error.code == "admission.binding_mismatch"


def test_production_tier_refused_from_configuration_or_projection(authority, verified, live, require) -> None:
    production = TargetConfiguration(
        environment="synthetic-dev", trust_tier="production", policy_digest=authority.policy_digest
    )
    error = _code(
        lambda: ReceiptIssuer(production, live, authority.clock).issue_publication(verified, _projection(verified))
    )
    assert error.code == "admission.production_tier"
    nonprod = TargetConfiguration(
        environment="synthetic-dev", trust_tier="non_production", policy_digest=authority.policy_digest
    )
    issuer = ReceiptIssuer(nonprod, live, authority.clock)
    error = _code(lambda: issuer.issue_publication(verified, _projection(verified, trust_tier="production")))
    assert error.code == "admission.production_tier"
    receipt = issuer.issue_publication(verified, _projection(verified))
    relabelled = ReceiptIssuer(production, live, authority.clock)
    assert _code(lambda: require(relabelled, receipt, PublicationReceipt)).code == "admission.production_tier"


def test_authority_under_another_policy_refused(authority, verified, live) -> None:
    other = digest("dpone.development-policy.v1", {"other": 1})
    target = TargetConfiguration(environment="synthetic-dev", trust_tier="non_production", policy_digest=other)
    issuer = ReceiptIssuer(target, ControllableCurrentTarget(other), authority.clock)
    assert _code(lambda: issuer.issue_publication(verified, _projection(verified))).code == "admission.policy_mismatch"


def test_reuse_after_protected_policy_repin_refused(authority, verified, live, issuer, require) -> None:
    receipt = issuer.issue_publication(verified, _projection(verified))
    repinned_digest = digest("dpone.development-policy.v1", {"next": 1})
    repinned = ReceiptIssuer(
        TargetConfiguration(environment="synthetic-dev", trust_tier="non_production", policy_digest=repinned_digest),
        ControllableCurrentTarget(repinned_digest),
        authority.clock,
    )
    assert _code(lambda: require(repinned, receipt, PublicationReceipt)).code == "admission.policy_mismatch"


def test_reuse_after_live_policy_change_refused(issuer, verified, live, require) -> None:
    receipt = issuer.issue_publication(verified, _projection(verified))
    live.policy_digest = digest("dpone.development-policy.v1", {"changed": 1})
    error = _code(lambda: require(issuer, receipt, PublicationReceipt))
    assert error.code == "authority.activation_authority" and error.reason == "policy_changed"


def test_reuse_after_epoch_change_refused(issuer, verified, live, require) -> None:
    receipt = issuer.issue_materialization(verified, _projection(verified))
    live.revocation_epoch = 1
    error = _code(lambda: require(issuer, receipt, MaterializationReceipt))
    assert error.code == "authority.activation_authority" and error.reason == "epoch_changed"
    assert (
        _code(lambda: issuer.issue_materialization(verified, _projection(verified))).code
        == "authority.activation_authority"
    )


def test_verifier_failure_is_one_sanitized_error(issuer, verified, live, require) -> None:
    receipt = issuer.issue_activation(verified, _projection(verified), purpose="pointer_recovery")
    live.broken = True
    error = _code(lambda: require(issuer, receipt, ActivationReceipt))
    assert isinstance(error, ActivationAuthorityError) and error.reason == "verifier_failed"
    assert "secret" not in str(error) and "10.0.0.1" not in str(error)


def test_verifier_with_a_wrong_answer_type_fails_closed(authority, verified) -> None:
    class Sloppy:
        def current(self, target):
            return {"policy_digest": authority.policy_digest, "revocation_epoch": 0}

    target = TargetConfiguration(
        environment="synthetic-dev", trust_tier="non_production", policy_digest=authority.policy_digest
    )
    error = _code(
        lambda: ReceiptIssuer(target, Sloppy(), authority.clock).issue_publication(verified, _projection(verified))
    )
    assert error.code == "authority.activation_authority"


def test_the_verifier_is_consulted_before_every_operation(issuer, verified, live, require) -> None:
    receipt = issuer.issue_publication(verified, _projection(verified))
    before = live.calls
    for _ in range(3):
        require(issuer, receipt, PublicationReceipt)
    assert live.calls == before + 3


def test_expired_receipt_and_expired_grant(authority, verified, live, require) -> None:
    target = TargetConfiguration(
        environment="synthetic-dev", trust_tier="non_production", policy_digest=authority.policy_digest
    )
    clock = FixedClock(authority.now)
    issuer = ReceiptIssuer(target, live, clock)
    receipt = issuer.issue_publication(verified, _projection(verified))
    clock.moment = authority.now + timedelta(hours=1)
    assert _code(lambda: require(issuer, receipt, PublicationReceipt)).code == "admission.expired"
    clock.moment = authority.now + timedelta(days=2)
    assert _code(lambda: issuer.issue_publication(verified, _projection(verified))).code == "admission.expired"
    clock.moment = authority.now - timedelta(days=1)
    assert _code(lambda: issuer.issue_publication(verified, _projection(verified))).code == "admission.not_yet_valid"


def test_broken_clock_is_activation_authority(authority, verified, live) -> None:
    class BrokenClock:
        def now(self):
            raise OSError("clock device")

    target = TargetConfiguration(
        environment="synthetic-dev", trust_tier="non_production", policy_digest=authority.policy_digest
    )
    error = _code(lambda: ReceiptIssuer(target, live, BrokenClock()).issue_publication(verified, _projection(verified)))
    assert error.code == "authority.activation_authority"


def test_failure_after_preparation_requires_recovery(issuer, verified, live, require) -> None:
    receipt = issuer.issue_activation(verified, _projection(verified), purpose="activate")
    assert require(issuer, receipt, ActivationReceipt, after_preparation=True) is receipt
    live.revocation_epoch = 7
    error = _code(lambda: require(issuer, receipt, ActivationReceipt, after_preparation=True))
    assert isinstance(error, RecoveryRequiredError)
    assert error.code == "authority.recovery_required" and error.cause_code == "authority.activation_authority"
    error = _code(lambda: require(issuer, receipt, PublicationReceipt, after_preparation=True))
    assert error.code == "authority.recovery_required" and error.cause_code == "admission.receipt_kind_mismatch"


def test_receipt_round_trips_through_canonical_bytes(issuer, verified) -> None:
    from dpone_dagster.contracts.dispatch import read_document

    receipt = issuer.issue_activation(verified, _projection(verified), purpose="audit_repair")
    assert read_document(receipt.canonical_bytes()) == receipt


def test_an_authority_receipt_is_not_used_before_it_was_verified(authority, verified, live) -> None:
    """Inside the grant's window, but before the grant was verified: the clock went back."""
    target = TargetConfiguration(
        environment="synthetic-dev", trust_tier="non_production", policy_digest=authority.policy_digest
    )
    early = ReceiptIssuer(target, live, FixedClock(authority.now - timedelta(minutes=10)))
    assert (
        _code(lambda: early.issue_publication(verified, _projection(verified))).code
        == "admission.used_before_verification"
    )


def test_a_deployment_record_is_accepted_only_as_the_record_of_this_release(issuer, verified, require) -> None:
    from dpone_dagster.contracts.release_records import DeploymentRecord, DeploymentRecordV1, MemberDigest

    receipt = issuer.issue_activation(verified, _projection(verified), purpose="activate")
    fields = dict(
        release_id=RELEASE_ID,
        deployment_id=DEPLOYMENT_ID,
        environment="synthetic-dev",
        trust_tier="non_production",
        grant_digest=verified.grant_digest,
        authority_expires_at=verified.expires_at,
        revocation_epoch=0,
        installed_at=verified.verified_at,
        members=[MemberDigest(path="release.json", content_sha256="0" * 64, size=1)],
    )
    record = DeploymentRecord.bound(**fields)
    assert require(issuer, receipt, ActivationReceipt, authority=record) is receipt
    other = DeploymentRecord.bound(**{**fields, "deployment_id": "synthetic-deployment-0002"})
    assert (
        _code(lambda: require(issuer, receipt, ActivationReceipt, authority=other)).code == "admission.binding_mismatch"
    )
    unbound = DeploymentRecordV1(**fields)
    assert (
        _code(lambda: require(issuer, receipt, ActivationReceipt, authority=unbound)).code
        == "admission.receipt_unauthenticated"
    )
