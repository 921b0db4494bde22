"""The base of every document model and the one strict path from bytes to a model.

`ContractModel` is frozen, closed (`extra="forbid"`) and dumps by alias; each document class names
its identity domain in `KIND`. `parse_document(cls, data)` is the only way bytes become a document:
strict canonical JSON first, then model validation, then a check that re-serializing the model
gives back exactly the input bytes. Validation failures become `ContractError` with stable codes,
whether they come from parsing or from constructing a model in Python.

The one thing a reader could get wrong: the `schema` field is spelled `schema_` in Python (pydantic's
`BaseModel` owns `schema`) and `schema` on the wire; always dump with `canonical_model_bytes`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from dpone_dagster.contracts.canonical import CanonicalError, loads_canonical
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.identity import canonical_model_bytes, digest


class ContractError(CodedError):
    """A document or model does not satisfy its closed contract."""

    codes = {
        "contract.unknown_field": (
            "The document carries a field its schema does not define. Closed documents never "
            "accept extras; the producer is newer or the document was altered."
        ),
        "contract.schema_mismatch": "The document's schema (or profile) is not the one this reader expects.",
        "contract.invalid": (
            "A field is missing, has the wrong type, or is outside its bounds; the message names the field."
        ),
    }


class ContractModel(BaseModel):
    """Frozen, closed, alias-serialized document model with a per-kind identity domain."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        hide_input_in_errors=True,
        revalidate_instances="never",
    )

    KIND: ClassVar[str] = ""

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise contract_error(error) from None

    def canonical_bytes(self) -> bytes:
        """RFC 8785 bytes of this document, fields by wire alias."""
        return canonical_model_bytes(self)

    def identity_kind(self) -> str:
        """The identity domain of this document: `KIND`, refined by profile where a schema has several."""
        if not self.KIND:
            raise TypeError(f"{type(self).__name__} is a component, not a document with an identity")
        return self.KIND

    def document_digest(self) -> str:
        """Domain-separated identity of this document."""
        return digest(self.identity_kind(), self)

    @classmethod
    def from_value(cls, value: object) -> Self:
        """Validate an already-parsed JSON value (dict) into this model, mapping failures to ContractError."""
        try:
            return cls.model_validate(value)
        except ValidationError as error:
            raise contract_error(error) from None


M = TypeVar("M", bound=ContractModel)


def parse_document(cls: type[M], data: bytes) -> M:
    """Strictly parse canonical bytes into `cls`; the model must re-serialize to exactly `data`."""
    value = loads_canonical(data)
    model = cls.from_value(value)
    if model.canonical_bytes() != bytes(data):
        raise CanonicalError("canonical.non_canonical", "document does not spell out every field of its schema")
    return model


def contract_error(error: ValidationError) -> ContractError:
    """Translate a pydantic ValidationError into a ContractError without echoing input values."""
    details = error.errors(include_input=False, include_url=False, include_context=False)
    first = details[0] if details else {"type": "invalid", "loc": (), "msg": "invalid"}
    location = ".".join(str(part) for part in first["loc"]) or "<document>"
    for item in details:
        if item["type"] == "literal_error" and tuple(item["loc"]) in (("schema",), ("profile",)):
            return ContractError("contract.schema_mismatch", f"field {item['loc'][0]!r}: {item['msg']}")
    for item in details:
        if item["type"] == "extra_forbidden":
            where = ".".join(str(part) for part in item["loc"])
            return ContractError("contract.unknown_field", f"unknown field {where!r}")
    return ContractError("contract.invalid", f"field {location!r}: {first['msg']} ({len(details)} problem(s))")
