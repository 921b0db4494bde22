"""Target admission: issue operation receipts and re-check them right before each protected operation.

    issuer = ReceiptIssuer(target=TargetConfiguration(...), verifier=<CurrentTargetVerifier>, clock=<Clock>,
                           epoch_marks=<RevocationEpochMarks>)              # default: this issuer's memory
    receipt = issuer.issue_publication(authority_receipt, projection)      # or issue_materialization,
                                                                           # issue_activation(..., purpose=)
    issuer.require_current(receipt, PublicationReceipt,                    # immediately before the first
                           release_id=..., deployment_id=...,              # external write / pointer change
                           authority=authority_receipt)                    # or the installed DeploymentRecord

Environment and tier come only from the protected `TargetConfiguration` and the integrity-checked
`DeploymentProjection`, and must agree with each other and with the verified authority. Before
issuing, and again in every `require_current`, the `CurrentTargetVerifier` reopens the live policy
digest and revocation epoch; any verifier failure, and any change of either value since the receipt
was issued, is the single stable `authority.activation_authority` error (its `reason` says which).
The live epoch is also raised into the high-water mark (`epoch_marks`): an epoch lower than one
already observed is `authority.epoch_rollback`, so a rollback never revives a revoked receipt. The
default marks are this issuer's memory; a composition root passes the control store's
(`SqlAcceptedSequenceStore`, the same rows `verify_grant` raises) to keep them across processes.

Receipts prove themselves. The issuer only accepts a sealed authority receipt (from `verify_grant`
in this process) and seals what it issues (`receipt_seal`); every use checks, in order: the seal
(`admission.receipt_unauthenticated`), kind, tier, release, deployment, environment, purpose, the
grant digest against the authority the release is delivered under (`admission.binding_mismatch`),
the policy, the verification time (`admission.used_before_verification`: never before it), the
lifetime (`admission.receipt_lifetime_exceeded`: never longer than this issuer issues), the clamp to
the grant's expiry (`admission.receipt_outlives_grant`), expiry of receipt and grant
(`admission.expired`), then the live target. A hand-built, re-dated or re-targeted receipt fails
at the first of these that it breaks, at every protected operation.

The one thing a reader could get wrong: once a protected operation has *prepared* (written a staging
object, prepared a coordinator), call `require_current(..., after_preparation=True)`; every refusal
then becomes `authority.recovery_required`, because stopping there leaves state that must be
recovered, not merely retried.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal, TypeVar

from dpone_dagster.authority.errors import AuthorityError
from dpone_dagster.authority.memory import InMemoryAcceptedSequenceStore
from dpone_dagster.authority.ports import CurrentTarget, CurrentTargetVerifier, RevocationEpochMarks
from dpone_dagster.authority.receipt_seal import PROCESS_SEAL
from dpone_dagster.clock import Clock
from dpone_dagster.contracts.bounds import format_timestamp, parse_timestamp
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.receipts import (
    OPERATION_RECEIPT_TYPES,
    ActivationPurpose,
    ActivationReceipt,
    CleanupReceipt,
    DevelopmentAuthorityReceipt,
    MaterializationReceipt,
    OperationReceipt,
    PublicationReceipt,
    SealedReceipt,
)
from dpone_dagster.contracts.release_records import BOUND_DEPLOYMENT_RECORDS, BoundDeploymentRecord
from dpone_dagster.contracts.target import DeploymentProjection, TargetConfiguration

DEFAULT_RECEIPT_LIFETIME = timedelta(hours=1)

R = TypeVar("R", PublicationReceipt, MaterializationReceipt, ActivationReceipt)
DeliveryAuthority = DevelopmentAuthorityReceipt | BoundDeploymentRecord
"""What a release is delivered under at a protected use: the sealed authority receipt (publish,
materialize) or the installed deployment's record, whose authority fields its integrity subject binds."""
ActivationAuthorityReason = Literal["verifier_failed", "policy_changed", "epoch_changed"]


class AdmissionError(CodedError):
    """An operation receipt is missing, of the wrong kind, or bound to something else."""

    codes = {
        "admission.receipt_missing": "No operation receipt was supplied; protected operations never run without one.",
        "admission.receipt_unknown": "The object supplied is not a publication, materialization or activation receipt.",
        "admission.receipt_kind_mismatch": (
            "A receipt for a different operation was supplied (receipts are not "
            "interchangeable); issue the receipt for this operation."
        ),
        "admission.binding_mismatch": (
            "The receipt, deployment projection, target configuration and authority "
            "disagree on release, deployment, environment, grant or purpose."
        ),
        "admission.policy_mismatch": (
            "The authority or receipt was verified under a policy other than the one pinned for this target."
        ),
        "admission.production_tier": (
            "The target or deployment is production tier; development authority never admits production."
        ),
        "admission.expired": (
            "The receipt or the grant behind it has expired; verify the grant again and issue a new receipt."
        ),
        "admission.not_yet_valid": "The grant behind the authority is not valid yet.",
        "admission.receipt_unauthenticated": (
            "The receipt (or the authority receipt behind it) was not issued by "
            "this process, or was changed after issue (hand-built, parsed from a "
            "file, from another process, re-dated). Verify the grant again; issue "
            "the receipt where the operation runs."
        ),
        "admission.used_before_verification": (
            "The receipt is used at a time before it was verified: the clock went "
            "backwards, or the receipt was re-dated. Check the host clock; issue a "
            "new receipt."
        ),
        "admission.receipt_lifetime_exceeded": (
            "The receipt claims a validity longer than this issuer ever issues; it was not issued here as it stands."
        ),
        "admission.receipt_outlives_grant": (
            "The receipt expires after the grant it was issued under; receipts are "
            "clamped to their grant's expiry, so this one was altered."
        ),
    }


class ActivationAuthorityError(CodedError):
    """The live target could not be confirmed to match the receipt (sanitized; `reason` says why)."""

    codes = {
        "authority.activation_authority": (
            "The current-target check failed: the verifier could not be reached, or "
            "the target's policy digest or revocation epoch changed since the receipt "
            "was issued. Nothing was changed; re-verify the grant and issue a new "
            "receipt."
        ),
    }

    def __init__(self, reason: ActivationAuthorityReason, message: str) -> None:
        super().__init__("authority.activation_authority", message)
        self.reason = reason


class RecoveryRequiredError(CodedError):
    """Admission failed after the operation had prepared state; the operation must be recovered."""

    codes = {
        "authority.recovery_required": (
            "Target admission failed after the operation prepared state. Do not retry "
            "blindly: run the recovery for this operation (it requires a fresh activation "
            "receipt)."
        ),
    }

    def __init__(self, cause: CodedError) -> None:
        super().__init__(
            "authority.recovery_required", f"admission failed after preparation ({cause.code}); recovery is required"
        )
        self.cause_code = cause.code


class ReceiptIssuer:
    """Issues and re-checks operation receipts for one protected target."""

    def __init__(
        self,
        target: TargetConfiguration,
        verifier: CurrentTargetVerifier,
        clock: Clock,
        *,
        epoch_marks: RevocationEpochMarks | None = None,
        receipt_lifetime: timedelta = DEFAULT_RECEIPT_LIFETIME,
    ) -> None:
        if receipt_lifetime <= timedelta(0):
            raise ValueError("receipt_lifetime must be positive")
        self.target = target
        self._verifier = verifier
        self._clock = clock
        self._epoch_marks = epoch_marks if epoch_marks is not None else InMemoryAcceptedSequenceStore()
        self._lifetime = receipt_lifetime

    def issue_publication(
        self, authority: DevelopmentAuthorityReceipt, projection: DeploymentProjection
    ) -> PublicationReceipt:
        return self._issue(PublicationReceipt, authority, projection)

    def issue_materialization(
        self, authority: DevelopmentAuthorityReceipt, projection: DeploymentProjection
    ) -> MaterializationReceipt:
        return self._issue(MaterializationReceipt, authority, projection)

    def issue_activation(
        self, authority: DevelopmentAuthorityReceipt, projection: DeploymentProjection, *, purpose: ActivationPurpose
    ) -> ActivationReceipt:
        return self._issue(ActivationReceipt, authority, projection, purpose=purpose)

    def issue_cleanup(self) -> CleanupReceipt:
        """A cleanup receipt for this target: no release, no grant; the live policy and epoch, now."""
        self._require_non_production("non_production")
        now = self._now()
        live = self._live()
        if live.policy_digest != self.target.policy_digest:
            raise ActivationAuthorityError("policy_changed", "the target's pinned policy changed since verification")
        return PROCESS_SEAL.seal(
            CleanupReceipt(
                target_environment=self.target.environment,
                trust_tier="non_production",
                target_policy_digest=self.target.policy_digest,
                revocation_epoch=live.revocation_epoch,
                verified_at=format_timestamp(now),
                expires_at=format_timestamp(now + self._lifetime),
            )
        )

    def require_cleanup(self, receipt: object, *, after_preparation: bool = False) -> CleanupReceipt:
        """Return `receipt` if it still admits cleanup on the live target (same rules as `require_current`)."""
        try:
            if receipt is None:
                raise AdmissionError("admission.receipt_missing", "no receipt supplied for cleanup")
            if type(receipt) is not CleanupReceipt:
                raise AdmissionError("admission.receipt_kind_mismatch", "only a cleanup receipt admits cleanup")
            self._require_sealed(receipt, "cleanup receipt")
            self._require_non_production(receipt.trust_tier)
            if receipt.target_environment != self.target.environment:
                raise AdmissionError(
                    "admission.binding_mismatch", "the receipt was issued for a different target environment"
                )
            if receipt.target_policy_digest != self.target.policy_digest:
                raise AdmissionError(
                    "admission.policy_mismatch",
                    "the receipt was issued under a policy no longer pinned for this target",
                )
            self._require_in_lifetime(receipt, grant_expires_at=None)
            self._require_live(receipt.revocation_epoch)
            return receipt
        except (AdmissionError, ActivationAuthorityError, AuthorityError) as error:
            if after_preparation:
                raise RecoveryRequiredError(error) from None
            raise

    def require_current(
        self,
        receipt: OperationReceipt | None,
        kind: type[R],
        *,
        release_id: str,
        deployment_id: str,
        authority: DeliveryAuthority,
        purpose: ActivationPurpose | None = None,
        after_preparation: bool = False,
    ) -> R:
        """Return `receipt` if it still admits `kind` for this release and deployment on the live target,
        under `authority` (the sealed authority receipt, or the installed deployment's bound record)."""
        try:
            return self._require_current(receipt, kind, release_id, deployment_id, authority, purpose)
        except (AdmissionError, ActivationAuthorityError, AuthorityError) as error:
            if after_preparation:
                raise RecoveryRequiredError(error) from None
            raise

    def _issue(
        self, kind: type[R], authority: DevelopmentAuthorityReceipt, projection: DeploymentProjection, **extra: str
    ) -> R:
        self._require_sealed(authority, "authority receipt")
        self._require_non_production(projection.trust_tier)
        if not (projection.environment == self.target.environment == authority.environment):
            raise AdmissionError(
                "admission.binding_mismatch", "target, deployment and grant name different environments"
            )
        if projection.grant_digest != authority.grant_digest:
            raise AdmissionError("admission.binding_mismatch", "the deployment was built under a different grant")
        if authority.policy_digest != self.target.policy_digest:
            raise AdmissionError(
                "admission.policy_mismatch", "the grant was verified under a policy not pinned for this target"
            )
        now = self._now()
        if now < parse_timestamp(authority.not_before):
            raise AdmissionError("admission.not_yet_valid", f"the grant is not valid before {authority.not_before}")
        if now < parse_timestamp(authority.verified_at):
            raise AdmissionError(
                "admission.used_before_verification",
                f"the grant was verified at {authority.verified_at}, later than now",
            )
        grant_expiry = parse_timestamp(authority.expires_at)
        if now >= grant_expiry:
            raise AdmissionError("admission.expired", f"the grant expired at {authority.expires_at}")
        self._require_live(authority.revocation_epoch)
        receipt = kind(
            release_id=projection.release_id,
            deployment_id=projection.deployment_id,
            target_environment=self.target.environment,
            trust_tier="non_production",
            target_policy_digest=self.target.policy_digest,
            grant_digest=authority.grant_digest,
            revocation_epoch=authority.revocation_epoch,
            verified_at=format_timestamp(now),
            expires_at=format_timestamp(min(grant_expiry, now + self._lifetime)),
            **extra,
        )
        return PROCESS_SEAL.seal(receipt)

    def _require_current(
        self,
        receipt: object,
        kind: type[R],
        release_id: str,
        deployment_id: str,
        authority: object,
        purpose: ActivationPurpose | None,
    ) -> R:
        if receipt is None:
            raise AdmissionError("admission.receipt_missing", f"no receipt supplied for {kind.OPERATION}")
        if type(receipt) not in OPERATION_RECEIPT_TYPES:
            raise AdmissionError("admission.receipt_unknown", "the supplied object is not an operation receipt")
        if kind not in OPERATION_RECEIPT_TYPES:
            raise AdmissionError(
                "admission.receipt_unknown", "the required receipt kind is not an operation receipt kind"
            )
        if type(receipt) is not kind:
            raise AdmissionError(
                "admission.receipt_kind_mismatch",
                f"a {type(receipt).OPERATION} receipt cannot admit {kind.OPERATION}",  # type: ignore[attr-defined]
            )
        assert isinstance(receipt, kind)
        self._require_sealed(receipt, f"{kind.OPERATION} receipt")
        self._require_non_production(receipt.trust_tier)
        if receipt.release_id != release_id or receipt.deployment_id != deployment_id:
            raise AdmissionError(
                "admission.binding_mismatch", "the receipt was issued for a different release or deployment"
            )
        if receipt.target_environment != self.target.environment:
            raise AdmissionError(
                "admission.binding_mismatch", "the receipt was issued for a different target environment"
            )
        if isinstance(receipt, ActivationReceipt) and purpose is not None and receipt.purpose != purpose:
            raise AdmissionError("admission.binding_mismatch", f"the receipt admits {receipt.purpose}, not {purpose}")
        grant_digest, grant_expires_at = self._delivery_grant(authority, release_id, deployment_id)
        if receipt.grant_digest != grant_digest:
            raise AdmissionError(
                "admission.binding_mismatch",
                "the receipt was issued under another grant than the release is delivered under",
            )
        if receipt.target_policy_digest != self.target.policy_digest:
            raise AdmissionError(
                "admission.policy_mismatch", "the receipt was issued under a policy no longer pinned for this target"
            )
        self._require_in_lifetime(receipt, grant_expires_at=grant_expires_at)
        self._require_live(receipt.revocation_epoch)
        return receipt

    def _delivery_grant(self, authority: object, release_id: str, deployment_id: str) -> tuple[str, str]:
        """(grant digest, grant expiry) of what the release is delivered under; refuse anything unproven."""
        if isinstance(authority, DevelopmentAuthorityReceipt):
            self._require_sealed(authority, "authority receipt")
            return authority.grant_digest, authority.expires_at
        if type(authority) in BOUND_DEPLOYMENT_RECORDS:  # v2, or v3 (paged members)
            if authority.release_id != release_id or authority.deployment_id != deployment_id:
                raise AdmissionError(
                    "admission.binding_mismatch", "the deployment record is not the one of this release and deployment"
                )
            return authority.grant_digest, authority.authority_expires_at
        raise AdmissionError(
            "admission.receipt_unauthenticated",
            "the authority is neither a verified authority receipt nor a bound deployment record",
        )

    def _require_sealed(self, receipt: SealedReceipt, what: str) -> None:
        if not PROCESS_SEAL.is_sealed(receipt):
            raise AdmissionError(
                "admission.receipt_unauthenticated",
                f"the {what} was not issued by this process or was changed after issue",
            )

    def _require_in_lifetime(self, receipt: OperationReceipt | CleanupReceipt, *, grant_expires_at: str | None) -> None:
        """Verification time, lifetime, clamp to the grant's expiry, and expiry, against the clock now."""
        now = self._now()
        verified_at, expires_at = parse_timestamp(receipt.verified_at), parse_timestamp(receipt.expires_at)
        if now < verified_at:
            raise AdmissionError(
                "admission.used_before_verification",
                f"the receipt was verified at {receipt.verified_at}, later than now",
            )
        if expires_at - verified_at > self._lifetime:
            raise AdmissionError(
                "admission.receipt_lifetime_exceeded",
                f"the receipt claims validity beyond the {self._lifetime} this issuer issues",
            )
        if grant_expires_at is not None and expires_at > parse_timestamp(grant_expires_at):
            raise AdmissionError(
                "admission.receipt_outlives_grant", f"the receipt expires after its grant ({grant_expires_at})"
            )
        if now >= expires_at:
            raise AdmissionError("admission.expired", f"the receipt expired at {receipt.expires_at}")
        if grant_expires_at is not None and now >= parse_timestamp(grant_expires_at):
            raise AdmissionError("admission.expired", f"the grant expired at {grant_expires_at}")

    def _require_non_production(self, deployment_tier: str) -> None:
        if self.target.trust_tier != "non_production" or deployment_tier != "non_production":
            raise AdmissionError(
                "admission.production_tier", "development authority never admits a production-tier target"
            )

    def _live(self) -> CurrentTarget:
        try:
            live = self._verifier.current(self.target)
        except Exception:
            raise ActivationAuthorityError("verifier_failed", "the current-target verifier failed") from None
        if not isinstance(live, CurrentTarget):
            raise ActivationAuthorityError("verifier_failed", "the current-target verifier returned an invalid answer")
        try:
            mark = self._epoch_marks.raise_epoch(
                self.target.policy_digest, self.target.environment, live.revocation_epoch
            )
        except Exception:
            raise ActivationAuthorityError(
                "verifier_failed", "the revocation epoch high-water mark could not be recorded"
            ) from None
        if isinstance(mark, bool) or not isinstance(mark, int):
            raise ActivationAuthorityError("verifier_failed", "the revocation epoch high-water mark is invalid")
        if live.revocation_epoch < mark:
            raise AuthorityError(
                "authority.epoch_rollback",
                f"the target's revocation epoch {live.revocation_epoch} is below the observed epoch {mark}",
            )
        return live

    def _require_live(self, revocation_epoch: int) -> None:
        live = self._live()
        if live.policy_digest != self.target.policy_digest:
            raise ActivationAuthorityError("policy_changed", "the target's pinned policy changed since verification")
        if live.revocation_epoch != revocation_epoch:
            raise ActivationAuthorityError("epoch_changed", "the target's revocation epoch changed since verification")

    def _now(self) -> datetime:
        try:
            moment = self._clock.now()
            return parse_timestamp(format_timestamp(moment))
        except Exception:
            raise ActivationAuthorityError("verifier_failed", "the admission clock failed") from None
