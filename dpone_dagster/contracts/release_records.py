"""The closed records the registry and the local release cache persist next to a release.

- `MemberDigest`: one stored member of a release (path, plain SHA-256 of its bytes, size);
- `ReleaseCommit` (`dpone.release-commit.v1`): the registry object that makes a release visible,
  listing every member; written last, after every blob it names;
- `DeploymentRecord` (`dpone.deployment-record.v2`): written once inside an installed deployment:
  what was installed, under which grant, environment, authority expiry and revocation epoch, and
  when; every field, the authority fields included, is bound by its `integrity_subject`, so an
  edited record does not parse. `DeploymentRecordV1` reads records written before v2 (no subject:
  their authority fields are unverifiable, `authority_bound` is False);
- the paged forms, for a membership whose member list does not fit one canonical document (about
  20,000 members): `ReleaseMemberPage` (`dpone.release-member-page.v1`, a content-addressed slice
  of the member list), `PagedReleaseCommit` (`dpone.release-commit.v2`) and `PagedDeploymentRecord`
  (`dpone.deployment-record.v3`), which list page digests and the member count instead of members
  (`release.delivery.member_pages` cuts and reads the pages);
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
recompute it; it is tamper evidence for the cache directory, not a signature. A paged commit or
record says nothing about its members until its pages are read and verified; read the member list
through `member_pages.read_member_pages`, never from the document alone.
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
from dpone_dagster.contracts.release_pages import MAX_PAGES

COMMIT_SCHEMA = "dpone.release-commit.v1"
DEPLOYMENT_RECORD_SCHEMA = "dpone.deployment-record.v2"
DEPLOYMENT_RECORD_V1_SCHEMA = "dpone.deployment-record.v1"
DEPLOYMENT_SUBJECT_KIND = "dpone.deployment-record-subject.v1"
ACTIVATION_INTENT_SCHEMA = "dpone.activation-intent.v1"
CURRENT_POINTER_SCHEMA = "dpone.current-deployment.v1"
AUDIT_ENTRY_SCHEMA = "dpone.activation-audit-entry.v1"
MAX_MEMBERS = 50_000
COMMIT_V2_SCHEMA = "dpone.release-commit.v2"
DEPLOYMENT_RECORD_V3_SCHEMA = "dpone.deployment-record.v3"
MEMBER_PAGE_SCHEMA = "dpone.release-member-page.v1"
MAX_PAGED_MEMBERS = 250_000
"""Members a paged commit or record may list: 2.5x the 100,000 source members the default source
limits admit (`release/source/archive.py`), so every release those limits let through, with its
constituent documents and pages, is deliverable."""

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


class ReleaseMemberPage(ContractModel):
    """One content-addressed slice of a paged commit's or record's member list (path order)."""

    KIND = MEMBER_PAGE_SCHEMA

    schema_: Literal["dpone.release-member-page.v1"] = Field(default=MEMBER_PAGE_SCHEMA, alias="schema")
    members: ReleaseMembers


class _MemberPages(ContractModel):
    """The member list of a paged commit or record: how many members, on which pages (in order)."""

    member_count: PositiveCount = Field(le=MAX_PAGED_MEMBERS)
    member_pages: tuple[Digest, ...] = Field(min_length=1, max_length=MAX_PAGES)

    @model_validator(mode="after")
    def _pages_once(self) -> Self:
        if len(set(self.member_pages)) != len(self.member_pages):
            raise ValueError("a member page is listed twice")
        return self


class PagedReleaseCommit(_MemberPages):
    """The commit of a release whose member list does not fit one document: its identity and member pages."""

    KIND = COMMIT_V2_SCHEMA

    schema_: Literal["dpone.release-commit.v2"] = Field(default=COMMIT_V2_SCHEMA, alias="schema")
    release_id: Digest


class _DeploymentAuthority(ContractModel):
    """What an installed deployment records about itself, its member list aside (every record version)."""

    release_id: Digest
    deployment_id: Identifier
    environment: Name
    trust_tier: Literal["non_production"]
    grant_digest: Digest
    authority_expires_at: Timestamp
    revocation_epoch: Count
    installed_at: Timestamp


class _DeploymentFields(_DeploymentAuthority):
    """The fields of a record that lists its members itself (v1, v2)."""

    members: ReleaseMembers


class DeploymentRecordV1(_DeploymentFields):
    """A record written before v2: read for evidence only; its authority fields bind nothing."""

    KIND = DEPLOYMENT_RECORD_V1_SCHEMA
    authority_bound: ClassVar[bool] = False

    schema_: Literal["dpone.deployment-record.v1"] = Field(default=DEPLOYMENT_RECORD_V1_SCHEMA, alias="schema")


def deployment_subject(fields: dict[str, Any]) -> str:
    """The integrity subject of a v2 record: every field but the subject itself (persisted)."""
    return digest(DEPLOYMENT_SUBJECT_KIND, {key: value for key, value in fields.items() if key != "integrity_subject"})


class _BoundRecord(ContractModel):
    """A record whose every field is bound by `integrity_subject` (v2, v3); `_BODY` is its fields without it.

    Build one with `.bound(...)`; a record whose `integrity_subject` is not the digest of its other
    fields, or that claims installation at or after its authority's expiry, is invalid.
    """

    _BODY: ClassVar[type[ContractModel]]
    authority_bound: ClassVar[bool] = True

    integrity_subject: Digest

    @classmethod
    def bound(cls, **fields: Any) -> Self:
        """The record with its integrity subject computed over `fields` (validated once as the body)."""
        body = cls._BODY(**fields).model_dump(mode="json", by_alias=True)
        return cls(**fields, integrity_subject=deployment_subject({"schema": cls.KIND, **body}))

    @model_validator(mode="after")
    def _fields_are_bound(self) -> Self:
        if self.integrity_subject != deployment_subject(self.model_dump(mode="json", by_alias=True)):
            raise ValueError("integrity_subject is not the digest of the record's fields: the record was edited")
        if parse_timestamp(self.installed_at) >= parse_timestamp(self.authority_expires_at):
            raise ValueError("installed_at must be earlier than authority_expires_at")
        return self


class DeploymentRecord(_DeploymentFields, _BoundRecord):
    """Written once, inside an installed deployment: what was installed, under which authority, when."""

    KIND = DEPLOYMENT_RECORD_SCHEMA
    _BODY = _DeploymentFields

    schema_: Literal["dpone.deployment-record.v2"] = Field(default=DEPLOYMENT_RECORD_SCHEMA, alias="schema")


class _PagedDeploymentFields(_DeploymentAuthority, _MemberPages):
    """The fields of a record that lists its member pages (v3)."""


class PagedDeploymentRecord(_PagedDeploymentFields, _BoundRecord):
    """A v2 record whose members are on pages: the same authority fields, bound the same way.

    Its `integrity_subject` covers the member count and page digests, and each page is
    content-addressed, so the subject binds every member.
    """

    KIND = DEPLOYMENT_RECORD_V3_SCHEMA
    _BODY = _PagedDeploymentFields

    schema_: Literal["dpone.deployment-record.v3"] = Field(default=DEPLOYMENT_RECORD_V3_SCHEMA, alias="schema")


BoundDeploymentRecord = DeploymentRecord | PagedDeploymentRecord
BOUND_DEPLOYMENT_RECORDS = (DeploymentRecord, PagedDeploymentRecord)
"""The record types whose authority fields are bound (what activation may be checked against)."""


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
