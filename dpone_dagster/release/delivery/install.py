"""Installation: an immutable local release cache, a current pointer, an audit log, rollback and recovery.

Layout under the cache root (one root per target deployment environment):
- `deployments/<hex>/members/...` + `deployments/<hex>/deployment.json`: an installed release,
  written to `staging/` first, reread and verified, then renamed into place (never modified after);
  a member list too large for one record adds `deployments/<hex>/member-pages/<hex>.json` and a
  `dpone.deployment-record.v3` (`release.delivery.member_pages`); the record and its pages are built
  before the first byte is staged, so a membership that cannot be recorded writes nothing;
- `current`: the active deployment (`CurrentPointer`), replaced atomically;
- `activation.pending`: a prepared activation (`ActivationIntent`), present until it is audited;
- `audit.log`: one hash-chained `AuditEntry` per activation, append-only;
- `staging/`: what an interrupted materialization left; `gc` removes it under a cleanup lease.

Every protected step re-verifies its own receipt kind through the injected `TargetAdmission`
immediately before it writes: materialization before the cache write (after re-applying the combined
budget), activation before preparation, and again (`after_preparation=True`) both after preparation
and immediately before the pointer commit, each time after a full `open_bundle` validation of the
installed bytes. Each check names what the release is delivered under: the authority receipt when
materializing, the installed `dpone.deployment-record.v2` or `.v3` (authority fields bound) when
activating. Pointer-changing recovery, audit-only repair and rollback follow the same rule with
their own activation-receipt purposes (`pointer_recovery`, `audit_repair`, `rollback`); an
`activate` receipt never admits a rollback. Verified reading lives in `release.deployments`, the
cache's reading half (`CacheReader`, the state `ReleaseCache` extends) in
`release.delivery.cache_reading`; the operator entry points (receipts issued from the live grant) in
`release.operations`.

What a reader could get wrong: a failure after preparation is never retried blindly. The pending
intent stays, every other activation refuses with `release.activation_recovery_required`, and
`recover()` (with a `pointer_recovery` receipt) completes exactly the prepared activation. Reading
(`current`, `audit_log`, `load`, `deployments`) needs no receipt: expired or revoked authority blocks
new attempts, never the evidence.
"""

from __future__ import annotations

import hashlib
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from dpone_dagster.contracts.bounds import format_timestamp
from dpone_dagster.contracts.receipts import (
    ActivationReceipt,
    DevelopmentAuthorityReceipt,
    MaterializationReceipt,
)
from dpone_dagster.contracts.release_records import (
    ActivationAction,
    ActivationIntent,
    AuditEntry,
    AuthorizedBy,
    BoundDeploymentRecord,
    CurrentPointer,
)
from dpone_dagster.release.build.budget import require_within_budget
from dpone_dagster.release.build.bundle import ReleaseBundle, deployment_projection, open_bundle
from dpone_dagster.release.build.compose import require_authority
from dpone_dagster.release.delivery.cache_reading import CacheReader
from dpone_dagster.release.delivery.deployments import GENESIS, require_staged_exactly
from dpone_dagster.release.delivery.member_pages import Listed, record_documents
from dpone_dagster.release.errors import ActivationError, DurabilityUncertainError, IntegrityError, RegistryError

__all__ = ["ActivationResult", "MaterializationResult", "ReleaseCache"]


@dataclass(frozen=True)
class MaterializationResult:
    release_id: str
    deployment_id: str
    bytes_written: int
    already_installed: bool


@dataclass(frozen=True)
class ActivationResult:
    release_id: str
    deployment_id: str
    previous_release_id: str | None
    audit_sequence: int
    changed: bool


class ReleaseCache(CacheReader):
    """The local immutable cache of one target. All writes go through `files` (a fault-injection seam);
    the state and every read are `CacheReader`'s (`release.delivery.cache_reading`)."""

    # ------------------------------------------------------------------ materialization

    def materialize(
        self, bundle: ReleaseBundle, *, authority: DevelopmentAuthorityReceipt, receipt: MaterializationReceipt | None
    ) -> MaterializationResult:
        """Install `bundle` into the cache (idempotent). Nothing is written unless every check passes."""
        require_authority(authority)
        verified = open_bundle(bundle.members, expected_release_id=bundle.release_id)
        deployment_id = deployment_projection(verified, authority).deployment_id
        require_within_budget(
            workloads=verified.workload_count, source_bytes=verified.source_bytes, limits=authority.effective_limits
        )
        self.admission.require_current(
            receipt,
            MaterializationReceipt,
            release_id=verified.release_id,
            deployment_id=deployment_id,
            authority=authority,
        )
        final = self._deployment_dir(verified.release_id)
        if final.exists():
            self.load(verified.release_id)
            return MaterializationResult(verified.release_id, deployment_id, 0, already_installed=True)
        record = record_documents(
            verified.member_digests(),
            release_id=verified.release_id,
            deployment_id=deployment_id,
            environment=authority.environment,
            trust_tier="non_production",
            grant_digest=authority.grant_digest,
            authority_expires_at=authority.expires_at,
            revocation_epoch=authority.revocation_epoch,
            installed_at=format_timestamp(self.clock.now()),
        )
        written = self._stage_and_commit(verified, record, final)
        return MaterializationResult(verified.release_id, deployment_id, written, already_installed=False)

    def _stage_and_commit(self, bundle: ReleaseBundle, record: Listed, final: Path) -> int:
        staging = self.root / "staging" / f"{bundle.release_id.removeprefix('sha256:')[:16]}-{uuid.uuid4().hex}"
        staged: list[str] = []
        try:
            self.files.make_dirs(staging / "members")
            for path, data in sorted(bundle.members.items()):
                self.files.write_unsynced(staging / "members" / path, data)
                staged.append(path)
            for path, data in record.pages.items():
                self.files.write_unsynced(staging / path, data)
            self.files.write_unsynced(staging / "deployment.json", record.data)
            require_staged_exactly(staging, bundle, record)
            self.files.sync_tree(staging)  # the whole stage durable before the rename publishes it
            self.files.make_dirs(final.parent)
            self.files.rename_new(staging, final)
        except FileExistsError:
            shutil.rmtree(staging, ignore_errors=True)
            self.load(bundle.release_id)
            return 0
        except (IntegrityError, RegistryError, OSError) as error:
            shutil.rmtree(staging, ignore_errors=True)
            raise DurabilityUncertainError(
                f"installing into the local cache failed ({type(error).__name__}); the deployment is "
                f"{'present' if final.exists() else 'not present'}; retry the identical installation",
                release_id=bundle.release_id,
                stage="cache",
                written=staged,
                pending=sorted(set(bundle.members) - set(staged)),
            ) from None
        return bundle.total_bytes + len(record.data) + sum(len(data) for data in record.pages.values())

    # ------------------------------------------------------------------ activation

    def _admit_activation(
        self,
        receipt: ActivationReceipt | None,
        record: BoundDeploymentRecord,
        purpose: str,
        *,
        deployment_id: str | None = None,
        after_preparation: bool = False,
    ) -> None:
        """The live activation-receipt check for `record`'s release (and the deployment a pointer or intent names)."""
        self.admission.require_current(
            receipt,
            ActivationReceipt,
            release_id=record.release_id,
            deployment_id=deployment_id or record.deployment_id,
            authority=record,
            purpose=purpose,
            after_preparation=after_preparation,
        )

    def activate(self, release_id: str, *, receipt: ActivationReceipt | None) -> ActivationResult:
        """Move the current pointer to an installed release under an `activate` receipt."""
        return self._activate(release_id, receipt, "activate")

    def _activate(
        self, release_id: str, receipt: ActivationReceipt | None, action: ActivationAction
    ) -> ActivationResult:
        purpose: AuthorizedBy = "rollback" if action == "rollback" else "activate"
        if self.pending() is not None:
            raise ActivationError(
                "release.activation_recovery_required", "a prepared activation is pending; recover it first"
            )
        record = self._bound_record(release_id)
        deployment_id = record.deployment_id
        self._admit_activation(receipt, record, purpose)
        pointer = self.current()
        intent = self._intent(
            action,
            release_id,
            deployment_id,
            pointer.release_id if pointer else None,
            len(self.audit_log()) + 1,
            receipt,
        )
        try:
            self.files.create_exclusive(self._intent_path, intent.canonical_bytes())
        except FileExistsError:
            raise ActivationError(
                "release.activation_recovery_required", "another activation was prepared concurrently"
            ) from None
        except OSError:
            raise self._recovery_required("preparing the activation failed") from None
        self._complete(intent, receipt, authorized_by=purpose)
        return ActivationResult(
            release_id, deployment_id, intent.previous_release_id, intent.audit_sequence, changed=True
        )

    def rollback(self, *, receipt: ActivationReceipt | None) -> ActivationResult:
        """Activate the previous immutable deployment under a `rollback` receipt naming that release."""
        return self._activate(self.previous_release(), receipt, "rollback")

    def recover(self, *, receipt: ActivationReceipt | None) -> ActivationResult | None:
        """Complete a prepared activation under a `pointer_recovery` receipt; None when nothing is pending."""
        intent = self.pending()
        if intent is None:
            return None
        self._admit_activation(
            receipt, self._bound_record(intent.release_id), "pointer_recovery", deployment_id=intent.deployment_id
        )
        self._drop_torn_audit_tail()
        pointer = self.current()
        changed = pointer is None or pointer.release_id != intent.release_id
        self._complete(intent, receipt, authorized_by="pointer_recovery")
        return ActivationResult(
            intent.release_id, intent.deployment_id, intent.previous_release_id, intent.audit_sequence, changed
        )

    def _drop_torn_audit_tail(self) -> None:
        """Remove an incomplete last audit line (an append interrupted mid-write); recovery re-appends it."""
        if not self._audit_path.exists():
            return
        data = self._audit_path.read_bytes()
        if data and not data.endswith(b"\n"):
            try:
                self.files.truncate(self._audit_path, data.rfind(b"\n") + 1)
            except OSError:
                raise self._recovery_required("removing a torn audit line failed") from None

    def repair_audit(self, *, receipt: ActivationReceipt | None) -> AuditEntry | None:
        """Append the audit entry the active deployment lacks (audit-only repair); None when complete."""
        if self.pending() is not None:
            raise ActivationError(
                "release.activation_recovery_required", "a prepared activation is pending; recover it first"
            )
        pointer = self.current()
        if pointer is None:
            return None
        self._admit_activation(
            receipt, self._bound_record(pointer.release_id), "audit_repair", deployment_id=pointer.deployment_id
        )
        entries = self.audit_log()
        if any(e.sequence == pointer.audit_sequence and e.release_id == pointer.release_id for e in entries):
            return None
        self._validated(pointer.release_id, pointer.deployment_id, receipt, purpose="audit_repair")
        intent = self._intent(
            "activate",
            pointer.release_id,
            pointer.deployment_id,
            pointer.previous_release_id,
            pointer.audit_sequence,
            receipt,
        )
        return self._append_audit(intent, authorized_by="audit_repair", receipt_digest=receipt.document_digest())

    def _intent(
        self,
        action: ActivationAction,
        release_id: str,
        deployment_id: str,
        previous_release_id: str | None,
        audit_sequence: int,
        receipt: ActivationReceipt,
    ) -> ActivationIntent:
        return ActivationIntent(
            action=action,
            release_id=release_id,
            deployment_id=deployment_id,
            previous_release_id=previous_release_id,
            audit_sequence=audit_sequence,
            receipt_digest=receipt.document_digest(),
            prepared_at=format_timestamp(self.clock.now()),
        )

    def _complete(self, intent: ActivationIntent, receipt: ActivationReceipt, *, authorized_by: AuthorizedBy) -> None:
        """From a durable intent: validate, commit the pointer, append the audit entry, clear the intent."""
        purpose = authorized_by
        self._validated(intent.release_id, intent.deployment_id, receipt, purpose=purpose)
        pointer = CurrentPointer(
            release_id=intent.release_id,
            deployment_id=intent.deployment_id,
            previous_release_id=intent.previous_release_id,
            audit_sequence=intent.audit_sequence,
        )
        current = self.current()
        if current != pointer:
            self._validated(intent.release_id, intent.deployment_id, receipt, purpose=purpose)
            try:
                self.files.replace(self._current_path, pointer.canonical_bytes())
            except OSError:
                raise self._recovery_required("committing the current pointer failed") from None
        entries = self.audit_log()
        if not any(e.sequence == intent.audit_sequence for e in entries):
            self._append_audit(intent, authorized_by=authorized_by, receipt_digest=receipt.document_digest())
        try:
            self.files.remove(self._intent_path)
        except OSError:
            raise self._recovery_required("clearing the prepared activation failed") from None

    def _validated(self, release_id: str, deployment_id: str, receipt: ActivationReceipt, *, purpose: str) -> None:
        """Full sealed-projection + artifact-integrity validation, then the live receipt re-check."""
        try:
            record = self._bound_record(release_id)
        except (IntegrityError, ActivationError) as error:
            raise self._recovery_required(f"the installed deployment failed validation ({error.code})") from None
        if record.deployment_id != deployment_id:
            raise self._recovery_required("the installed deployment is not the prepared one")
        self._admit_activation(receipt, record, purpose, after_preparation=True)

    def _append_audit(
        self, intent: ActivationIntent, *, authorized_by: AuthorizedBy, receipt_digest: str
    ) -> AuditEntry:
        """Append the entry for `intent`, naming the receipt that authorized *this* step (`authorized_by`).

        Refuses unless the entry is exactly the next one: an activation whose log changed since it
        was prepared, and a repair whose log lost entries *before* the active one, both stop here."""
        entries = self.audit_log()
        if intent.audit_sequence != len(entries) + 1:
            raise ActivationError(
                "release.audit_log_corrupt", "the audit log changed or lost entries before this activation's"
            )
        previous = hashlib.sha256(self._audit_path.read_bytes().splitlines()[-1]).hexdigest() if entries else GENESIS
        entry = AuditEntry(
            sequence=intent.audit_sequence,
            previous_entry_sha256=previous,
            action=intent.action,
            authorized_by=authorized_by,
            release_id=intent.release_id,
            deployment_id=intent.deployment_id,
            previous_release_id=intent.previous_release_id,
            receipt_digest=receipt_digest,
            recorded_at=format_timestamp(self.clock.now()),
        )
        try:
            self.files.append(self._audit_path, entry.canonical_bytes() + b"\n")
        except OSError:
            raise self._recovery_required("appending the audit entry failed") from None
        return entry

    def _recovery_required(self, why: str) -> ActivationError:
        return ActivationError("release.activation_recovery_required", f"{why}; run activation recovery")
