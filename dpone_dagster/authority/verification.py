"""Verify a pinned development policy and a threshold-signed grant into a `DevelopmentAuthorityReceipt`.

Public API (what the release services call):

    policy  = verify_policy(policy_bytes, pinned_digest)            # -> DevelopmentPolicy
    receipt = verify_grant(grant_bytes, signatures,                 # -> DevelopmentAuthorityReceipt
                           pinned_policy_digest=..., source=ReconstructedSource(...),
                           ports=AuthorityPorts(...), declared_limits=None)

Fields of the receipt a release service reads: `policy_digest`, `grant_digest` (bind both into the
release), `environment`, `source_repository_digest`, `source_commit`, `native_membership`,
`ordinary_membership`, `execution_subjects` (metadata only), `effective_limits` (apply before every
registry write and cache install), `expires_at`, `revocation_epoch`, `sequence`, `verified_at`, and
`document_digest()` for the receipt's own identity.

Checks run in a fixed order, and the first failure raises `AuthorityError` (or a canonical/contract
error for malformed bytes): policy digest; signatures (unknown signer, invalid signature, threshold
of distinct keys); grant parse; grant policy; environment; window length; clock; revocation epoch
(first against its high-water mark: a lower epoch than one already observed is
`authority.epoch_rollback`); rollback; source repository and commit; membership; budgets; and last,
the atomic sequence record. The receipt returned is sealed by this process (`receipt_seal`): only
it, unaltered, is accepted by target admission.
The one thing a reader could get wrong: a successful `verify_grant` *records* the grant's sequence
in the accepted-sequence store, so verification is not side-effect free; re-verifying the same grant
is fine, but an older grant is refused afterwards (that is the rollback protection).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar

from dpone_dagster.authority.errors import AuthorityError
from dpone_dagster.authority.ports import AcceptedSequence, AuthorityPorts
from dpone_dagster.authority.receipt_seal import PROCESS_SEAL
from dpone_dagster.contracts.base import ContractModel, parse_document
from dpone_dagster.contracts.bounds import (
    MAX_GRANT_WINDOW_SECONDS,
    MAX_WORKLOADS,
    Count,
    GitCommit,
    RepositoryName,
    WorkloadId,
    format_timestamp,
    parse_timestamp,
    sorted_unique,
)
from dpone_dagster.contracts.grant import (
    DetachedSignature,
    DevelopmentGrant,
    GrantSignatures,
    signing_payload,
)
from dpone_dagster.contracts.identity import digest, require_digest
from dpone_dagster.contracts.policy import DeliveryLimits, DevelopmentPolicy, repository_digest
from dpone_dagster.contracts.receipts import DevelopmentAuthorityReceipt

SIGNATURE_SUBJECT_KIND = "dpone.signature-subject.v1"

T = TypeVar("T")


class ReconstructedSource(ContractModel):
    """What the release services rebuilt independently from the exact source snapshot.

    `peak_cpu_millicores` / `peak_memory_bytes` are the largest public resource request or limit of
    any delivered workload.
    """

    repository: RepositoryName
    commit: GitCommit
    native_membership: sorted_unique(WorkloadId, max_length=MAX_WORKLOADS)
    ordinary_membership: sorted_unique(WorkloadId, max_length=MAX_WORKLOADS)
    source_bytes: Count
    peak_cpu_millicores: Count
    peak_memory_bytes: Count


def verify_policy(policy_bytes: bytes, pinned_digest: str) -> DevelopmentPolicy:
    """Return the policy if `policy_bytes` are canonical and hash to the pinned digest."""
    require_digest(pinned_digest)
    if digest(DevelopmentPolicy.KIND, bytes(policy_bytes)) != pinned_digest:
        raise AuthorityError("authority.policy_digest_mismatch", "policy bytes do not match the pinned policy digest")
    return parse_document(DevelopmentPolicy, policy_bytes)


def verify_grant(
    grant_bytes: bytes,
    signatures: GrantSignatures | Sequence[DetachedSignature],
    *,
    pinned_policy_digest: str,
    source: ReconstructedSource,
    ports: AuthorityPorts,
    declared_limits: DeliveryLimits | None = None,
) -> DevelopmentAuthorityReceipt:
    """Verify `grant_bytes` under the pinned policy; see the module docstring for the check order."""
    grant_bytes = bytes(grant_bytes)
    policy = verify_policy(
        _port(lambda: ports.policies.policy_bytes(pinned_policy_digest), bytes), pinned_policy_digest
    )
    grant_digest = digest(DevelopmentGrant.KIND, grant_bytes)
    signer_key_ids = _verify_signatures(policy, grant_bytes, grant_digest, signatures, ports)
    grant = parse_document(DevelopmentGrant, grant_bytes)
    now = _now(ports)

    if grant.policy_digest != pinned_policy_digest:
        raise AuthorityError(
            "authority.grant_policy_mismatch", "the grant names a different policy than the pinned one"
        )
    if grant.environment not in policy.environments:
        raise AuthorityError(
            "authority.environment_not_allowed", f"environment {grant.environment!r} is not allowed by the policy"
        )
    _check_window(policy, grant, now)
    _check_epoch(grant, pinned_policy_digest, ports)
    highest = _port(
        lambda: ports.sequences.highest(pinned_policy_digest, grant.environment), (AcceptedSequence, type(None))
    )
    _check_sequence(highest, AcceptedSequence(grant.sequence, grant_digest))
    _check_source(policy, grant, source)
    _check_membership(grant, source)
    limits = _effective_limits(policy, grant, declared_limits)
    _check_budgets(limits, source)

    accepted = AcceptedSequence(grant.sequence, grant_digest)
    if not _port(lambda: ports.sequences.accept(pinned_policy_digest, grant.environment, accepted), bool):
        latest = _port(
            lambda: ports.sequences.highest(pinned_policy_digest, grant.environment), (AcceptedSequence, type(None))
        )
        _check_sequence(latest, accepted)
        raise AuthorityError("authority.rollback", "a newer grant was accepted concurrently")

    receipt = DevelopmentAuthorityReceipt(
        authority_family="development",
        purpose=grant.purpose,
        trust_tier=grant.trust_tier,
        policy_id=policy.policy_id,
        policy_digest=pinned_policy_digest,
        grant_digest=grant_digest,
        signature_subject_digest=digest(
            SIGNATURE_SUBJECT_KIND, {"grant_digest": grant_digest, "signer_key_ids": list(signer_key_ids)}
        ),
        signer_key_ids=signer_key_ids,
        environment=grant.environment,
        source_repository=policy.source_repository,
        source_repository_digest=grant.source_repository_digest,
        source_commit=grant.source_commit,
        not_before=grant.not_before,
        expires_at=grant.expires_at,
        revocation_epoch=grant.revocation_epoch,
        sequence=grant.sequence,
        native_membership=grant.native_membership,
        ordinary_membership=grant.ordinary_membership,
        execution_subjects=grant.execution_subjects,
        effective_limits=limits,
        verified_at=format_timestamp(now),
    )
    return PROCESS_SEAL.seal(receipt)


def _verify_signatures(
    policy: DevelopmentPolicy,
    grant_bytes: bytes,
    grant_digest: str,
    signatures: GrantSignatures | Sequence[DetachedSignature],
    ports: AuthorityPorts,
) -> tuple[str, ...]:
    if isinstance(signatures, GrantSignatures):
        if signatures.grant_digest != grant_digest:
            raise AuthorityError("authority.signature_invalid", "the signature set was made for a different grant")
        signatures = signatures.signatures
    payload = signing_payload(grant_bytes)
    verified: set[str] = set()
    for item in signatures:
        if not isinstance(item, DetachedSignature):
            raise AuthorityError("authority.signature_invalid", "a signature is not a DetachedSignature")
        signer = policy.signer(item.key_id)
        if signer is None:
            raise AuthorityError("authority.unknown_signer", "a signature names a key the policy does not list")
        public_key, signature = bytes.fromhex(signer.public_key), bytes.fromhex(item.signature)
        if not _port(lambda: ports.signatures.verify(public_key, signature, payload), bool):
            raise AuthorityError("authority.signature_invalid", "a signature does not verify over the grant bytes")
        verified.add(item.key_id)
    if len(verified) < policy.threshold:
        raise AuthorityError(
            "authority.threshold_not_met",
            f"{len(verified)} distinct policy key(s) signed; the policy requires {policy.threshold}",
        )
    return tuple(sorted(verified))


def _now(ports: AuthorityPorts) -> datetime:
    moment = _port(ports.clock.now, datetime)
    if moment.tzinfo is None:
        raise AuthorityError("authority.unavailable", "the clock returned a time without a timezone")
    return parse_timestamp(format_timestamp(moment))


def _check_window(policy: DevelopmentPolicy, grant: DevelopmentGrant, now: datetime) -> None:
    not_before, expires_at = parse_timestamp(grant.not_before), parse_timestamp(grant.expires_at)
    longest = min(policy.max_grant_validity_seconds, MAX_GRANT_WINDOW_SECONDS)
    if (expires_at - not_before).total_seconds() > longest:
        raise AuthorityError("authority.window_too_long", f"the grant is valid for longer than {longest} seconds")
    if now < not_before:
        raise AuthorityError("authority.not_yet_valid", f"the grant is not valid before {grant.not_before}")
    if now >= expires_at:
        raise AuthorityError("authority.expired", f"the grant expired at {grant.expires_at}")


def _check_epoch(grant: DevelopmentGrant, policy_digest: str, ports: AuthorityPorts) -> None:
    current = _port(lambda: ports.epochs.current_epoch(grant.policy_digest, grant.environment), int)
    if isinstance(current, bool) or current < 0:
        raise AuthorityError("authority.unavailable", "the revocation epoch source returned an invalid epoch")
    mark = _port(lambda: ports.sequences.raise_epoch(policy_digest, grant.environment, current), int)
    if current < mark:
        raise AuthorityError(
            "authority.epoch_rollback", f"the current revocation epoch {current} is below the observed epoch {mark}"
        )
    if grant.revocation_epoch < current:
        raise AuthorityError(
            "authority.revoked",
            f"the grant is from revocation epoch {grant.revocation_epoch}; the current epoch is {current}",
        )
    if grant.revocation_epoch > current:
        raise AuthorityError(
            "authority.epoch_mismatch",
            f"the grant names epoch {grant.revocation_epoch}, ahead of the current epoch {current}",
        )


def _check_sequence(highest: AcceptedSequence | None, candidate: AcceptedSequence) -> None:
    if highest is None:
        return
    if candidate.sequence < highest.sequence:
        raise AuthorityError(
            "authority.rollback",
            f"grant sequence {candidate.sequence} is lower than the accepted sequence {highest.sequence}",
        )
    if candidate.sequence == highest.sequence and candidate.grant_digest != highest.grant_digest:
        raise AuthorityError(
            "authority.sequence_conflict", f"another grant was already accepted as sequence {candidate.sequence}"
        )


def _check_source(policy: DevelopmentPolicy, grant: DevelopmentGrant, source: ReconstructedSource) -> None:
    if grant.source_repository_digest != repository_digest(policy.source_repository):
        raise AuthorityError("authority.source_mismatch", "the grant names a repository other than the policy's")
    if source.repository != policy.source_repository:
        raise AuthorityError(
            "authority.source_mismatch", "the reconstructed source comes from a repository other than the policy's"
        )
    if grant.source_commit != source.commit:
        raise AuthorityError(
            "authority.source_mismatch", "the grant's commit differs from the reconstructed source commit"
        )


def _check_membership(grant: DevelopmentGrant, source: ReconstructedSource) -> None:
    for label, granted, rebuilt in (
        ("native", grant.native_membership, source.native_membership),
        ("ordinary", grant.ordinary_membership, source.ordinary_membership),
    ):
        if granted != rebuilt:
            missing, extra = len(set(rebuilt) - set(granted)), len(set(granted) - set(rebuilt))
            raise AuthorityError(
                "authority.membership_mismatch",
                (
                    f"{label} membership differs: {missing} rebuilt workload(s) not granted, {extra} granted "
                    "workload(s) not rebuilt"
                ),
            )


def _effective_limits(
    policy: DevelopmentPolicy, grant: DevelopmentGrant, declared: DeliveryLimits | None
) -> DeliveryLimits:
    from_grant = policy.limits.model_copy(
        update={"max_workloads": grant.max_workloads, "max_source_bytes": grant.max_source_bytes}
    )
    return DeliveryLimits.tightest(policy.limits, from_grant, *([declared] if declared is not None else []))


def _check_budgets(limits: DeliveryLimits, source: ReconstructedSource) -> None:
    workloads = len(source.native_membership) + len(source.ordinary_membership)
    for label, used, allowed in (
        ("workloads", workloads, limits.max_workloads),
        ("source bytes", source.source_bytes, limits.max_source_bytes),
        ("cpu millicores per workload", source.peak_cpu_millicores, limits.max_cpu_millicores),
        ("memory bytes per workload", source.peak_memory_bytes, limits.max_memory_bytes),
    ):
        if used > allowed:
            raise AuthorityError("authority.budget_exceeded", f"{label}: {used} exceeds the effective limit {allowed}")


def _port(call: Callable[[], T], expected: type | tuple[type, ...]) -> T:
    """Call a port; any exception or an answer of the wrong type is `authority.unavailable`."""
    try:
        result = call()
    except AuthorityError:
        raise
    except Exception:
        raise AuthorityError(
            "authority.unavailable", "a verification dependency failed; nothing was authorized"
        ) from None
    if not isinstance(result, expected):
        raise AuthorityError("authority.unavailable", "a verification dependency returned an invalid answer")
    return result
