"""The release services over one release platform, composed in one place for Dagster and the CLI.

A release platform (`ReleaseSettings`) has five parts, one per place the release surface reads or
writes: the authority location with the protected target (`ReleaseAuthority`), the receipt issuer of
the protected target (`ReleaseAdmission`), the immutable registry (`ReleaseRegistryLocation`), the
local cache of the target environment (`ReleaseCacheLocation`) and the source checkout or archive
(`ReleaseSourceLocation`). `ReleasePlatform` holds the five; `ReleasePlatform.from_settings` builds
them from the settings alone.

`compose_release_services(platform)` is the one composition of the services over those parts: the
`ReleasePipeline` (one method per stage), the `ReceiptIssuer` it admits with, and the operator
`ReleaseOperations` (recover, repair-audit, rollback, gc). The code location's resources hand their
five objects to it (`dpone_dagster.defs.release.resources`); `dpone release recover|...` builds them
from the configured settings and calls it too, so a job and a command run the same objects.

What a reader could get wrong: every part reads its documents *when asked*, not when built (the
protected target is reopened for every issuer and cache); composing is therefore cheap to repeat and
is done per stage. The authority part creates nothing: the embedded default's synthetic authority is
this repository's code location's business (`defs/release/synthetic_bootstrap.py`), not a service.
`location_label` is what metadata shows; a local path is shown relative to the project root (or as
`<local directory>`), never as an absolute private path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dpone_dagster.authority.ed25519 import Ed25519SignatureVerifier
from dpone_dagster.authority.ports import AuthorityPorts
from dpone_dagster.authority.sql_sequences import SqlAcceptedSequenceStore
from dpone_dagster.authority.target_admission import ReceiptIssuer
from dpone_dagster.clock import Clock, SystemClock
from dpone_dagster.config import load_config
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.grant import GrantSignatures
from dpone_dagster.control.store import open_store
from dpone_dagster.release.delivery.install import ReleaseCache
from dpone_dagster.release.delivery.operations import ReleaseOperations
from dpone_dagster.release.delivery.registry import ReleaseRegistry
from dpone_dagster.release.pipeline import ReleasePipeline, SourceIdentity
from dpone_dagster.release.platform.settings import ReleaseSettings
from dpone_dagster.release.platform.target import AuthorityBytes, AuthorityDocuments, ProtectedTarget, object_store
from dpone_dagster.release.ports import TargetAdmission
from dpone_dagster.release.source.binding import open_bound_source
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
class ReleaseAuthority:
    """Original policy, grant and signature bytes from the authority location, the digest pinned in
    the protected target, and the `AuthorityPorts` verification runs on. Also the operations'
    `GrantSource`: `grant()` is the grant it holds now."""

    settings: ReleaseSettings
    clock: Clock = field(default_factory=SystemClock)

    @property
    def protected(self) -> ProtectedTarget:
        return ProtectedTarget(self.settings.protected_target_file)

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

    def grant(self) -> tuple[bytes, GrantSignatures]:
        documents = self.documents()
        return documents.grant, self.signatures(documents.signatures)

    def ports(self) -> AuthorityPorts:
        return AuthorityPorts(
            clock=self.clock,
            policies=self._documents(),
            epochs=self.protected,
            sequences=SqlAcceptedSequenceStore(open_store(self.settings.control_store_url)),
            signatures=Ed25519SignatureVerifier(),
        )


@dataclass
class ReleaseAdmission:
    """The `ReceiptIssuer` of the protected target, which it reopens before every protected operation;
    the revocation epoch's high-water mark it keeps is the control store's, the one verification raises."""

    settings: ReleaseSettings
    clock: Clock = field(default_factory=SystemClock)

    def issuer(self) -> ReceiptIssuer:
        protected = ProtectedTarget(self.settings.protected_target_file)
        marks = SqlAcceptedSequenceStore(open_store(self.settings.control_store_url))
        return ReceiptIssuer(protected.configuration(), protected, self.clock, epoch_marks=marks)


@dataclass
class ReleaseRegistryLocation:
    """The immutable release registry: a local directory, or S3 with the platform's storage."""

    settings: ReleaseSettings

    def registry(self) -> ReleaseRegistry:
        return ReleaseRegistry(object_store(self.settings.registry_location, self.settings.storage))

    @property
    def location_label(self) -> str:
        return location_label(self.settings.registry_location)


@dataclass
class ReleaseCacheLocation:
    """The local immutable release cache of the protected target's environment."""

    settings: ReleaseSettings
    clock: Clock = field(default_factory=SystemClock)

    def cache(self, admission: TargetAdmission) -> ReleaseCache:
        environment = ProtectedTarget(self.settings.protected_target_file).configuration().environment
        return ReleaseCache(self.settings.cache_root / environment, admission=admission, clock=self.clock)


@dataclass
class ReleaseSourceLocation:
    """The source checkout or archive, and the repository and commit it must be."""

    settings: ReleaseSettings

    def open(self) -> SourceTree:
        """The verified source; a configured platform's source must be at the configured commit."""
        if self.settings.synthetic:
            return open_source(self.settings.source_location)
        return open_bound_source(self.settings.source_location, self.settings.source_commit)

    def identity(self) -> SourceIdentity:
        return SourceIdentity(repository=self.settings.source_repository, commit=self.settings.source_commit)


@dataclass(frozen=True)
class ReleasePlatform:
    """The five parts of one release platform, as the composition takes them."""

    authority: ReleaseAuthority
    admission: ReleaseAdmission
    registry: ReleaseRegistryLocation
    cache: ReleaseCacheLocation
    source: ReleaseSourceLocation

    @classmethod
    def from_settings(cls, settings: ReleaseSettings, clock: Clock | None = None) -> ReleasePlatform:
        clock = clock or SystemClock()
        return cls(
            authority=ReleaseAuthority(settings, clock),
            admission=ReleaseAdmission(settings, clock),
            registry=ReleaseRegistryLocation(settings),
            cache=ReleaseCacheLocation(settings, clock),
            source=ReleaseSourceLocation(settings),
        )


@dataclass(frozen=True)
class ReleaseServices:
    pipeline: ReleasePipeline
    issuer: ReceiptIssuer
    operations: ReleaseOperations


def compose_release_services(platform: ReleasePlatform) -> ReleaseServices:
    """The pipeline, its receipt issuer and the operator operations over one platform's parts."""
    authority = platform.authority
    issuer = platform.admission.issuer()
    pipeline = ReleasePipeline(
        authority_ports=authority.ports(),
        pinned_policy_digest=authority.pinned_policy_digest(),
        registry=platform.registry.registry(),
        cache=platform.cache.cache(issuer),
        admission=issuer,
        clock=authority.clock,
        states=ReleaseStateMachine(open_store(authority.settings.control_store_url), authority.clock),
    )
    operations = ReleaseOperations(
        cache=pipeline.cache,
        registry=pipeline.registry,
        issuer=issuer,
        grant=authority,
        verify=pipeline.verify_authority,
        repository=authority.settings.source_repository,
    )
    return ReleaseServices(pipeline=pipeline, issuer=issuer, operations=operations)
