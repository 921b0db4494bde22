"""Receipts: the verified development authority, and the three operation receipts of target admission.

`DevelopmentAuthorityReceipt` is what `verify_grant` returns: everything a release service needs
from a verified policy + grant, and nothing secret. `PublicationReceipt`, `MaterializationReceipt`
and `ActivationReceipt` each admit one kind of protected operation for one exact release, deployment
and target; each has its own `schema` literal, so one can never be parsed, digested or accepted as
another. An `ActivationReceipt` also covers pointer-changing recovery and audit-only repair, named
by its `purpose`, and the rollback to the previous immutable deployment (`purpose: rollback`).
`CleanupReceipt` admits removing unreferenced registry blobs and abandoned cache staging of one
target: it binds no release (cleanup never touches a referenced object), only the target, its
pinned policy digest, the live revocation epoch and a short expiry.

Every receipt class is a `SealedReceipt`: it can carry a seal (an HMAC by the issuing process over
its canonical bytes, `dpone_dagster.authority.receipt_seal`) that is not part of the document. The
seal never reaches the wire, the identity or equality; a receipt built by hand, parsed from bytes,
or copied with changed fields carries no valid seal and is refused at every protected operation.

The one thing a reader could get wrong: holding a receipt is not enough. A receipt records the
policy digest and revocation epoch *at issue time*; `ReceiptIssuer.require_current` must re-check
both against the live target immediately before the operation, with the seal, the receipt's
lifetime, its verification time and the grant it was issued under.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field, PrivateAttr, model_validator

from dpone_dagster.contracts.base import ContractModel
from dpone_dagster.contracts.bounds import (
    MAX_SIGNERS,
    Count,
    Digest,
    Identifier,
    Name,
    RepositoryName,
    Timestamp,
    parse_timestamp,
    sorted_unique,
)
from dpone_dagster.contracts.grant import GrantScope
from dpone_dagster.contracts.policy import DeliveryLimits

AUTHORITY_RECEIPT_SCHEMA = "dpone.development-authority-receipt.v1"
PUBLICATION_RECEIPT_SCHEMA = "dpone.publication-receipt.v1"
MATERIALIZATION_RECEIPT_SCHEMA = "dpone.materialization-receipt.v1"
ACTIVATION_RECEIPT_SCHEMA = "dpone.activation-receipt.v1"
CLEANUP_RECEIPT_SCHEMA = "dpone.cleanup-receipt.v1"

ActivationPurpose = Literal["activate", "pointer_recovery", "audit_repair", "rollback"]


class SealedReceipt(ContractModel):
    """A receipt that may carry its issuer's seal: in memory only, never in its bytes or identity.

    Equality compares the documents alone, so a parsed copy equals the sealed original (and still
    carries no seal: only the issuing process can seal).
    """

    _seal: bytes | None = PrivateAttr(default=None)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BaseModel):
            return NotImplemented
        return type(other) is type(self) and self.model_dump() == other.model_dump()


class DevelopmentAuthorityReceipt(GrantScope, SealedReceipt):
    """The typed, secret-free result of verifying a policy and a threshold-signed grant."""

    KIND = AUTHORITY_RECEIPT_SCHEMA

    schema_: Literal["dpone.development-authority-receipt.v1"] = Field(default=AUTHORITY_RECEIPT_SCHEMA, alias="schema")
    authority_family: Literal["development"]
    purpose: Literal["development_delivery"]
    trust_tier: Literal["non_production"]
    policy_id: Name
    policy_digest: Digest
    grant_digest: Digest
    signature_subject_digest: Digest
    signer_key_ids: sorted_unique(Digest, min_length=1, max_length=MAX_SIGNERS)
    source_repository: RepositoryName
    effective_limits: DeliveryLimits
    verified_at: Timestamp


class _OperationReceipt(SealedReceipt):
    """Fields every operation receipt binds. Not a document on its own."""

    OPERATION: ClassVar[str] = ""

    release_id: Digest
    deployment_id: Identifier
    target_environment: Name
    trust_tier: Literal["non_production"]
    target_policy_digest: Digest
    grant_digest: Digest
    revocation_epoch: Count
    verified_at: Timestamp
    expires_at: Timestamp

    @model_validator(mode="after")
    def _expiry_after_verification(self) -> _OperationReceipt:
        if parse_timestamp(self.expires_at) <= parse_timestamp(self.verified_at):
            raise ValueError("expires_at must be later than verified_at")
        return self


class PublicationReceipt(_OperationReceipt):
    """Admits publishing one immutable release to the target's registry."""

    KIND = PUBLICATION_RECEIPT_SCHEMA
    OPERATION = "publish"

    schema_: Literal["dpone.publication-receipt.v1"] = Field(default=PUBLICATION_RECEIPT_SCHEMA, alias="schema")
    operation: Literal["publish"] = "publish"


class MaterializationReceipt(_OperationReceipt):
    """Admits installing one published release into the target's local cache."""

    KIND = MATERIALIZATION_RECEIPT_SCHEMA
    OPERATION = "materialize"

    schema_: Literal["dpone.materialization-receipt.v1"] = Field(default=MATERIALIZATION_RECEIPT_SCHEMA, alias="schema")
    operation: Literal["materialize"] = "materialize"


class ActivationReceipt(_OperationReceipt):
    """Admits changing the target's current pointer, recovering it, or an audit-only repair."""

    KIND = ACTIVATION_RECEIPT_SCHEMA
    OPERATION = "activate"

    schema_: Literal["dpone.activation-receipt.v1"] = Field(default=ACTIVATION_RECEIPT_SCHEMA, alias="schema")
    operation: Literal["activate"] = "activate"
    purpose: ActivationPurpose


class CleanupReceipt(SealedReceipt):
    """Admits garbage collection (unreferenced blobs, abandoned staging) on one target; binds no release."""

    KIND = CLEANUP_RECEIPT_SCHEMA
    OPERATION: ClassVar[str] = "cleanup"

    schema_: Literal["dpone.cleanup-receipt.v1"] = Field(default=CLEANUP_RECEIPT_SCHEMA, alias="schema")
    operation: Literal["cleanup"] = "cleanup"
    target_environment: Name
    trust_tier: Literal["non_production"]
    target_policy_digest: Digest
    revocation_epoch: Count
    verified_at: Timestamp
    expires_at: Timestamp

    @model_validator(mode="after")
    def _expiry_after_verification(self) -> CleanupReceipt:
        if parse_timestamp(self.expires_at) <= parse_timestamp(self.verified_at):
            raise ValueError("expires_at must be later than verified_at")
        return self


OperationReceipt = PublicationReceipt | MaterializationReceipt | ActivationReceipt
OPERATION_RECEIPT_TYPES: tuple[type[_OperationReceipt], ...] = (
    PublicationReceipt,
    MaterializationReceipt,
    ActivationReceipt,
)
