"""Registry leases: publication and materialization hold one while they write; cleanup refuses then.

A lease is a `RegistryLease` object under `leases/<holder>-<hex>.json` of the registry's store,
created with the store's atomic no-clobber `put_if_absent` and deleted when the holder finishes.
Every holder writes its own lease *first* and only then looks at the others: a writer refuses when
a live cleanup lease exists (`release.cleanup_in_progress`), cleanup refuses when a live publication
or materialization lease exists (`release.publication_in_progress`). Because both sides write before
they look, two that start together cannot both miss each other (on a store with read-after-write
consistency, as S3 and a local directory are).

What a reader could get wrong: a lease is abandoned, not held, once its `expires_at` has passed (a
crashed run never deletes its lease); cleanup ignores abandoned leases and removes them, reporting
them. A lease that cannot be read is treated as held (fail closed): an operator inspects and deletes
it. Nothing here is authority; a lease only serializes cleanup against writers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from dpone_dagster.clock import Clock
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.bounds import format_timestamp, parse_timestamp
from dpone_dagster.contracts.canonical import CanonicalError
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.release_records import LeaseHolder, RegistryLease
from dpone_dagster.release.ports import ObjectStore

LEASES = "leases/"
DEFAULT_LEASE_TTL = timedelta(hours=1)
WRITERS: frozenset[str] = frozenset({"publication", "materialization"})


class LeaseError(CodedError):
    codes = {
        "release.publication_in_progress": "A publication or materialization holds a live registry lease; cleanup refused and removed nothing. Retry when it has finished (or its lease has expired).",
        "release.cleanup_in_progress": "A cleanup holds a live registry lease; the publication or installation wrote nothing. Retry when the cleanup has finished.",
        "release.lease_unreadable": "A registry lease object cannot be read; it is treated as held. Inspect and delete it under leases/ if no operation is running.",
        "release.lease_unavailable": "The registry could not be reached to take or release a lease; nothing was changed.",
    }


@dataclass(frozen=True)
class HeldLease:
    key: str
    lease: RegistryLease | None

    @property
    def holder(self) -> str:
        return self.lease.holder if self.lease is not None else "(unreadable)"


class Leases:
    """The leases of one registry store."""

    def __init__(self, store: ObjectStore, clock: Clock, ttl: timedelta = DEFAULT_LEASE_TTL) -> None:
        if ttl <= timedelta(0):
            raise ValueError("ttl must be positive")
        self.store, self.clock, self.ttl = store, clock, ttl

    def all(self) -> list[HeldLease]:
        try:
            found = [(key, self.store.get(key)) for key in list(self.store.keys(LEASES))]
        except Exception:
            raise LeaseError("release.lease_unavailable", "the registry leases could not be listed") from None
        return [HeldLease(key, _parse(data)) for key, data in found if data is not None]

    def live(self) -> list[HeldLease]:
        now = self.clock.now()
        return [held for held in self.all() if held.lease is None or parse_timestamp(held.lease.expires_at) > now]

    def expired(self) -> list[HeldLease]:
        now = self.clock.now()
        return [held for held in self.all() if held.lease is not None and parse_timestamp(held.lease.expires_at) <= now]

    def require_no_conflict(self, holder: LeaseHolder, *, own_key: str | None = None) -> None:
        """Refuse when a live lease conflicts with `holder` (see the module docstring)."""
        for held in self.live():
            if held.key == own_key:
                continue
            if held.lease is None:
                raise LeaseError("release.lease_unreadable", f"lease {held.key} cannot be read; it is treated as held")
            if holder == "cleanup" and held.lease.holder in WRITERS:
                raise LeaseError(
                    "release.publication_in_progress",
                    f"a {held.lease.holder} holds a lease until {held.lease.expires_at}; cleanup removed nothing",
                )
            if held.lease.holder == "cleanup":
                raise LeaseError("release.cleanup_in_progress", f"a cleanup holds a lease until {held.lease.expires_at}")

    @contextmanager
    def hold(self, holder: LeaseHolder) -> Iterator[RegistryLease]:
        """Write a lease for `holder`, refuse on conflict, delete it on exit (success or failure)."""
        now = self.clock.now()
        lease = RegistryLease(
            holder=holder,
            lease_id=f"{holder}-{uuid.uuid4().hex}",
            acquired_at=format_timestamp(now),
            expires_at=format_timestamp(now + self.ttl),
        )
        key = f"{LEASES}{lease.lease_id}.json"
        try:
            self.store.put_if_absent(key, lease.canonical_bytes())
        except Exception:
            raise LeaseError("release.lease_unavailable", f"the {holder} lease could not be written") from None
        try:
            self.require_no_conflict(holder, own_key=key)
            yield lease
        finally:
            self.remove(key)

    def remove(self, key: str) -> None:
        try:
            self.store.delete(key)
        except Exception:
            raise LeaseError("release.lease_unavailable", f"lease {key} could not be removed; it expires on its own") from None


def _parse(data: bytes) -> RegistryLease | None:
    try:
        return parse_document(RegistryLease, data)
    except (CanonicalError, CodedError):
        return None
