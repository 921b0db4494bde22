"""The closed documents the local release cache persists: deployment record, intent, pointer, audit entry.

All four are canonical JSON read back with `parse_document`, so a hand-edited or torn file is
refused rather than half-understood. What a reader could get wrong: none of them is authority. The
deployment record says which grant and environment a deployment was *installed* under (read back and
checked against the bundle, then against a fresh receipt before any change); the audit log is
evidence, hash-chained so that a removed or edited entry is detected.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dpone_dagster.contracts.base import ContractModel
from dpone_dagster.contracts.bounds import ContentSha256, Count, Digest, Identifier, Name, PositiveCount, Timestamp, sorted_unique
from dpone_dagster.release.bundle import MemberDigest

MAX_MEMBERS = 50_000
ActivationAction = Literal["activate", "rollback"]
AuthorizedBy = Literal["activate", "pointer_recovery", "audit_repair"]


class DeploymentRecord(ContractModel):
    """Written once, inside an installed deployment: what was installed, under which authority."""

    KIND = "dpone.deployment-record.v1"

    schema_: Literal["dpone.deployment-record.v1"] = Field(default="dpone.deployment-record.v1", alias="schema")
    release_id: Digest
    deployment_id: Identifier
    environment: Name
    trust_tier: Literal["non_production"]
    grant_digest: Digest
    authority_expires_at: Timestamp
    revocation_epoch: Count
    installed_at: Timestamp
    members: sorted_unique(MemberDigest, min_length=1, max_length=MAX_MEMBERS, key=lambda member: member.path)


class ActivationIntent(ContractModel):
    """A prepared activation: present from preparation until the audit entry is durable."""

    KIND = "dpone.activation-intent.v1"

    schema_: Literal["dpone.activation-intent.v1"] = Field(default="dpone.activation-intent.v1", alias="schema")
    action: ActivationAction
    release_id: Digest
    deployment_id: Identifier
    previous_release_id: Digest | None
    audit_sequence: PositiveCount
    receipt_digest: Digest
    prepared_at: Timestamp


class CurrentPointer(ContractModel):
    """The active deployment. `audit_sequence` is the audit entry that records this activation."""

    KIND = "dpone.current-deployment.v1"

    schema_: Literal["dpone.current-deployment.v1"] = Field(default="dpone.current-deployment.v1", alias="schema")
    release_id: Digest
    deployment_id: Identifier
    previous_release_id: Digest | None
    audit_sequence: PositiveCount


class AuditEntry(ContractModel):
    """One line of the activation audit log; `previous_entry_sha256` chains it to the line before."""

    KIND = "dpone.activation-audit-entry.v1"

    schema_: Literal["dpone.activation-audit-entry.v1"] = Field(default="dpone.activation-audit-entry.v1", alias="schema")
    sequence: PositiveCount
    previous_entry_sha256: ContentSha256
    action: ActivationAction
    authorized_by: AuthorizedBy
    release_id: Digest
    deployment_id: Identifier
    previous_release_id: Digest | None
    receipt_digest: Digest
    recorded_at: Timestamp
