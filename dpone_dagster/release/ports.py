"""Small ports the release services depend on; adapters implement them, tests inject fakes.

What a reader could get wrong: `ObjectStore.put_if_absent` is the only write an adapter offers,
and it must be atomic and no-clobber (a reader never sees half an object, and an existing key is
never replaced). The registry's "commit object written last" guarantee rests on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable


@runtime_checkable
class ObjectStore(Protocol):
    """A flat, immutable key → bytes store (a local directory or an S3 prefix)."""

    def get(self, key: str) -> bytes | None:
        """The object's bytes, or None when the key is absent."""
        ...

    def exists(self, key: str) -> bool: ...

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Atomically create `key`; False (and nothing written) when it already exists."""
        ...

    def keys(self, prefix: str = "") -> Iterator[str]:
        """Every key under `prefix`, in lexicographic order."""
        ...

    def delete(self, key: str) -> None:
        """Remove `key` if present (cleanup of unreferenced blobs only; never a commit)."""
        ...


@runtime_checkable
class BatchedWrites(Protocol):
    """An `ObjectStore` that can make many content-addressed objects durable together (the local
    directory: one filesystem sync instead of two fsyncs per object)."""

    def batch(self) -> AbstractContextManager[None]:
        """Objects put inside the block appear, all durable, when it exits without an error."""
        ...


@runtime_checkable
class TargetAdmission(Protocol):
    """Re-verifies an operation receipt against the live target right before a protected step.

    `dpone_dagster.authority.target_admission.ReceiptIssuer` implements it. It must raise to refuse;
    with `after_preparation=True` every refusal means "recovery required". `authority` is what the
    release is delivered under: the verified authority receipt (publish, materialize) or the
    installed deployment's record (activation); the receipt's grant and expiry are checked against it.
    """

    def require_current(
        self,
        receipt: object,
        kind: type,
        *,
        release_id: str,
        deployment_id: str,
        authority: object,
        purpose: str | None = None,
        after_preparation: bool = False,
    ) -> object: ...
