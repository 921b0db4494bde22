"""The closed records the registry and the local release cache persist next to a release.

- `MemberDigest`: one stored member of a release (path, plain SHA-256 of its bytes, size);
- `ReleaseCommit` (`dpone.release-commit.v1`): the registry object that makes a release visible,
  listing every member; written last, after every blob it names;
- `DeploymentRecord` (`dpone.deployment-record.v1`): written once inside an installed deployment:
  what was installed, under which grant, environment and revocation epoch;
- `ActivationIntent` (`dpone.activation-intent.v1`): a prepared activation, present until audited;
- `CurrentPointer` (`dpone.current-deployment.v1`): the active deployment;
- `AuditEntry` (`dpone.activation-audit-entry.v1`): one line of the activation audit log,
  hash-chained to the line before by `previous_entry_sha256`;
- `RegistryLease` (`dpone.registry-lease.v1`): a publication, materialization or cleanup in
  flight, under `leases/` of the registry; cleanup refuses while another holder's lease is live.

All are canonical JSON read back with `parse_document(Model, bytes)` at a known storage path, so a
hand-edited or torn file is refused rather than half-understood. They are not in the dispatch table
(`contracts.dispatch`): nothing reads one without knowing which it expects. What a reader could get
wrong: none of them is authority. A record says what *was* installed; every change is still checked
against a fresh receipt, and the audit log is evidence, not permission. Their bytes are persisted:
any field change is a new schema version.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dpone_dagster.contracts.base import ContractModel
from dpone_dagster.contracts.bounds import (
    ContentSha256,
    Count,
    Digest,
    Identifier,
    LogicalPath,
    Name,
    PositiveCount,
    Timestamp,
    sorted_unique,
)

COMMIT_SCHEMA = "dpone.release-commit.v1"
DEPLOYMENT_RECORD_SCHEMA = "dpone.deployment-record.v1"
ACTIVATION_INTENT_SCHEMA = "dpone.activation-intent.v1"
CURRENT_POINTER_SCHEMA = "dpone.current-deployment.v1"
AUDIT_ENTRY_SCHEMA = "dpone.activation-audit-entry.v1"
MAX_MEMBERS = 50_000

ActivationAction = Literal["activate", "rollback"]
AuthorizedBy = Literal["activate", "pointer_recovery", "audit_repair", "rollback"]
LEASE_SCHEMA = "dpone.registry-lease.v1"
LeaseHolder = Literal["publication", "materialization", "cleanup"]


class MemberDigest(ContractModel):
    """One member of a stored release: path, plain SHA-256 of its bytes, size."""

    path: LogicalPath
    content_sha256: ContentSha256
    size: Count


ReleaseMembers = sorted_unique(MemberDigest, min_length=1, max_length=MAX_MEMBERS, key=lambda member: member.path)


class ReleaseCommit(ContractModel):
    """The object that makes a release visible: its identity and every member it consists of."""

    KIND = COMMIT_SCHEMA

    schema_: Literal["dpone.release-commit.v1"] = Field(default=COMMIT_SCHEMA, alias="schema")
    release_id: Digest
    members: ReleaseMembers


class DeploymentRecord(ContractModel):
    """Written once, inside an installed deployment: what was installed, under which authority."""

    KIND = DEPLOYMENT_RECORD_SCHEMA

    schema_: Literal["dpone.deployment-record.v1"] = Field(default=DEPLOYMENT_RECORD_SCHEMA, alias="schema")
    release_id: Digest
    deployment_id: Identifier
    environment: Name
    trust_tier: Literal["non_production"]
    grant_digest: Digest
    authority_expires_at: Timestamp
    revocation_epoch: Count
    installed_at: Timestamp
    members: ReleaseMembers


class _ActivationSubject(ContractModel):
    """What every activation record names: the release made active, its deployment, the one it replaced."""

    release_id: Digest
    deployment_id: Identifier
    previous_release_id: Digest | None


class ActivationIntent(_ActivationSubject):
    """A prepared activation: present from preparation until the audit entry is durable."""

    KIND = ACTIVATION_INTENT_SCHEMA

    schema_: Literal["dpone.activation-intent.v1"] = Field(default=ACTIVATION_INTENT_SCHEMA, alias="schema")
    action: ActivationAction
    audit_sequence: PositiveCount
    receipt_digest: Digest
    prepared_at: Timestamp


class CurrentPointer(_ActivationSubject):
    """The active deployment. `audit_sequence` is the audit entry that records this activation."""

    KIND = CURRENT_POINTER_SCHEMA

    schema_: Literal["dpone.current-deployment.v1"] = Field(default=CURRENT_POINTER_SCHEMA, alias="schema")
    audit_sequence: PositiveCount


class AuditEntry(_ActivationSubject):
    """One line of the activation audit log; `previous_entry_sha256` chains it to the line before."""

    KIND = AUDIT_ENTRY_SCHEMA

    schema_: Literal["dpone.activation-audit-entry.v1"] = Field(default=AUDIT_ENTRY_SCHEMA, alias="schema")
    sequence: PositiveCount
    previous_entry_sha256: ContentSha256
    action: ActivationAction
    authorized_by: AuthorizedBy
    receipt_digest: Digest
    recorded_at: Timestamp


class RegistryLease(ContractModel):
    """One operation in flight on a registry; abandoned once `expires_at` has passed."""

    KIND = LEASE_SCHEMA

    schema_: Literal["dpone.registry-lease.v1"] = Field(default=LEASE_SCHEMA, alias="schema")
    holder: LeaseHolder
    lease_id: Identifier
    acquired_at: Timestamp
    expires_at: Timestamp
