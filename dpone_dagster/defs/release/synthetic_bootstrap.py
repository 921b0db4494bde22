"""SYNTHETIC ONLY: the embedded default's authority, created on first use under the state directory.

When the release surface runs with no configuration (`ReleaseSettings.synthetic`), there is no
platform to pin a policy or sign a grant, so this module plays both parts with the synthetic keys of
`dpone_dagster.authority.synthetic` (derived from public labels: anyone can recompute them):

- the policy goes to the authority location and its digest to the protected target file (environment
  `synthetic-dev`, tier `non_production`, epoch 0, `synthetic: true`);
- a grant for exactly the source's workloads (native nodes from the prepared dbt manifest, ordinary
  workloads from flow capture), valid from now for three days, threshold-signed.

`ensure_synthetic_authority` writes what is missing (first use) and never renews. An expired grant
is renewed only by `renew_expired_synthetic_grant`, which the grant stage calls as its own visible
step: it logs a WARNING line and returns a `GrantRenewal` the stage shows as metadata (previous
sequence and expiry, new sequence and expiry). Until then an expired grant shows as expired.

What a reader could get wrong: nothing here runs unless the settings say `synthetic`, and a
configured platform never reaches this module. The synthetic grant is checked like any other: if
the source changes its workloads, verification refuses it (`authority.membership_mismatch`);
deleting the synthetic authority directory makes the next run sign a fresh one.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from filelock import FileLock

from dpone_dagster.authority.synthetic import (
    SYNTHETIC_ENVIRONMENT,
    sign_grant,
    synthetic_policy,
    synthetic_signers,
)
from dpone_dagster.clock import Clock
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.bounds import format_timestamp, parse_timestamp
from dpone_dagster.contracts.canonical import CanonicalError
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.grant import DevelopmentGrant, ExecutionSubject
from dpone_dagster.contracts.policy import DevelopmentPolicy, repository_digest
from dpone_dagster.errors import ConfigError
from dpone_dagster.release.build.flows import capture_ordinary
from dpone_dagster.release.build.native import WORKLOAD_RESOURCE_TYPES
from dpone_dagster.release.platform.settings import ReleaseSettings
from dpone_dagster.release.platform.target import (
    GRANT_KEY,
    POLICY_KEY,
    SIGNATURES_KEY,
    ProtectedTargetDocument,
    ensure_private_dir,
)
from dpone_dagster.release.source.snapshot import open_source

log = logging.getLogger(__name__)

SIGNER_COUNT = 3
THRESHOLD = 2
GRANT_VALIDITY = timedelta(days=3)
CLOCK_SKEW = timedelta(minutes=5)
LOCK_TIMEOUT_SECONDS = 300


@dataclass(frozen=True)
class GrantRenewal:
    """An expired synthetic grant replaced by the next sequence (what the grant stage shows)."""

    previous_sequence: int
    previous_expires_at: str
    sequence: int
    expires_at: str

    def line(self) -> str:
        return (
            f"SYNTHETIC authority: grant sequence {self.previous_sequence} expired at {self.previous_expires_at}; "
            f"renewed as sequence {self.sequence}, valid until {self.expires_at}"
        )


def ensure_synthetic_authority(settings: ReleaseSettings, clock: Clock) -> bool:
    """Create the synthetic policy, protected target and first grant if missing; True if written.

    Never renews an expired grant (see `renew_expired_synthetic_grant`). Serialized across processes
    by a lock file, so two runs starting together never sign two grants with the same sequence.
    """
    authority = _authority_dir(settings)
    with FileLock(str(authority.parent / "synthetic-authority.lock"), timeout=LOCK_TIMEOUT_SECONDS):
        return _ensure(settings, clock, authority)


def renew_expired_synthetic_grant(settings: ReleaseSettings, clock: Clock) -> GrantRenewal | None:
    """Sign the next synthetic grant if the current one has expired (or is within the clock skew).

    None when the grant is still valid or none exists yet. Logged as a WARNING when it renews.
    """
    authority = _authority_dir(settings)
    with FileLock(str(authority.parent / "synthetic-authority.lock"), timeout=LOCK_TIMEOUT_SECONDS):
        previous = _current_grant(authority / GRANT_KEY)
        now = clock.now()
        if previous is None or parse_timestamp(previous.expires_at) > now + CLOCK_SKEW:
            return None
        grant = _sign(settings, authority, now, sequence=previous.sequence + 1)
    renewal = GrantRenewal(previous.sequence, previous.expires_at, grant.sequence, grant.expires_at)
    log.warning(renewal.line())
    return renewal


def _authority_dir(settings: ReleaseSettings) -> Path:
    if not settings.synthetic or settings.authority_is_s3:
        raise ConfigError(
            "the synthetic bootstrap only signs into the embedded default's local directory",
            code="config.synthetic_authority_misplaced",
        )
    return ensure_private_dir(Path(settings.authority_location))


def _policy(settings: ReleaseSettings) -> DevelopmentPolicy:
    signers = synthetic_signers(SIGNER_COUNT, prefix="embedded-default")
    return synthetic_policy(
        signers, THRESHOLD, policy_id="synthetic-embedded-default", repository=settings.source_repository
    )


def _ensure(settings: ReleaseSettings, clock: Clock, authority: Path) -> bool:
    policy = _policy(settings)
    wrote = _write_if_absent(authority / POLICY_KEY, policy.canonical_bytes())
    if not settings.protected_target_file.exists():
        ensure_private_dir(settings.protected_target_file.parent)
        target = ProtectedTargetDocument(
            environment=SYNTHETIC_ENVIRONMENT,
            trust_tier="non_production",
            policy_digest=policy.document_digest(),
            revocation_epoch=0,
            synthetic=True,
        )
        settings.protected_target_file.write_bytes(target.canonical_bytes())
        wrote = True
    if _current_grant(authority / GRANT_KEY) is not None:
        return wrote
    grant = _sign(settings, authority, clock.now(), sequence=1)
    log.warning("SYNTHETIC authority: signed grant sequence %s for the embedded default", grant.sequence)
    return True


def _sign(settings: ReleaseSettings, authority: Path, now: datetime, *, sequence: int) -> DevelopmentGrant:
    signers = synthetic_signers(SIGNER_COUNT, prefix="embedded-default")
    policy = _policy(settings)
    target = parse_document(ProtectedTargetDocument, settings.protected_target_file.read_bytes())
    grant = _grant(settings, policy, target, now, sequence=sequence)
    grant_bytes = grant.canonical_bytes()
    signatures = sign_grant(grant_bytes, signers[:THRESHOLD])
    (authority / SIGNATURES_KEY).unlink(missing_ok=True)
    _replace(authority / GRANT_KEY, grant_bytes)
    _replace(authority / SIGNATURES_KEY, signatures.canonical_bytes())
    return grant


def _grant(
    settings: ReleaseSettings,
    policy: DevelopmentPolicy,
    target: ProtectedTargetDocument,
    now: datetime,
    *,
    sequence: int,
) -> DevelopmentGrant:
    native = _native_membership(settings)
    with open_source(settings.source_location) as tree:
        ordinary = capture_ordinary(tree, resource_ceiling=policy.limits) if tree.snapshot.under("flows") else None
    subjects = [ExecutionSubject(**subject) for subject in ordinary.execution_subjects()] if ordinary else []
    not_before = (now - CLOCK_SKEW).astimezone(UTC).replace(microsecond=0)
    return DevelopmentGrant(
        purpose="development_delivery",
        trust_tier="non_production",
        policy_digest=policy.document_digest(),
        environment=target.environment,
        source_repository_digest=repository_digest(settings.source_repository),
        source_commit=settings.source_commit,
        not_before=format_timestamp(not_before),
        expires_at=format_timestamp(not_before + GRANT_VALIDITY),
        revocation_epoch=target.revocation_epoch,
        sequence=sequence,
        native_membership=native,
        ordinary_membership=sorted(ordinary.pack_ids) if ordinary else [],
        max_workloads=max(1, len(native) + (len(ordinary.pack_ids) if ordinary else 0)),
        max_source_bytes=policy.limits.max_source_bytes,
        execution_subjects=sorted(subjects, key=ExecutionSubject.sort_key),
    )


def _native_membership(settings: ReleaseSettings) -> list[str]:
    """Writing nodes of the prepared dbt manifest of the source's root project (synthetic grant only)."""
    from dpone_dagster.integration.dbt.project import configured_dbt_project, prepare_manifest

    project = configured_dbt_project()
    if Path(project.project_dir).resolve() != settings.source_location.resolve():
        return []
    prepare_manifest(project)
    manifest = json.loads(Path(project.manifest_path).read_text(encoding="utf-8"))
    name = manifest["metadata"].get("project_name")
    return sorted(
        uid
        for uid, node in manifest["nodes"].items()
        if node["resource_type"] in WORKLOAD_RESOURCE_TYPES and node["package_name"] == name
    )


def _current_grant(path: Path) -> DevelopmentGrant | None:
    if not path.is_file():
        return None
    try:
        return parse_document(DevelopmentGrant, path.read_bytes())
    except (CanonicalError, CodedError):
        return None


def _write_if_absent(path: Path, data: bytes) -> bool:
    if path.exists():
        return False
    _replace(path, data)
    return True


def _replace(path: Path, data: bytes) -> None:
    staged = path.with_name(path.name + ".tmp")
    staged.write_bytes(data)
    staged.replace(path)
