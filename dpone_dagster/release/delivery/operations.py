"""Operator operations on one target: recover, repair-audit, rollback, gc, each under its own receipt.

    operations = ReleaseOperations(cache=..., registry=..., issuer=<ReceiptIssuer>, grant=<GrantSource>,
                                   verify=pipeline.verify_authority, repository="org/repo")
    operations.recover(dry_run=False)       # pending intent -> pointer + audit (`pointer_recovery`)
    operations.repair_audit(dry_run=False)  # active pointer lacks its audit entry (`audit_repair`)
    operations.rollback(dry_run=False)      # pointer -> previous immutable deployment (`rollback`)
    operations.gc(dry_run=False)            # unreferenced blobs + abandoned staging (`CleanupReceipt`)
    operations.break_lease(lease_id, dry_run=True, force=False)  # a killed holder's lease (`CleanupReceipt`)

The Dagster jobs (`defs/release/operations.py`) and `dpone release ...` build this same object from
the same platform-adapter resources; neither adds a rule of its own.

Authority for the three activation operations is the grant the authority location holds *now*,
verified (signatures, window, epoch, sequence) against a reconstruction of the installed release the
operation targets (its commit and exact membership, read from the fully re-verified deployment).
The receipt is then issued for that release and deployment with the operation's own purpose.

What a reader could get wrong: a release built under an earlier grant cannot be recovered or rolled
back to under a later one: receipts bind the grant a release was built under, and the sequence
rule refuses re-verifying an older grant. That refusal (`release.operation_grant_superseded`) is
deliberate; rebuild the release under the current grant instead. A dry run reads and checks what it
can without verifying the grant (verification records the grant's sequence) and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Protocol

from dpone_dagster.authority.target_admission import ReceiptIssuer
from dpone_dagster.authority.verification import ReconstructedSource
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.grant import DevelopmentGrant, GrantSignatures
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.receipts import ActivationPurpose, DevelopmentAuthorityReceipt
from dpone_dagster.release.build.bundle import ReleaseBundle, deployment_projection
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.delivery.registry import ReleaseRegistry
from dpone_dagster.release.errors import ActivationError


class OperationError(CodedError):
    codes = {
        "release.operation_grant_superseded": (
            "The release was built under a grant other than the one the authority "
            "location holds now; no receipt can admit it. Rebuild it under the "
            "current grant (release_job)."
        ),
    }


class GrantSource(Protocol):
    def grant(self) -> tuple[bytes, GrantSignatures]:
        """The original grant bytes and detached signatures the authority location holds now."""
        ...


Verify = Callable[[bytes, GrantSignatures, ReconstructedSource], DevelopmentAuthorityReceipt]


@dataclass(frozen=True)
class OperationOutcome:
    """What one operation did (or, with `dry_run`, would do). `action` names it in one word."""

    operation: str
    action: str
    dry_run: bool
    release_id: str | None = None
    deployment_id: str | None = None
    previous_release_id: str | None = None
    audit_sequence: int | None = None
    receipt_kind: str | None = None
    receipt_digest: str | None = None
    removed: dict[str, list[str]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {key: value for key, value in asdict(self).items() if value not in (None, {})}


def reconstructed_from(bundle: ReleaseBundle, repository: str) -> ReconstructedSource:
    """What the grant is checked against for an installed release: its commit and exact membership."""
    quantities = [q for w in bundle.ordinary for q in (w.resources.requests, w.resources.limits)]
    return ReconstructedSource(
        repository=repository,
        commit=bundle.parent.source_commit,
        native_membership=sorted(bundle.native_membership),
        ordinary_membership=sorted(bundle.ordinary_membership),
        source_bytes=bundle.source_bytes,
        peak_cpu_millicores=max((q.cpu_millicores for q in quantities), default=0),
        peak_memory_bytes=max((q.memory_bytes for q in quantities), default=0),
    )


@dataclass
class ReleaseOperations:
    cache: ReleaseCache
    registry: ReleaseRegistry
    issuer: ReceiptIssuer
    grant: GrantSource
    verify: Verify
    repository: str

    # -- activation operations ---------------------------------------------------------------

    def recover(self, *, dry_run: bool = False) -> OperationOutcome:
        """Complete the prepared activation under a `pointer_recovery` receipt; `nothing_pending` if none."""
        intent = self.cache.pending()
        if intent is None:
            return OperationOutcome("recover", "nothing_pending", dry_run)
        bundle = self.cache.load(intent.release_id).bundle
        plan = dict(
            release_id=intent.release_id,
            deployment_id=intent.deployment_id,
            previous_release_id=intent.previous_release_id,
            audit_sequence=intent.audit_sequence,
        )
        if dry_run:
            self._require_current_grant(bundle)
            return OperationOutcome("recover", "would_recover", True, **plan)
        receipt = self._activation_receipt(bundle, "pointer_recovery")
        result = self.cache.recover(receipt=receipt)
        action = "recovered" if result is not None and result.changed else "recovered_audit_only"
        return OperationOutcome(
            "recover", action, False, **plan, receipt_kind="pointer_recovery", receipt_digest=receipt.document_digest()
        )

    def repair_audit(self, *, dry_run: bool = False) -> OperationOutcome:
        """Append the audit entry the active deployment lacks under an `audit_repair` receipt."""
        if self.cache.pending() is not None:
            raise ActivationError(
                "release.activation_recovery_required", "a prepared activation is pending; run recover first"
            )
        pointer = self.cache.current()
        if pointer is None:
            return OperationOutcome("repair-audit", "nothing_active", dry_run)
        plan = dict(
            release_id=pointer.release_id,
            deployment_id=pointer.deployment_id,
            previous_release_id=pointer.previous_release_id,
            audit_sequence=pointer.audit_sequence,
        )
        audited = any(
            e.sequence == pointer.audit_sequence and e.release_id == pointer.release_id for e in self.cache.audit_log()
        )
        if audited:
            return OperationOutcome("repair-audit", "audit_complete", dry_run, **plan)
        bundle = self.cache.load(pointer.release_id).bundle
        if dry_run:
            self._require_current_grant(bundle)
            return OperationOutcome("repair-audit", "would_repair", True, **plan)
        receipt = self._activation_receipt(bundle, "audit_repair")
        entry = self.cache.repair_audit(receipt=receipt)
        return OperationOutcome(
            "repair-audit",
            "repaired" if entry is not None else "audit_complete",
            False,
            **plan,
            receipt_kind="audit_repair",
            receipt_digest=receipt.document_digest(),
        )

    def rollback(self, *, dry_run: bool = False) -> OperationOutcome:
        """Make the previous immutable deployment active again under a `rollback` receipt."""
        target = self.cache.previous_release()
        pointer = self.cache.current()
        bundle = self.cache.load(target).bundle
        if dry_run:
            self._require_current_grant(bundle)
            return OperationOutcome(
                "rollback",
                "would_roll_back",
                True,
                release_id=target,
                previous_release_id=pointer.release_id if pointer else None,
            )
        receipt = self._activation_receipt(bundle, "rollback")
        result = self.cache.rollback(receipt=receipt)
        return OperationOutcome(
            "rollback",
            "rolled_back",
            False,
            release_id=result.release_id,
            deployment_id=result.deployment_id,
            previous_release_id=result.previous_release_id,
            audit_sequence=result.audit_sequence,
            receipt_kind="rollback",
            receipt_digest=receipt.document_digest(),
        )

    # -- cleanup -----------------------------------------------------------------------------

    def gc(self, *, dry_run: bool = False) -> OperationOutcome:
        """Remove unreferenced registry blobs and abandoned cache staging under a cleanup receipt.

        Refused (`release.publication_in_progress`) while a publication or materialization holds a
        live lease; expired leases are removed and reported. A dry run takes no lease and lists.
        """
        receipt = self.issuer.issue_cleanup()
        self.issuer.require_cleanup(receipt)
        if dry_run:
            self.registry.leases.require_no_conflict("cleanup")
            found = {
                "blobs": self.registry.unreferenced_blobs(),
                "staging": self.cache.staging(),
                "expired_leases": [held.key for held in self.registry.leases.expired()],
            }
            action = "would_remove" if any(found.values()) else "nothing_to_remove"
            return OperationOutcome(
                "gc", action, True, receipt_kind="cleanup", receipt_digest=receipt.document_digest(), removed=found
            )
        with self.registry.leases.hold("cleanup"):
            blobs = self.registry.unreferenced_blobs()
            staging = self.cache.staging()
            expired = [held.key for held in self.registry.leases.expired()]
            self.issuer.require_cleanup(receipt, after_preparation=True)
            removed = {
                "blobs": self.registry.remove_unreferenced_blobs(blobs),
                "staging": self.cache.remove_staging(staging),
                "expired_leases": expired,
            }
            for key in expired:
                self.registry.leases.remove(key)
        action = "removed" if any(removed.values()) else "nothing_to_remove"
        return OperationOutcome(
            "gc", action, False, receipt_kind="cleanup", receipt_digest=receipt.document_digest(), removed=removed
        )

    def break_lease(self, lease_id: str, *, dry_run: bool = True, force: bool = False) -> OperationOutcome:
        """Remove one registry lease whose holder is provably gone, under a cleanup receipt.

        `gc` names the lease when it refuses with `release.lease_abandoned`. Refused while the holder
        runs on this host (`release.lease_holder_alive`) and, for a holder on another host or a
        lease naming no process, unless `force` and the lease has expired
        (`release.lease_holder_unverifiable`). A dry run checks all of that and removes nothing.
        """
        receipt = self.issuer.issue_cleanup()
        self.issuer.require_cleanup(receipt)
        result = self.registry.leases.break_lease(lease_id, dry_run=dry_run, force=force)
        action = "broken" if result.broken else "would_break"
        detail = [f"holder={result.holder}", f"holder_status={result.holder_status}", f"expired={result.expired}"]
        return OperationOutcome(
            "break-lease",
            action,
            dry_run,
            receipt_kind="cleanup",
            receipt_digest=receipt.document_digest(),
            removed={"leases": [result.lease_id], "lease": detail},
        )

    # -- authority ---------------------------------------------------------------------------

    def _require_current_grant(self, bundle: ReleaseBundle) -> tuple[bytes, GrantSignatures]:
        grant_bytes, signatures = self.grant.grant()
        if digest(DevelopmentGrant.KIND, grant_bytes) != bundle.parent.grant_digest:
            raise OperationError(
                "release.operation_grant_superseded",
                "the release was built under another grant than the one the authority location holds now",
            )
        return grant_bytes, signatures

    def _activation_receipt(self, bundle: ReleaseBundle, purpose: ActivationPurpose):
        grant_bytes, signatures = self._require_current_grant(bundle)
        authority = self.verify(grant_bytes, signatures, reconstructed_from(bundle, self.repository))
        return self.issuer.issue_activation(authority, deployment_projection(bundle, authority), purpose=purpose)
