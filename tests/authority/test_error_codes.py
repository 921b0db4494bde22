"""Every code declared in contracts/ and authority/ is reachable, and refusals carry no secrets."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

import pytest

from devtools.error_sources import import_every_module
from dpone_dagster.authority.memory import ControllableCurrentTarget, InMemoryPolicySource
from dpone_dagster.authority.ports import AuthorityPorts
from dpone_dagster.authority.receipt_seal import PROCESS_SEAL
from dpone_dagster.authority.synthetic import (
    SYNTHETIC_EPOCH_START,
    SyntheticAuthority,
    SyntheticSigner,
    synthetic_source,
)
from dpone_dagster.authority.target_admission import ReceiptIssuer
from dpone_dagster.authority.verification import verify_grant, verify_policy
from dpone_dagster.contracts import canonical
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.bounds import format_timestamp
from dpone_dagster.contracts.dispatch import read_document, read_production_document
from dpone_dagster.contracts.grant import DetachedSignature, DevelopmentGrant
from dpone_dagster.contracts.identity import digest, domain_prefix, require_digest
from dpone_dagster.contracts.policy import SignerKey, repository_digest, signer_key_id
from dpone_dagster.contracts.receipts import ActivationReceipt, MaterializationReceipt, PublicationReceipt
from dpone_dagster.contracts.target import DeploymentProjection, TargetConfiguration
from dpone_dagster.contracts.workspace_ids import check_workspace_id
from dpone_dagster.error_catalog import CatalogEntry, catalog
from dpone_dagster.errors import DponeError


def _contracts_and_authority_codes() -> dict[str, CatalogEntry]:
    """The slice of the one catalogue declared in contracts/ and authority/ (each of their modules imported)."""
    import_every_module("dpone_dagster.contracts")
    import_every_module("dpone_dagster.authority")
    layers = ("dpone_dagster.contracts.", "dpone_dagster.authority.")
    flows = "dpone_dagster.contracts.flows"  # FlowError: release capture's refusals, reached by tests/release
    return {
        code: entry
        for code, entry in catalog().items()
        if entry.declared_by
        and entry.declared_by.__module__.startswith(layers)
        and entry.declared_by.__module__ != flows
    }


CODES = _contracts_and_authority_codes()
RELEASE = digest("dpone.example.v1", {"release": 1})


def _verify(
    authority: SyntheticAuthority | None = None,
    grant: DevelopmentGrant | None = None,
    signers: int | None = None,
    **kwargs,
):
    authority = authority or SyntheticAuthority()
    grant_bytes, signatures = authority.signed(grant or authority.grant(), signers)
    kwargs.setdefault("source", synthetic_source())
    kwargs.setdefault("ports", authority.ports)
    return verify_grant(grant_bytes, signatures, pinned_policy_digest=authority.policy_digest, **kwargs)


def _grant(**overrides) -> Callable[[], object]:
    def run():
        authority = SyntheticAuthority()
        return _verify(authority, authority.grant(**overrides))

    return run


def _resigned(mutate: Callable[[bytes], bytes]) -> Callable[[], object]:
    def run():
        authority = SyntheticAuthority()
        data = mutate(authority.grant().canonical_bytes())
        signatures = [signer.sign_bytes(data) for signer in authority.signers[:2]]
        return verify_grant(
            data,
            signatures,
            pinned_policy_digest=authority.policy_digest,
            source=synthetic_source(),
            ports=authority.ports,
        )

    return run


def _epoch_revoked():
    authority = SyntheticAuthority()
    authority.epochs.revoke()
    return _verify(authority)


def _rollback():
    authority = SyntheticAuthority()
    _verify(authority, authority.grant(sequence=3))
    return _verify(authority, authority.grant(sequence=2))


def _sequence_conflict():
    authority = SyntheticAuthority()
    _verify(authority, authority.grant(sequence=3))
    return _verify(authority, authority.grant(sequence=3, max_workloads=5))


def _policy_digest_mismatch():
    authority = SyntheticAuthority()
    return verify_policy(authority.policy.canonical_bytes(), digest("dpone.development-policy.v1", {"x": 1}))


def _unknown_signer():
    authority = SyntheticAuthority()
    grant_bytes, signatures = authority.signed()
    extra = SyntheticSigner("stranger").sign_bytes(grant_bytes)
    return verify_grant(
        grant_bytes,
        [*signatures.signatures, extra],
        pinned_policy_digest=authority.policy_digest,
        source=synthetic_source(),
        ports=authority.ports,
    )


def _signature_invalid():
    authority = SyntheticAuthority()
    grant_bytes, signatures = authority.signed()
    bad = DetachedSignature(key_id=signatures.signatures[0].key_id, signature="0" * 128)
    return verify_grant(
        grant_bytes,
        [bad],
        pinned_policy_digest=authority.policy_digest,
        source=synthetic_source(),
        ports=authority.ports,
    )


def _unavailable():
    authority = SyntheticAuthority()
    ports = AuthorityPorts(
        authority.clock, InMemoryPolicySource({}), authority.epochs, authority.sequences, authority.ports.signatures
    )
    return _verify(authority, ports=ports)


def _admission(tier="non_production", *, epoch=0, pinned=None, clock_shift=timedelta(0), projection=None):
    authority = SyntheticAuthority()
    verified = _verify(authority)
    target = TargetConfiguration(
        environment="synthetic-dev", trust_tier=tier, policy_digest=pinned or authority.policy_digest
    )
    clock = type(authority.clock)(authority.now + clock_shift)
    live = ControllableCurrentTarget(pinned or authority.policy_digest, epoch)
    issuer = ReceiptIssuer(target, live, clock)
    projection = projection or DeploymentProjection(
        release_id=RELEASE,
        deployment_id="synthetic-dep",
        environment="synthetic-dev",
        trust_tier="non_production",
        grant_digest=verified.grant_digest,
    )
    return issuer, verified, projection, live


def _issue(**kwargs):
    issuer, verified, projection, _ = _admission(**kwargs)
    return issuer.issue_publication(verified, projection)


def _require(kind, *, receipt_kind="publication", after_preparation=False, **kwargs):
    def run():
        issuer, verified, projection, _ = _admission()
        receipt = {
            "publication": lambda: issuer.issue_publication(verified, projection),
            "activation": lambda: issuer.issue_activation(verified, projection, purpose="activate"),
            "none": lambda: None,
        }[receipt_kind]()
        kwargs.setdefault("release_id", RELEASE)
        kwargs.setdefault("deployment_id", "synthetic-dep")
        kwargs.setdefault("authority", verified)
        return issuer.require_current(receipt, kind, after_preparation=after_preparation, **kwargs)

    return run


def _activation_authority():
    issuer, verified, projection, live = _admission()
    receipt = issuer.issue_materialization(verified, projection)
    live.revocation_epoch = 4
    return issuer.require_current(
        receipt, MaterializationReceipt, release_id=RELEASE, deployment_id="synthetic-dep", authority=verified
    )


def _sealed_copy(clock_shift=timedelta(0), **changes):
    """Receipt checks behind the seal: a copy re-sealed in this process (as a faulty issuer would)."""

    def run():
        issuer, verified, projection, _ = _admission(clock_shift=clock_shift)
        receipt = PROCESS_SEAL.seal(issuer.issue_publication(verified, projection).model_copy(update=changes))
        return issuer.require_current(
            receipt, PublicationReceipt, release_id=RELEASE, deployment_id="synthetic-dep", authority=verified
        )

    return run


def _hand_built():
    issuer, verified, projection, _ = _admission()
    receipt = PublicationReceipt(**issuer.issue_publication(verified, projection).model_dump())
    return issuer.require_current(
        receipt, PublicationReceipt, release_id=RELEASE, deployment_id="synthetic-dep", authority=verified
    )


def _used_before_verification():
    issuer, verified, projection, _ = _admission()
    receipt = issuer.issue_publication(verified, projection)
    issuer._clock.moment -= timedelta(minutes=5)
    return issuer.require_current(
        receipt, PublicationReceipt, release_id=RELEASE, deployment_id="synthetic-dep", authority=verified
    )


def _policy_with_key(public_key_hex: str):
    def run():
        signer = SignerKey.model_construct(
            key_id=signer_key_id(public_key_hex), algorithm="ed25519", public_key=public_key_hex
        )
        return SignerKey(**signer.model_dump())

    return run


def _epoch_rolled_back():
    authority = SyntheticAuthority()
    authority.epochs.revoke()
    with pytest.raises(DponeError):
        _verify(authority)
    authority.epochs.epoch = 0
    return _verify(authority)


def _binding_mismatch():
    issuer, verified, projection, _ = _admission()
    return issuer.issue_publication(verified, projection.model_copy(update={"environment": "synthetic-other"}))


def _not_yet_valid():
    return _issue(clock_shift=-timedelta(days=1))


def _expired():
    return _issue(clock_shift=timedelta(days=2))


def _policy_mismatch():
    return _issue(pinned=digest("dpone.development-policy.v1", {"other": 1}))


DEV_VECTOR = b'{"schema":"dpone.development-policy.v1"}'

SCENARIOS: dict[str, Callable[[], object]] = {
    "canonical.invalid_utf8": lambda: canonical.loads(b'"\xc3"'),
    "canonical.bom": lambda: canonical.loads(b"\xef\xbb\xbf[]"),
    "canonical.too_large": lambda: canonical.loads(b"[" + b"0," * canonical.MAX_DOCUMENT_BYTES + b"0]"),
    "canonical.too_deep": lambda: canonical.loads(b"[" * 40 + b"]" * 40),
    "canonical.invalid_json": lambda: canonical.loads(b"{,}"),
    "canonical.duplicate_key": lambda: canonical.loads(b'{"k":1,"k":1}'),
    "canonical.non_finite_number": lambda: canonical.loads(b"[NaN]"),
    "canonical.number_out_of_range": lambda: canonical.dumps(2**60),
    "canonical.invalid_string": lambda: canonical.dumps("\ud800"),
    "canonical.unsupported_type": lambda: canonical.dumps({1, 2}),
    "canonical.non_canonical": lambda: canonical.loads_canonical(b'{ "a":1}'),
    "identity.invalid_kind": lambda: domain_prefix("Not A Kind"),
    "identity.invalid_digest": lambda: require_digest("md5:abc"),
    "workspace.invalid_id": lambda: check_workspace_id("Not A Branch"),
    "contract.unknown_field": lambda: DevelopmentGrant.from_value(
        {"schema": "dpone.development-authority.v1", "surprise": 1}
    ),
    "contract.schema_mismatch": lambda: parse_document(DevelopmentGrant, SyntheticAuthority().policy.canonical_bytes()),
    "contract.invalid": _grant(max_workloads=10_001),
    "dispatch.unknown_document": lambda: read_document(b'{"schema":"dpone.unknown.v1"}'),
    "dispatch.family_refused": lambda: read_production_document(SyntheticAuthority().policy.canonical_bytes()),
    "authority.policy_digest_mismatch": _policy_digest_mismatch,
    "authority.grant_policy_mismatch": _grant(policy_digest=digest("dpone.development-policy.v1", {"x": 2})),
    "authority.unknown_signer": _unknown_signer,
    "authority.signature_invalid": _signature_invalid,
    "authority.threshold_not_met": lambda: _verify(signers=1),
    "authority.environment_not_allowed": _grant(environment="synthetic-elsewhere"),
    "authority.window_too_long": _grant(expires_at=format_timestamp(SYNTHETIC_EPOCH_START + timedelta(days=8))),
    "authority.not_yet_valid": _grant(not_before=format_timestamp(SYNTHETIC_EPOCH_START + timedelta(hours=2))),
    "authority.expired": _grant(
        not_before=format_timestamp(SYNTHETIC_EPOCH_START - timedelta(hours=1)),
        expires_at=format_timestamp(SYNTHETIC_EPOCH_START + timedelta(minutes=30)),
    ),
    "authority.revoked": _epoch_revoked,
    "authority.epoch_mismatch": _grant(revocation_epoch=1),
    "authority.rollback": _rollback,
    "authority.sequence_conflict": _sequence_conflict,
    "authority.source_mismatch": _grant(source_repository_digest=repository_digest("example.invalid/other")),
    "authority.membership_mismatch": lambda: _verify(source=synthetic_source(ordinary_membership=[])),
    "authority.budget_exceeded": lambda: _verify(source=synthetic_source(source_bytes=10**12)),
    "authority.unavailable": _unavailable,
    "admission.receipt_missing": _require(PublicationReceipt, receipt_kind="none"),
    "admission.receipt_unknown": _require(DeploymentProjection),  # type: ignore[arg-type]
    "admission.receipt_kind_mismatch": _require(ActivationReceipt),
    "admission.binding_mismatch": _binding_mismatch,
    "admission.policy_mismatch": _policy_mismatch,
    "admission.production_tier": lambda: _issue(tier="production"),
    "admission.expired": _expired,
    "admission.not_yet_valid": _not_yet_valid,
    "authority.activation_authority": _activation_authority,
    "admission.receipt_unauthenticated": _hand_built,
    "admission.used_before_verification": _used_before_verification,
    "admission.receipt_lifetime_exceeded": _sealed_copy(expires_at="2026-01-06T10:00:00Z"),
    "admission.receipt_outlives_grant": _sealed_copy(
        timedelta(hours=22, minutes=30), expires_at="2026-01-06T09:15:00Z"
    ),
    "authority.epoch_rollback": _epoch_rolled_back,
    "policy.signer_key_small_order": _policy_with_key("01" + "00" * 31),
    "policy.signer_key_non_canonical": _policy_with_key("ed" + "ff" * 30 + "7f"),
    "authority.recovery_required": _require(
        ActivationReceipt, receipt_kind="activation", after_preparation=True, purpose="audit_repair"
    ),
}


def test_every_catalogued_code_has_a_scenario() -> None:
    assert sorted(SCENARIOS) == sorted(CODES)


@pytest.mark.parametrize("code", sorted(CODES))
def test_code_is_reachable(code: str) -> None:
    with pytest.raises(DponeError) as caught:
        SCENARIOS[code]()
    assert caught.value.code == code
    assert isinstance(caught.value, CODES[code].declared_by)


@pytest.mark.parametrize("code", sorted(CODES))
def test_catalogue_entries_are_well_formed(code: str) -> None:
    assert re.fullmatch(r"[a-z]+(\.[a-z0-9_]+)+", code)
    assert len(CODES[code].meaning or "") > 20


@pytest.mark.parametrize("code", sorted(CODES))
def test_messages_carry_no_secret_path_or_sql(code: str) -> None:
    with pytest.raises(DponeError) as caught:
        SCENARIOS[code]()
    text = str(caught.value).lower()
    for forbidden in ("/home/", "/tmp/", "/work/", "password", "secret", "select ", "insert ", "begin private key"):
        assert forbidden not in text
