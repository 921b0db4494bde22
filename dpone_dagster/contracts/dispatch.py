"""Closed family dispatch: bytes -> exactly one known document model, chosen by (schema, profile).

The set of readable documents is the fixed table `DOCUMENT_TYPES`; anything else is
`dispatch.unknown_document`. Each entry belongs to one family (`production`, `synthetic`,
`development`). `read_production_document` refuses every non-production document *before*
validating it with a production model, so no production validator ever has to learn about the
development family (and none grows a "development" flag).

The one thing a reader could get wrong: `profile` takes part in the dispatch key only for schemas
that have profiles (`dpone.release-set.v3`); for every other schema a `profile` member makes the
document unknown rather than being ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dpone_dagster.contracts.base import ContractModel, parse_document
from dpone_dagster.contracts.canonical import loads_canonical
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.grant import DevelopmentGrant, GrantSignatures
from dpone_dagster.contracts.policy import DevelopmentPolicy
from dpone_dagster.contracts.receipts import (
    ActivationReceipt,
    CleanupReceipt,
    DevelopmentAuthorityReceipt,
    MaterializationReceipt,
    PublicationReceipt,
)
from dpone_dagster.contracts.release_documents import (
    DEVELOPMENT_PROFILE,
    PRODUCTION_PROFILES,
    RELEASE_SET_V3_SCHEMA,
    SYNTHETIC_PROFILE,
    DbtDevelopmentReleaseSet,
    DevelopmentReleaseSetV3,
    ProductionCompositionV3,
    ProductionReleaseSetV1,
    ProductionReleaseSetV2,
    SyntheticCompositionV3,
)
from dpone_dagster.contracts.release_pages import (
    PAGED_DEVELOPMENT_PROFILE,
    DevelopmentReleasePage,
    PagedDevelopmentReleaseSetV3,
)

Family = Literal["production", "synthetic", "development"]
PROFILED_SCHEMAS = frozenset({RELEASE_SET_V3_SCHEMA})


class DispatchError(CodedError):
    codes = {
        "dispatch.unknown_document": (
            "The document's (schema, profile) is not one this version reads. It may come "
            "from a newer producer; upgrade rather than reinterpret it."
        ),
        "dispatch.family_refused": (
            "A reader for one family was given a document of another family (for example a "
            "development release handed to a production reader). Development releases are "
            "never production authority."
        ),
    }


@dataclass(frozen=True)
class DocumentType:
    schema: str
    profile: str | None
    family: Family
    model: type[ContractModel]


def _types() -> dict[tuple[str, str | None], DocumentType]:
    entries = [
        DocumentType("dpone.release-set.v1", None, "production", ProductionReleaseSetV1),
        DocumentType("dpone.release-set.v2", None, "production", ProductionReleaseSetV2),
        *(
            DocumentType(RELEASE_SET_V3_SCHEMA, profile, "production", ProductionCompositionV3)
            for profile in PRODUCTION_PROFILES
        ),
        DocumentType(RELEASE_SET_V3_SCHEMA, SYNTHETIC_PROFILE, "synthetic", SyntheticCompositionV3),
        DocumentType(RELEASE_SET_V3_SCHEMA, DEVELOPMENT_PROFILE, "development", DevelopmentReleaseSetV3),
        DocumentType(RELEASE_SET_V3_SCHEMA, PAGED_DEVELOPMENT_PROFILE, "development", PagedDevelopmentReleaseSetV3),
        DocumentType(DevelopmentReleasePage.KIND, None, "development", DevelopmentReleasePage),
        DocumentType(DbtDevelopmentReleaseSet.KIND, None, "development", DbtDevelopmentReleaseSet),
        DocumentType(DevelopmentPolicy.KIND, None, "development", DevelopmentPolicy),
        DocumentType(DevelopmentGrant.KIND, None, "development", DevelopmentGrant),
        DocumentType(GrantSignatures.KIND, None, "development", GrantSignatures),
        DocumentType(DevelopmentAuthorityReceipt.KIND, None, "development", DevelopmentAuthorityReceipt),
        DocumentType(PublicationReceipt.KIND, None, "development", PublicationReceipt),
        DocumentType(MaterializationReceipt.KIND, None, "development", MaterializationReceipt),
        DocumentType(ActivationReceipt.KIND, None, "development", ActivationReceipt),
        DocumentType(CleanupReceipt.KIND, None, "development", CleanupReceipt),
    ]
    return {(entry.schema, entry.profile): entry for entry in entries}


DOCUMENT_TYPES: dict[tuple[str, str | None], DocumentType] = _types()


def classify(data: bytes) -> DocumentType:
    """The closed document type of canonical `data`, from its `schema` and `profile` members alone."""
    value = loads_canonical(data)
    if not isinstance(value, dict) or not isinstance(value.get("schema"), str):
        raise DispatchError("dispatch.unknown_document", "the document has no schema member")
    schema = value["schema"]
    profile = value.get("profile")
    if schema in PROFILED_SCHEMAS:
        if not isinstance(profile, str):
            raise DispatchError("dispatch.unknown_document", f"{schema} documents need a profile")
        key: tuple[str, str | None] = (schema, profile)
    else:
        if "profile" in value:
            raise DispatchError("dispatch.unknown_document", f"{schema} documents have no profile")
        key = (schema, None)
    entry = DOCUMENT_TYPES.get(key)
    if entry is None:
        raise DispatchError("dispatch.unknown_document", "unknown document schema or profile")
    return entry


def read_document(data: bytes) -> ContractModel:
    """Read any known document of any family."""
    return parse_document(classify(data).model, data)


def read_family_document(data: bytes, family: Family) -> ContractModel:
    """Read a document only if it belongs to `family`; others are refused before model validation."""
    entry = classify(data)
    if entry.family != family:
        raise DispatchError("dispatch.family_refused", f"expected a {family} document, got a {entry.family} document")
    return parse_document(entry.model, data)


def read_production_document(data: bytes) -> ContractModel:
    """Read a production release document; every development and synthetic document is refused."""
    return read_family_document(data, "production")


def read_development_document(data: bytes) -> ContractModel:
    """Read a development-family document (release, policy, grant, signatures or receipt)."""
    return read_family_document(data, "development")


def family_of(document: ContractModel) -> Family:
    """The family of an already-read document."""
    for entry in DOCUMENT_TYPES.values():
        if type(document) is entry.model and (
            entry.profile is None or getattr(document, "profile", None) == entry.profile
        ):
            return entry.family
    raise DispatchError("dispatch.unknown_document", f"{type(document).__name__} is not a dispatchable document")
