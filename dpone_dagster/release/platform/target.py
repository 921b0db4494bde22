"""Platform adapters behind the release resources: authority documents, protected target, object stores.

- `AuthorityDocuments` reads the original policy, grant and detached-signature bytes from the
  authority location (a directory or an S3 prefix) through an `ObjectStore`. It never parses them
  into authority: that is `dpone_dagster.authority.verify_grant`'s job.
- `ProtectedTarget` reads the protected target file: environment, trust tier, the pinned policy
  digest and the current revocation epoch. It reopens the file on every call, so it serves as the
  `CurrentTargetVerifier` (reopened immediately before each protected operation) and as the
  revocation-epoch source of both the authority verification and the standard runtime.
- `object_store(location, storage)` builds the local or S3 store for a location; S3 clients are
  boto3's, with credentials taken from the environment variables whose *names* the configuration
  holds (dagster-aws is not a dependency: a dg project's loader imports every installed component
  plugin on each load, and dagster-aws's costs seconds there, docs/scale.md).

What a reader could get wrong: a missing or unreadable protected target is never "no objection";
it raises `release.protected_target_unavailable` and everything downstream stops, fail closed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from dpone_dagster.authority.ports import CurrentTarget
from dpone_dagster.config import StorageConfig, resolve_secret
from dpone_dagster.contracts.base import ContractModel, parse_document
from dpone_dagster.contracts.bounds import Count, Digest, Name
from dpone_dagster.contracts.canonical import CanonicalError
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.target import TargetConfiguration, TrustTier
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore, S3Store
from dpone_dagster.release.ports import ObjectStore

POLICY_KEY = "policy.json"
GRANT_KEY = "grant.json"
SIGNATURES_KEY = "grant.signatures.json"
PROTECTED_TARGET_SCHEMA = "dpone.protected-target.v1"


class PlatformError(CodedError):
    codes = {
        "release.protected_target_unavailable": (
            "The protected target configuration (pinned policy digest, "
            "environment, tier, revocation epoch) is missing or unreadable; "
            "nothing was verified or written."
        ),
        "release.authority_documents_missing": (
            "The authority location holds no policy, grant or signature set; "
            "place the signed grant there (or use the embedded synthetic default)."
        ),
        "release.location_invalid": (
            "A configured location is neither a local directory nor an s3://bucket/prefix address."
        ),
    }


class ProtectedTargetDocument(ContractModel):
    """The protected target file. Written by the platform (or the synthetic bootstrap), never by users."""

    KIND = PROTECTED_TARGET_SCHEMA

    schema_: Literal["dpone.protected-target.v1"] = Field(default=PROTECTED_TARGET_SCHEMA, alias="schema")
    environment: Name
    trust_tier: TrustTier
    policy_digest: Digest
    revocation_epoch: Count
    synthetic: bool

    @property
    def target(self) -> TargetConfiguration:
        return TargetConfiguration(
            environment=self.environment, trust_tier=self.trust_tier, policy_digest=self.policy_digest
        )


@dataclass(frozen=True)
class ProtectedTarget:
    """Reopens the protected target file on every call."""

    path: Path

    def read(self) -> ProtectedTargetDocument:
        try:
            data = self.path.read_bytes()
        except OSError:
            raise PlatformError(
                "release.protected_target_unavailable", "the protected target configuration cannot be read"
            ) from None
        try:
            return parse_document(ProtectedTargetDocument, data)
        except (CanonicalError, CodedError) as error:
            raise PlatformError(
                "release.protected_target_unavailable", f"the protected target configuration is invalid ({error.code})"
            ) from None

    def configuration(self) -> TargetConfiguration:
        return self.read().target

    def current(self, target: TargetConfiguration) -> CurrentTarget:
        """`CurrentTargetVerifier`: the live pinned digest and epoch (the caller compares them)."""
        document = self.read()
        return CurrentTarget(policy_digest=document.policy_digest, revocation_epoch=document.revocation_epoch)

    def current_epoch(self, policy_digest: str | None = None, environment: str | None = None) -> int:
        """Revocation-epoch source for authority verification and for runtime admission alike."""
        return self.read().revocation_epoch

    def synthetic_target(self) -> bool:
        """True only when the platform declared this target synthetic: the one place synthetic-family
        tasks may be admitted by the standard runtime."""
        return self.read().synthetic


@dataclass(frozen=True)
class AuthorityBytes:
    policy: bytes
    grant: bytes
    signatures: bytes


@dataclass(frozen=True)
class AuthorityDocuments:
    """Original authority bytes from the authority location."""

    store: ObjectStore

    def read(self) -> AuthorityBytes:
        found = {key: self.store.get(key) for key in (POLICY_KEY, GRANT_KEY, SIGNATURES_KEY)}
        missing = sorted(key for key, value in found.items() if value is None)
        if missing:
            raise PlatformError(
                "release.authority_documents_missing", f"the authority location has no {', '.join(missing)}"
            )
        return AuthorityBytes(policy=found[POLICY_KEY], grant=found[GRANT_KEY], signatures=found[SIGNATURES_KEY])

    def read_policy(self) -> bytes:
        data = self.store.get(POLICY_KEY)
        if data is None:
            raise PlatformError("release.authority_documents_missing", f"the authority location has no {POLICY_KEY}")
        return data

    def policy_bytes(self, policy_digest: str) -> bytes:
        """`PolicySource`: the stored policy bytes (verify_policy checks them against the digest)."""
        return self.read_policy()


def object_store(location: str, storage: StorageConfig | None = None) -> ObjectStore:
    """A local directory store, or an S3 store for `s3://bucket/prefix`."""
    if location.startswith("s3://"):
        bucket, _, prefix = location.removeprefix("s3://").partition("/")
        if not bucket:
            raise PlatformError("release.location_invalid", "an s3:// location needs a bucket name")
        return S3Store(s3_client(storage), bucket, prefix.strip("/"))
    if "://" in location:
        raise PlatformError("release.location_invalid", "only local directories and s3:// locations are supported")
    return LocalDirectoryStore(Path(location))


def s3_client(storage: StorageConfig | None):
    """A boto3 S3 client for `storage`; credentials resolved by env-var name now (none named: boto3's chain)."""
    import boto3
    from botocore.config import Config

    storage = storage or StorageConfig()
    scheme = "https" if storage.use_ssl else "http"
    session = boto3.session.Session(
        region_name=storage.region,
        aws_access_key_id=resolve_secret(storage.key_id_env) if storage.key_id_env else None,
        aws_secret_access_key=resolve_secret(storage.secret_env) if storage.secret_env else None,
        aws_session_token=resolve_secret(storage.session_token_env) if storage.session_token_env else None,
    )
    return session.client(
        "s3",
        endpoint_url=f"{scheme}://{storage.endpoint}" if storage.endpoint else None,
        use_ssl=storage.use_ssl,
        config=Config(retries={"max_attempts": 5, "mode": "standard"}),
    )


def ensure_private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path
