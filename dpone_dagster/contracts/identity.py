"""Domain-separated document identities: `sha256:<64 hex>` over a per-kind prefix plus canonical bytes.

An identity is SHA-256 over `b"dpone:" + kind + b"\\x00" + canonical_bytes`. Because the kind is
part of the hashed input, the same canonical bytes yield a different digest for every kind, so a
digest of one kind can never be presented as the digest of another. This construction is persisted
in every release and receipt: it must never change.

The one thing a reader could get wrong: `digest(kind, some_bytes)` does not hash arbitrary bytes. It
requires the bytes to already be RFC 8785 canonical JSON and refuses anything else, so two spellings
of one document can never have two identities.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from pydantic import BaseModel

from dpone_dagster.contracts.canonical import dumps, loads_canonical
from dpone_dagster.contracts.coded import CodedError

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
_KIND = re.compile(r"^[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*$")
_MAX_KIND_LENGTH = 128
_DIGEST = re.compile(DIGEST_PATTERN)


class IdentityError(CodedError):
    """A digest was requested for an invalid kind or given something that is not a digest."""

    codes = {
        "identity.invalid_kind": "A document kind is not a short lowercase dotted name (a programming error).",
        "identity.invalid_digest": "A value that must be a digest is not of the form sha256:<64 lowercase hex>.",
    }


def canonical_model_bytes(model: BaseModel) -> bytes:
    """Canonical bytes of a pydantic model, dumped by field alias (so `schema_` is written `schema`)."""
    return dumps(model.model_dump(mode="json", by_alias=True))


def domain_prefix(kind: str) -> bytes:
    """The bytes hashed before the document for `kind`. Exposed for golden-vector tests."""
    if not isinstance(kind, str) or len(kind) > _MAX_KIND_LENGTH or not _KIND.fullmatch(kind):
        raise IdentityError("identity.invalid_kind", "document kind must be a short lowercase dotted name")
    return b"dpone:" + kind.encode("ascii") + b"\x00"


def digest(kind: str, value: BaseModel | bytes | Any) -> str:
    """Return `sha256:<hex>` identifying `value` as a document of `kind`.

    `value` may be a pydantic model, already-canonical bytes, or a JSON value (dict, list, ...).
    """
    prefix = domain_prefix(kind)
    if isinstance(value, BaseModel):
        body = canonical_model_bytes(value)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        body = bytes(value)
        loads_canonical(body)
    else:
        body = dumps(value)
    return _hashed(prefix, body)


def canonical_digest(kind: str, body: bytes) -> str:
    """`digest(kind, body)` for bytes the caller has already proven canonical (e.g. parsed with
    `parse_document`, which re-serializes them exactly): the same value without a second parse."""
    return _hashed(domain_prefix(kind), bytes(body))


def _hashed(prefix: bytes, body: bytes) -> str:
    return "sha256:" + hashlib.sha256(prefix + body).hexdigest()


def require_digest(value: str) -> str:
    """Return `value` if it is a well-formed `sha256:<64 lowercase hex>` string, else raise."""
    if not isinstance(value, str) or not _DIGEST.fullmatch(value):
        raise IdentityError("identity.invalid_digest", "expected a digest of the form sha256:<64 lowercase hex>")
    return value
