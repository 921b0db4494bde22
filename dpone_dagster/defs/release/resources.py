"""The release resources: authority platform adapter, target admission, registry, cache and source.

Each resource is a small object over `ReleaseSettings`, handed to Dagster as a hard-coded resource:
it has no run configuration, on purpose. Dagster lets a launch override any configurable field, and
the pinned policy digest, the target environment and the registry location must never be something
a launchpad user can type. Tests pass their own objects under the same keys.

- `authority_platform`: original policy/grant/signature bytes from the authority location, the
  pinned digest from the protected target, and the `AuthorityPorts` verification runs on (durable
  rollback protection in the control store). In the embedded default it first creates the
  synthetic authority (`synthetic_bootstrap`); for a configured platform (`release:` in the
  configuration, see `settings.py`) it only reads what the platform placed.
- `target_admission`: the `ReceiptIssuer` for the protected target, with the protected target file
  as its current-target verifier (reopened before every protected operation).
- `release_registry` / `release_cache`: the immutable registry (local directory, or S3 through
  dagster-aws) and the local cache of the target environment.
- `release_source`: the source repository checkout or archive, and its repository and commit; on a
  configured platform the source read must be at the configured commit (`source_binding`).

What a reader could get wrong: `location_label` is what metadata shows; a local path is shown
relative to the project root (or as `<local directory>`), never as an absolute private path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from dpone_dagster.authority.ed25519 import Ed25519SignatureVerifier
from dpone_dagster.authority.ports import AuthorityPorts
from dpone_dagster.authority.sql_sequences import SqlAcceptedSequenceStore
from dpone_dagster.authority.target_admission import ReceiptIssuer
from dpone_dagster.clock import Clock, SystemClock
from dpone_dagster.config import load_config
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.grant import GrantSignatures
from dpone_dagster.control.store import open_store
from dpone_dagster.defs.release.synthetic_bootstrap import (
    GrantRenewal,
    ensure_synthetic_authority,
    renew_expired_synthetic_grant,
)
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.delivery.registry import ReleaseRegistry
from dpone_dagster.release.pipeline import ReleasePipeline, SourceIdentity
from dpone_dagster.release.platform.settings import ReleaseSettings
from dpone_dagster.release.platform.target import AuthorityBytes, AuthorityDocuments, ProtectedTarget, object_store
from dpone_dagster.release.ports import TargetAdmission
from dpone_dagster.release.source.binding import bind_source_commit
from dpone_dagster.release.source.snapshot import SourceTree, open_source
from dpone_dagster.release.state import ReleaseStateMachine


def location_label(location: str | Path) -> str:
    """A location as metadata may show it: S3 addresses as they are, local paths project-relative."""
    text = str(location)
    if text.startswith("s3://"):
        return text
    try:
        return Path(text).resolve().relative_to(load_config().project_root.resolve()).as_posix()
    except ValueError:
        return "<local directory>"


@dataclass
class AuthorityPlatform:
    settings: ReleaseSettings
    clock: Clock = field(default_factory=SystemClock)

    @property
    def protected(self) -> ProtectedTarget:
        return ProtectedTarget(self.settings.protected_target_file)

    def prepare(self) -> bool:
        """Create the synthetic authority in the embedded default; a no-op for a configured platform."""
        return ensure_synthetic_authority(self.settings, self.clock) if self.settings.synthetic else False

    def renew_expired_grant(self) -> GrantRenewal | None:
        """Embedded default only: renew an expired synthetic grant (logged; the grant stage shows it)."""
        return renew_expired_synthetic_grant(self.settings, self.clock) if self.settings.synthetic else None

    def pinned_policy_digest(self) -> str:
        return self.protected.read().policy_digest

    def _documents(self) -> AuthorityDocuments:
        return AuthorityDocuments(object_store(self.settings.authority_location, self.settings.storage))

    def policy(self) -> bytes:
        return self._documents().read_policy()

    def documents(self) -> AuthorityBytes:
        return self._documents().read()

    @staticmethod
    def signatures(data: bytes) -> GrantSignatures:
        return parse_document(GrantSignatures, data)

    def ports(self) -> AuthorityPorts:
        return AuthorityPorts(
            clock=self.clock,
            policies=self._documents(),
            epochs=self.protected,
            sequences=SqlAcceptedSequenceStore(open_store(self.settings.control_store_url)),
            signatures=Ed25519SignatureVerifier(),
        )


@dataclass
class TargetAdmissionResource:
    settings: ReleaseSettings
    clock: Clock = field(default_factory=SystemClock)

    def issuer(self) -> ReceiptIssuer:
        protected = ProtectedTarget(self.settings.protected_target_file)
        return ReceiptIssuer(protected.configuration(), protected, self.clock)


@dataclass
class ReleaseRegistryResource:
    settings: ReleaseSettings

    def registry(self) -> ReleaseRegistry:
        return ReleaseRegistry(object_store(self.settings.registry_location, self.settings.storage))

    @property
    def location_label(self) -> str:
        return location_label(self.settings.registry_location)


@dataclass
class ReleaseCacheResource:
    settings: ReleaseSettings
    clock: Clock = field(default_factory=SystemClock)

    def cache(self, admission: TargetAdmission) -> ReleaseCache:
        environment = ProtectedTarget(self.settings.protected_target_file).configuration().environment
        return ReleaseCache(self.settings.cache_root / environment, admission=admission, clock=self.clock)


@dataclass
class ReleaseSourceResource:
    settings: ReleaseSettings

    def open(self) -> SourceTree:
        """The verified source; a configured platform's source must be at the configured commit."""
        tree = open_source(self.settings.source_location)
        if not self.settings.synthetic:
            try:
                bind_source_commit(self.settings.source_location, tree, self.settings.source_commit)
            except BaseException:
                tree.close()
                raise
        return tree

    def identity(self) -> SourceIdentity:
        return SourceIdentity(repository=self.settings.source_repository, commit=self.settings.source_commit)


def release_pipeline(resources) -> tuple[ReleasePipeline, ReceiptIssuer]:
    """The pipeline service over the run's resources, and the receipt issuer it admits with."""
    authority: AuthorityPlatform = resources.authority_platform
    issuer = resources.target_admission.issuer()
    pipeline = ReleasePipeline(
        authority_ports=authority.ports(),
        pinned_policy_digest=authority.pinned_policy_digest(),
        registry=resources.release_registry.registry(),
        cache=resources.release_cache.cache(issuer),
        admission=issuer,
        clock=authority.clock,
        states=ReleaseStateMachine(open_store(authority.settings.control_store_url), authority.clock),
    )
    return pipeline, issuer


RESOURCE_KEYS = frozenset({"authority_platform", "target_admission", "release_registry", "release_cache", "release_source"})


def release_resources(settings: ReleaseSettings) -> dict[str, dg.ResourceDefinition]:
    """The release resources for `settings`, without run configuration (see the module docstring)."""
    described = {
        "authority_platform": (AuthorityPlatform(settings), f"Original policy, grant and signature bytes from {location_label(settings.authority_location)}; pinned policy digest from the protected target" + (" (SYNTHETIC embedded default)" if settings.synthetic else " (configured platform)")),
        "target_admission": (TargetAdmissionResource(settings), "Receipt issuer for the protected target; reopens its policy digest and revocation epoch before every protected operation"),
        "release_registry": (ReleaseRegistryResource(settings), f"Immutable release registry at {location_label(settings.registry_location)}"),
        "release_cache": (ReleaseCacheResource(settings), f"Local immutable release cache of the target environment at {location_label(settings.cache_root)}"),
        "release_source": (ReleaseSourceResource(settings), f"Source repository {settings.source_repository} at {settings.source_commit[:12]}"),
    }
    return {key: _fixed(value, description) for key, (value, description) in described.items()}


def _fixed(value: object, description: str) -> dg.ResourceDefinition:
    """A resource whose config schema is the empty shape: any run configuration is rejected."""
    return dg.ResourceDefinition(resource_fn=lambda _context: value, config_schema={}, description=description)
