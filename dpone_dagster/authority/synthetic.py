"""SYNTHETIC ONLY: deterministic keys, policies and signed grants for tests and the demo.

Every key here is derived from a public label, so anyone can recompute the private key: nothing this
module produces may ever be pinned as a real policy. Synthetic policies are recognizable: their
`policy_id` starts with `synthetic-`, their environments with `synthetic-` and their repository lives
under `example.invalid`. The one thing a reader could get wrong: this module is how tests get
*valid* authority; it is not a CLI and must never be wired to read user-written files into grants.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from dpone_dagster.authority.ed25519 import Ed25519SignatureVerifier
from dpone_dagster.authority.memory import (
    FixedClock,
    InMemoryAcceptedSequenceStore,
    InMemoryPolicySource,
    StaticRevocationEpochs,
)
from dpone_dagster.authority.ports import AuthorityPorts
from dpone_dagster.authority.verification import ReconstructedSource
from dpone_dagster.contracts.bounds import format_timestamp
from dpone_dagster.contracts.grant import (
    DetachedSignature,
    DevelopmentGrant,
    ExecutionSubject,
    GrantSignatures,
    signing_payload,
)
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.policy import (
    DeliveryLimits,
    DevelopmentPolicy,
    SignerKey,
    repository_digest,
    signer_key_id,
)

SYNTHETIC_PREFIX = "synthetic-"
SYNTHETIC_REPOSITORY = "example.invalid/synthetic/analytics"
SYNTHETIC_ENVIRONMENT = "synthetic-dev"
SYNTHETIC_COMMIT = "0123456789abcdef0123456789abcdef01234567"
SYNTHETIC_EPOCH_START = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)
SYNTHETIC_NATIVE = ("model.synthetic_shop.customers", "model.synthetic_shop.orders")
SYNTHETIC_ORDINARY = ("synthetic_transfer",)


class SyntheticSigner:
    """An Ed25519 key whose private half is derived from a public label. Synthetic only."""

    def __init__(self, label: str) -> None:
        seed = hashlib.sha256(b"dpone synthetic signer\x00" + label.encode()).digest()
        self.label = label
        self._private = Ed25519PrivateKey.from_private_bytes(seed)
        raw = self._private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.public_key_hex = raw.hex()
        self.key_id = signer_key_id(self.public_key_hex)

    @property
    def signer_key(self) -> SignerKey:
        return SignerKey(key_id=self.key_id, algorithm="ed25519", public_key=self.public_key_hex)

    def sign_bytes(self, grant_bytes: bytes) -> DetachedSignature:
        """Sign arbitrary grant bytes (tests use this to sign malformed grants on purpose)."""
        signature = self._private.sign(signing_payload(grant_bytes))
        return DetachedSignature(key_id=self.key_id, signature=signature.hex())


def synthetic_signers(count: int, prefix: str = "signer") -> list[SyntheticSigner]:
    return [SyntheticSigner(f"{prefix}-{index}") for index in range(count)]


def synthetic_limits(**overrides: int) -> DeliveryLimits:
    values = {
        "max_workloads": 100,
        "max_source_bytes": 50_000_000,
        "max_cpu_millicores": 2_000,
        "max_memory_bytes": 4 * 2**30,
    }
    return DeliveryLimits(**{**values, **overrides})


def synthetic_policy(
    signers: Sequence[SyntheticSigner],
    threshold: int,
    *,
    policy_id: str = "synthetic-policy",
    environments: Iterable[str] = (SYNTHETIC_ENVIRONMENT,),
    repository: str = SYNTHETIC_REPOSITORY,
    max_grant_validity_seconds: int = 7 * 24 * 3600,
    limits: DeliveryLimits | None = None,
) -> DevelopmentPolicy:
    if not policy_id.startswith(SYNTHETIC_PREFIX):
        raise ValueError("synthetic policy ids must start with 'synthetic-'")
    return DevelopmentPolicy(
        policy_id=policy_id,
        signers=sorted((signer.signer_key for signer in signers), key=lambda key: key.key_id),
        threshold=threshold,
        environments=sorted(set(environments)),
        source_repository=repository,
        max_grant_validity_seconds=max_grant_validity_seconds,
        limits=limits or synthetic_limits(),
    )


def synthetic_grant(policy: DevelopmentPolicy, **overrides: object) -> DevelopmentGrant:
    """A grant valid for 24 hours from `SYNTHETIC_EPOCH_START`, for the synthetic source; override any field."""
    values: dict[str, object] = {
        "purpose": "development_delivery",
        "trust_tier": "non_production",
        "policy_digest": policy.document_digest(),
        "environment": policy.environments[0],
        "source_repository_digest": repository_digest(policy.source_repository),
        "source_commit": SYNTHETIC_COMMIT,
        "not_before": format_timestamp(SYNTHETIC_EPOCH_START),
        "expires_at": format_timestamp(SYNTHETIC_EPOCH_START + timedelta(days=1)),
        "revocation_epoch": 0,
        "sequence": 1,
        "native_membership": list(SYNTHETIC_NATIVE),
        "ordinary_membership": list(SYNTHETIC_ORDINARY),
        "max_workloads": 10,
        "max_source_bytes": 10_000_000,
        "execution_subjects": [
            ExecutionSubject(workload=SYNTHETIC_ORDINARY[0], kind="pre_hook", hook_id="create_staging"),
            ExecutionSubject(workload=SYNTHETIC_ORDINARY[0], kind="runtime", hook_id=None),
        ],
    }
    values.update(overrides)
    return DevelopmentGrant(**values)


def sign_grant(grant_bytes: bytes, signers: Iterable[SyntheticSigner]) -> GrantSignatures:
    signatures = sorted((signer.sign_bytes(grant_bytes) for signer in signers), key=DetachedSignature.sort_key)
    return GrantSignatures(grant_digest=digest(DevelopmentGrant.KIND, grant_bytes), signatures=signatures)


def synthetic_source(**overrides: object) -> ReconstructedSource:
    values: dict[str, object] = {
        "repository": SYNTHETIC_REPOSITORY,
        "commit": SYNTHETIC_COMMIT,
        "native_membership": list(SYNTHETIC_NATIVE),
        "ordinary_membership": list(SYNTHETIC_ORDINARY),
        "source_bytes": 120_000,
        "peak_cpu_millicores": 500,
        "peak_memory_bytes": 2**30,
    }
    values.update(overrides)
    return ReconstructedSource(**values)


@dataclass
class SyntheticAuthority:
    """A complete synthetic authority: n signers, a k-of-n policy, and in-memory ports around it.

    `policy_options` are passed to `synthetic_policy` (environments, max_grant_validity_seconds, ...).
    """

    signer_count: int = 3
    threshold: int = 2
    now: datetime = SYNTHETIC_EPOCH_START + timedelta(hours=1)
    policy_options: dict[str, object] = field(default_factory=dict)
    signers: list[SyntheticSigner] = field(init=False)
    policy: DevelopmentPolicy = field(init=False)
    clock: FixedClock = field(init=False)
    epochs: StaticRevocationEpochs = field(init=False)
    sequences: InMemoryAcceptedSequenceStore = field(init=False)
    ports: AuthorityPorts = field(init=False)

    def __post_init__(self) -> None:
        self.signers = synthetic_signers(self.signer_count)
        self.policy = synthetic_policy(self.signers, self.threshold, **self.policy_options)  # type: ignore[arg-type]
        self.clock = FixedClock(self.now)
        self.epochs = StaticRevocationEpochs()
        self.sequences = InMemoryAcceptedSequenceStore()
        self.ports = AuthorityPorts(
            clock=self.clock,
            policies=InMemoryPolicySource({self.policy_digest: self.policy.canonical_bytes()}),
            epochs=self.epochs,
            sequences=self.sequences,
            signatures=Ed25519SignatureVerifier(),
        )

    @property
    def policy_digest(self) -> str:
        return self.policy.document_digest()

    def grant(self, **overrides: object) -> DevelopmentGrant:
        return synthetic_grant(self.policy, **overrides)

    def signed(
        self, grant: DevelopmentGrant | None = None, signers: int | None = None
    ) -> tuple[bytes, GrantSignatures]:
        """Canonical grant bytes and the signature set of the first `signers` keys (default: threshold)."""
        grant_bytes = (grant or self.grant()).canonical_bytes()
        return grant_bytes, sign_grant(grant_bytes, self.signers[: self.threshold if signers is None else signers])
