"""Reading the local release cache of one target: its layout, the verified deployments, the current
pointer, a prepared activation, the audit log, the staging leftovers; no receipt needed.

`CacheReader` is the state and the reading half of `release.delivery.install.ReleaseCache` (the
layout is described there): the root, the injected `TargetAdmission`, the clock and the `LocalFiles`
seam every write goes through, and every method that only reads. Reading verifies what it reads
(`release.delivery.deployments`: the sealed projection and every byte of a deployment, the audit
log's hash chain); `remove_staging` deletes only what an interrupted materialization left, under the
caller's cleanup lease.

What a reader could get wrong: reading needs no receipt on purpose (expired or revoked authority
blocks new attempts, never the evidence), so nothing here admits anything. Every write that needs a
receipt (materialization, activation, rollback, recovery, audit repair) is in `install.py`, which
re-verifies its receipt through `admission` immediately before it writes; `_bound_record` only reads
the record such a check binds to.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from dpone_dagster.clock import Clock
from dpone_dagster.contracts.release_records import (
    BOUND_DEPLOYMENT_RECORDS,
    ActivationIntent,
    AuditEntry,
    BoundDeploymentRecord,
    CurrentPointer,
)
from dpone_dagster.release.delivery.deployments import InstalledRelease, read_audit_log, read_deployment
from dpone_dagster.release.delivery.deployments import read_document as _read_document
from dpone_dagster.release.errors import ActivationError, IntegrityError
from dpone_dagster.release.ports import TargetAdmission
from dpone_dagster.release.source.local_files import LocalFiles

__all__ = ["CacheReader"]


class CacheReader:
    """The local immutable cache of one target, read (no receipt). All writes go through `files` (a
    fault-injection seam); `install.ReleaseCache` adds the writes."""

    def __init__(
        self, root: Path, *, admission: TargetAdmission, clock: Clock, files: LocalFiles | None = None
    ) -> None:
        self.root = Path(root)
        self.admission = admission
        self.clock = clock
        self.files = files or LocalFiles()

    @property
    def _current_path(self) -> Path:
        return self.root / "current"

    @property
    def _intent_path(self) -> Path:
        return self.root / "activation.pending"

    @property
    def _audit_path(self) -> Path:
        return self.root / "audit.log"

    def _deployment_dir(self, release_id: str) -> Path:
        return self.root / "deployments" / release_id.removeprefix("sha256:")

    # ------------------------------------------------------------------ reading (no receipt needed)

    def load(self, release_id: str) -> InstalledRelease:
        """The installed deployment of `release_id`, fully re-verified (sealed projection + every byte)."""
        path = self._deployment_dir(release_id)
        if not path.is_dir():
            raise ActivationError("release.not_installed", "that release is not installed in this cache")
        return read_deployment(path, release_id)

    def _bound_record(self, release_id: str) -> BoundDeploymentRecord:
        """The installed record whose authority fields an activation is checked against; v1 binds none."""
        record = self.load(release_id).record
        if not isinstance(record, BOUND_DEPLOYMENT_RECORDS):
            raise IntegrityError(
                "release.integrity_mismatch",
                (
                    "the deployment record predates bound authority fields (v1); move the deployment aside "
                    "and install the release again"
                ),
            )
        return record

    def deployments(self) -> list[str]:
        root = self.root / "deployments"
        return sorted("sha256:" + item.name for item in root.iterdir()) if root.is_dir() else []

    def current(self) -> CurrentPointer | None:
        if not self._current_path.exists():
            return None
        pointer = _read_document(CurrentPointer, self._current_path)
        if pointer is None:
            raise IntegrityError("release.integrity_mismatch", "the current pointer is unreadable")
        return pointer

    def pending(self) -> ActivationIntent | None:
        if not self._intent_path.exists():
            return None
        intent = _read_document(ActivationIntent, self._intent_path)
        if intent is None:
            raise ActivationError(
                "release.activation_recovery_required", "a prepared activation is unreadable; recover it"
            )
        return intent

    def audit_log(self) -> list[AuditEntry]:
        """Every audit entry, with the hash chain verified; raise `release.audit_log_corrupt` if broken."""
        return read_audit_log(self._audit_path)

    def staging(self) -> list[str]:
        """Names under `staging/`: what an interrupted materialization left (never a deployment)."""
        root = self.root / "staging"
        return sorted(item.name for item in root.iterdir()) if root.is_dir() else []

    def remove_staging(self, names: list[str]) -> list[str]:
        """Remove the named staging entries (cleanup only; the caller holds the cleanup lease)."""
        removed = []
        for name in names:
            path = self.root / "staging" / name
            if path.parent != self.root / "staging" or not path.name or path.is_symlink():
                continue
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
            else:
                continue
            removed.append(name)
        return removed

    def previous_release(self) -> str:
        """The deployment active before the current one: what `rollback` selects."""
        pointer = self.current()
        if pointer is None or pointer.previous_release_id is None:
            raise ActivationError("release.no_previous_deployment", "there is no earlier deployment to roll back to")
        return pointer.previous_release_id
