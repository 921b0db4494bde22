"""The development grant (`dpone.development-authority.v1`) and its detached signatures.

A grant says: under policy P, environment E may receive exactly these workloads from exactly this
repository commit, between `not_before` and `expires_at`, at revocation epoch R, as sequence number
S. Signers sign `signing_payload(grant_bytes)`: the grant's domain prefix followed by its canonical
bytes, so a signature over a grant can never be replayed as a signature over another document kind.

The one thing a reader could get wrong: `execution_subjects` are identity-bearing metadata only. They
record which runtime or pre-hook a *future* execution contract could name; delivering a release under
this grant never authorizes executing anything.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from dpone_dagster.contracts.base import ContractModel
from dpone_dagster.contracts.bounds import (
    MAX_SIGNERS,
    MAX_WORKLOADS,
    Count,
    Digest,
    GitCommit,
    Name,
    PositiveCount,
    SignatureHex,
    Timestamp,
    WorkloadCount,
    WorkloadId,
    parse_timestamp,
    sorted_unique,
)
from dpone_dagster.contracts.identity import domain_prefix

GRANT_SCHEMA = "dpone.development-authority.v1"
SIGNATURE_SET_SCHEMA = "dpone.development-authority-signatures.v1"


def signing_payload(grant_bytes: bytes) -> bytes:
    """The exact bytes a signer signs for a grant: domain prefix + canonical grant bytes."""
    return domain_prefix(GRANT_SCHEMA) + bytes(grant_bytes)


class ExecutionSubject(ContractModel):
    """A runtime or a pre-hook of one workload that a future execution contract could name."""

    workload: WorkloadId
    kind: Literal["runtime", "pre_hook"]
    hook_id: Name | None

    @model_validator(mode="after")
    def _hook_id_only_for_pre_hooks(self) -> ExecutionSubject:
        if (self.kind == "pre_hook") != (self.hook_id is not None):
            raise ValueError("hook_id is required for a pre_hook subject and forbidden for a runtime subject")
        return self

    def sort_key(self) -> tuple[str, str, str]:
        return (self.workload, self.kind, self.hook_id or "")


class GrantScope(ContractModel):
    """What a grant authorizes, shared verbatim by the grant and the verified authority receipt."""

    environment: Name
    source_repository_digest: Digest
    source_commit: GitCommit
    not_before: Timestamp
    expires_at: Timestamp
    revocation_epoch: Count
    sequence: PositiveCount
    native_membership: sorted_unique(WorkloadId, max_length=MAX_WORKLOADS)
    ordinary_membership: sorted_unique(WorkloadId, max_length=MAX_WORKLOADS)
    execution_subjects: sorted_unique(ExecutionSubject, max_length=MAX_WORKLOADS, key=ExecutionSubject.sort_key)

    @model_validator(mode="after")
    def _coherent(self) -> GrantScope:
        if parse_timestamp(self.expires_at) <= parse_timestamp(self.not_before):
            raise ValueError("expires_at must be later than not_before")
        native, ordinary = set(self.native_membership), set(self.ordinary_membership)
        if not native and not ordinary:
            raise ValueError("a grant must name at least one workload")
        if native & ordinary:
            raise ValueError("a workload cannot be both native and ordinary")
        if len(native) + len(ordinary) > MAX_WORKLOADS:
            raise ValueError(f"a grant names at most {MAX_WORKLOADS} workloads")
        if any(subject.workload not in native | ordinary for subject in self.execution_subjects):
            raise ValueError("every execution subject must name a member workload")
        return self

    @property
    def membership(self) -> frozenset[str]:
        return frozenset(self.native_membership) | frozenset(self.ordinary_membership)


class DevelopmentGrant(GrantScope):
    """A signed, bounded, expiring permission to deliver (never to execute) development workloads."""

    KIND = GRANT_SCHEMA

    schema_: Literal["dpone.development-authority.v1"] = Field(default=GRANT_SCHEMA, alias="schema")
    purpose: Literal["development_delivery"]
    trust_tier: Literal["non_production"]
    policy_digest: Digest
    max_workloads: WorkloadCount
    max_source_bytes: PositiveCount


class DetachedSignature(ContractModel):
    """One Ed25519 signature (hex) over `signing_payload(grant_bytes)` by the policy signer `key_id`."""

    key_id: Digest
    signature: SignatureHex

    def sort_key(self) -> tuple[str, str]:
        return (self.key_id, self.signature)


class GrantSignatures(ContractModel):
    """The detached signature set shipped next to a grant. Order is canonical; a key may repeat."""

    KIND = SIGNATURE_SET_SCHEMA

    schema_: Literal["dpone.development-authority-signatures.v1"] = Field(default=SIGNATURE_SET_SCHEMA, alias="schema")
    grant_digest: Digest
    signatures: sorted_unique(
        DetachedSignature, min_length=1, max_length=2 * MAX_SIGNERS, key=DetachedSignature.sort_key
    )
