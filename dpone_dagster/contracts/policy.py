"""The development policy (`dpone.development-policy.v1`): who may sign grants and within what limits.

A policy is never trusted because of where it was read from: its digest is pinned in protected
configuration and the bytes must hash to it (`dpone_dagster.authority.verify_policy`). It names the
Ed25519 signer keys and the threshold k of n, the environments grants may target, the one source
repository, the longest grant window and the delivery limits. The one thing a reader could get wrong:
a signer's `key_id` is not a free label; it is the domain-separated digest of the public key
(`signer_key_id`), so one key can never be listed twice under two names and counted twice.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictInt, model_validator

from dpone_dagster.contracts.base import ContractModel
from dpone_dagster.contracts.bounds import (
    MAX_GRANT_WINDOW_SECONDS,
    MAX_SIGNERS,
    Digest,
    Name,
    PositiveCount,
    PublicKeyHex,
    RepositoryName,
    WorkloadCount,
    sorted_unique,
)
from dpone_dagster.contracts.identity import digest

POLICY_SCHEMA = "dpone.development-policy.v1"
SIGNER_KEY_KIND = "dpone.signer-key.v1"
SOURCE_REPOSITORY_KIND = "dpone.source-repository.v1"


def signer_key_id(public_key_hex: str) -> str:
    """The identity of an Ed25519 public key (64 lowercase hex). Persisted: must never change."""
    return digest(SIGNER_KEY_KIND, {"algorithm": "ed25519", "public_key": public_key_hex})


def repository_digest(repository: str) -> str:
    """The identity of a source repository name, as grants and releases carry it. Persisted."""
    return digest(SOURCE_REPOSITORY_KIND, {"repository": repository})


class SignerKey(ContractModel):
    """One Ed25519 key allowed to sign grants under a policy."""

    key_id: Digest
    algorithm: Literal["ed25519"]
    public_key: PublicKeyHex

    @model_validator(mode="after")
    def _key_id_is_derived(self) -> SignerKey:
        if self.key_id != signer_key_id(self.public_key):
            raise ValueError("key_id must be signer_key_id(public_key)")
        return self


class DeliveryLimits(ContractModel):
    """Upper bounds on what one delivery may contain. Effective limits are the field-wise minimum."""

    max_workloads: WorkloadCount
    max_source_bytes: PositiveCount
    max_cpu_millicores: PositiveCount
    max_memory_bytes: PositiveCount

    @classmethod
    def tightest(cls, *limits: DeliveryLimits) -> DeliveryLimits:
        """Field-wise minimum of one or more limit sets."""
        if not limits:
            raise ValueError("tightest() needs at least one limit set")
        return cls(**{name: min(getattr(item, name) for item in limits) for name in cls.model_fields})


class DevelopmentPolicy(ContractModel):
    """Pinned-by-digest rules for development grants."""

    KIND = POLICY_SCHEMA

    schema_: Literal["dpone.development-policy.v1"] = Field(default=POLICY_SCHEMA, alias="schema")
    policy_id: Name
    signers: sorted_unique(SignerKey, min_length=1, max_length=MAX_SIGNERS, key=lambda key: key.key_id)
    threshold: Annotated[StrictInt, Field(ge=1, le=MAX_SIGNERS)]
    environments: sorted_unique(Name, min_length=1, max_length=64)
    source_repository: RepositoryName
    max_grant_validity_seconds: Annotated[StrictInt, Field(ge=1, le=MAX_GRANT_WINDOW_SECONDS)]
    limits: DeliveryLimits

    @model_validator(mode="after")
    def _threshold_within_signers(self) -> DevelopmentPolicy:
        if self.threshold > len(self.signers):
            raise ValueError("threshold cannot exceed the number of signers")
        return self

    def signer(self, key_id: str) -> SignerKey | None:
        """The listed signer with this key id, or None."""
        return next((key for key in self.signers if key.key_id == key_id), None)
