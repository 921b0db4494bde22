"""The closed records the registry and the local release cache persist next to a release.

- `MemberDigest`: one stored member of a release (path, plain SHA-256 of its bytes, size);
- `ReleaseCommit` (`dpone.release-commit.v1`): the registry object that makes a release visible,
  listing every member; written last, after every blob it names;
- `DeploymentRecord` (`dpone.deployment-record.v2`): written once inside an installed deployment:
  what was installed, under which grant, environment, authority expiry and revocation epoch, and
  when; every field, the authority fields included, is bound by its `integrity_subject`, so an
  edited record does not parse. `DeploymentRecordV1` reads records written before v2 (no subject:
  their authority fields are unverifiable, `authority_bound` is False);
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
any field change is a new schema version. And the deployment record's `integrity_subject` is computed
from the record itself: it makes any hand edit fail to parse, but a writer who runs this code can
recompute it; it is tamper evidence for the cache directory, not a signature.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from pydantic import Field, model_validator

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
    parse_timestamp,
    sorted_unique,
)
from dpone_dagster.contracts.identity import digest

COMMIT_SCHEMA = "dpone.release-commit.v1"
DEPLOYMENT_RECORD_SCHEMA = "dpone.deployment-record.v2"
DEPLOYMENT_RECORD_V1_SCHEMA = "dpone.deployment-record.v1"
DEPLOYMENT_SUBJECT_KIND = "dpone.deployment-record-subject.v1"
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


class _DeploymentFields(ContractModel):
    """What an installed deployment records about itself (both record versions)."""

    release_id: Digest
    deployment_id: Identifier
    environment: Name
    trust_tier: Literal["non_production"]
    grant_digest: Digest
    authority_expires_at: Timestamp
    revocation_epoch: Count
    installed_at: Timestamp
    members: ReleaseMembers


class DeploymentRecordV1(_DeploymentFields):
    """A record written before v2: read for evidence only; its authority fields bind nothing."""

    KIND = DEPLOYMENT_RECORD_V1_SCHEMA
    authority_bound: ClassVar[bool] = False

    schema_: Literal["dpone.deployment-record.v1"] = Field(default=DEPLOYMENT_RECORD_V1_SCHEMA, alias="schema")


def deployment_subject(fields: dict[str, Any]) -> str:
    """The integrity subject of a v2 record: every field but the subject itself (persisted)."""
    return digest(DEPLOYMENT_SUBJECT_KIND, {key: value for key, value in fields.items() if key != "integrity_subject"})


class DeploymentRecord(_DeploymentFields):
    """Written once, inside an installed deployment: what was installed, under which authority, when.

    Build it with `DeploymentRecord.bound(...)`; a record whose `integrity_subject` is not the digest
    of its other fields, or that claims installation at or after its authority's expiry, is invalid.
    """

    KIND = DEPLOYMENT_RECORD_SCHEMA
    authority_bound: ClassVar[bool] = True

    schema_: Literal["dpone.deployment-record.v2"] = Field(default=DEPLOYMENT_RECORD_SCHEMA, alias="schema")
    integrity_subject: Digest

    @classmethod
    def bound(cls, **fields: Any) -> Self:
        """The record with its integrity subject computed over `fields`."""
        body = _DeploymentFields(**fields).model_dump(mode="json", by_alias=True)
        return cls(**fields, integrity_subject=deployment_subject({"schema": DEPLOYMENT_RECORD_SCHEMA, **body}))

    @model_validator(mode="after")
    def _fields_are_bound(self) -> DeploymentRecord:
        if self.integrity_subject != deployment_subject(self.model_dump(mode="json", by_alias=True)):
            raise ValueError("integrity_subject is not the digest of the record's fields: the record was edited")
        if parse_timestamp(self.installed_at) >= parse_timestamp(self.authority_expires_at):
            raise ValueError("installed_at must be earlier than authority_expires_at")
        return self


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
