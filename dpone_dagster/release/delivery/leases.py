"""Registry leases: publication and materialization hold one while they write; cleanup refuses then.

A lease is a `dpone.registry-lease.v2` object (`contracts.registry_leases`) under
`leases/<holder>-<hex>.json` of the registry's store, created with the store's atomic no-clobber
`put_if_absent` and deleted when the holder finishes. Every holder writes its own lease *first* and
only then looks at the others: a writer refuses when a live cleanup lease exists
(`release.cleanup_in_progress`), cleanup refuses when a live publication or materialization lease
exists (`release.publication_in_progress`). Because both sides write before they look, two that
start together cannot both miss each other (on a store with read-after-write consistency, as S3 and
a local directory are).

A lease names its holder process (host, boot, pid namespace, pid, start time; `lease_holders`). A
killed publication or install leaves its lease behind; a conflicting holder then refuses with
`release.lease_abandoned` when that process is provably gone, naming `dpone release break-lease`.
`break_lease` removes one only when its holder is provably gone, or, with `force`, when the lease
has expired and its holder cannot be seen from here (another host, a version 1 lease). A holder that
finishes successfully removes the leases its own killed attempts left (same holder kind, same
subject, holder provably gone): a successful retry releases what the killed attempt held.

What a reader could get wrong: a lease is abandoned, not held, once its `expires_at` has passed;
cleanup ignores expired leases and removes them, reporting them. A lease that cannot be read is
treated as held (fail closed) and is never broken here: an operator inspects and deletes it.
Nothing here is authority; a lease only serializes cleanup against writers. Version 1 leases (no
holder) are still read.
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
from dpone_dagster.contracts.registry_leases import LeaseHolderProcess, RegistryLeaseV2
from dpone_dagster.contracts.release_records import LeaseHolder, RegistryLease
from dpone_dagster.release.delivery.lease_holders import HolderStatus, holder_status, this_process
from dpone_dagster.release.ports import ObjectStore

LEASES = "leases/"
DEFAULT_LEASE_TTL = timedelta(hours=1)
WRITERS: frozenset[str] = frozenset({"publication", "materialization"})
BREAK_COMMAND = "dpone release break-lease"


class LeaseError(CodedError):
    codes = {
        "release.publication_in_progress": (
            "A publication or materialization holds a live registry lease; cleanup "
            "refused and removed nothing. Retry when it has finished (or its lease "
            "has expired)."
        ),
        "release.cleanup_in_progress": (
            "A cleanup holds a live registry lease; the publication or installation wrote "
            "nothing. Retry when the cleanup has finished."
        ),
        "release.lease_unreadable": (
            "A registry lease object cannot be read; it is treated as held. Inspect and "
            "delete it under leases/ if no operation is running."
        ),
        "release.lease_unavailable": (
            "The registry could not be reached to take or release a lease; nothing was changed."
        ),
        "release.lease_abandoned": (
            "A live registry lease was left by a process that is provably gone (killed "
            "publish or install); nothing changed. Run 'dpone release break-lease <lease-id> "
            "--dry-run', then without --dry-run; a successful retry of the killed operation "
            "also releases it."
        ),
        "release.lease_not_found": (
            "No registry lease has that id; nothing was broken. Copy the id from gc's "
            "release.lease_abandoned refusal, or list leases/ of the registry."
        ),
        "release.lease_holder_alive": (
            "The lease's holder process still runs on this host; the lease was not broken. "
            "Wait for it to finish or stop that process."
        ),
        "release.lease_holder_unverifiable": (
            "The lease's holder cannot be seen from this host (another host or pid "
            "namespace, or a lease that names no process); it was not broken. Run "
            "break-lease on the holder's host, or with --force once the lease has "
            "expired."
        ),
    }


@dataclass(frozen=True)
class HeldLease:
    key: str
    lease: RegistryLease | RegistryLeaseV2 | None

    @property
    def holder(self) -> str:
        return self.lease.holder if self.lease is not None else "(unreadable)"

    @property
    def lease_id(self) -> str:
        return self.key.removeprefix(LEASES).removesuffix(".json")

    @property
    def process(self) -> LeaseHolderProcess | None:
        return self.lease.process if isinstance(self.lease, RegistryLeaseV2) else None

    def status(self) -> HolderStatus:
        return holder_status(self.process)

    def describe(self) -> str:
        process = self.process
        who = f"pid {process.pid} on {process.host}" if process else "an unnamed process"
        return f"lease {self.lease_id} ({self.holder}, {who}, expires {self.lease.expires_at if self.lease else '?'})"


@dataclass(frozen=True)
class LeaseBreak:
    """What `break_lease` did or, with `dry_run`, would do."""

    lease_id: str
    holder: str
    holder_status: HolderStatus
    expired: bool
    forced: bool
    broken: bool


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
        return [held for held in self.all() if not self._expired(held)]

    def expired(self) -> list[HeldLease]:
        return [held for held in self.all() if held.lease is not None and self._expired(held)]

    def abandoned(self) -> list[HeldLease]:
        """Live leases whose holder process is provably gone (what break-lease may remove)."""
        return [held for held in self.live() if held.lease is not None and held.status() == "gone"]

    def require_no_conflict(self, holder: LeaseHolder, *, own_key: str | None = None) -> None:
        """Refuse when a live lease conflicts with `holder` (see the module docstring)."""
        for held in self.live():
            if held.key == own_key:
                continue
            if held.lease is None:
                raise LeaseError("release.lease_unreadable", f"lease {held.key} cannot be read; it is treated as held")
            conflicting = (holder == "cleanup" and held.lease.holder in WRITERS) or held.lease.holder == "cleanup"
            if conflicting and held.status() == "gone":
                raise LeaseError(
                    "release.lease_abandoned",
                    f"{held.describe()} was left by a process that is gone; break it with "
                    f"'{BREAK_COMMAND} {held.lease_id} --dry-run', then without --dry-run",
                )
            if holder == "cleanup" and held.lease.holder in WRITERS:
                raise LeaseError(
                    "release.publication_in_progress",
                    f"a {held.lease.holder} holds a lease until {held.lease.expires_at}; cleanup removed nothing",
                )
            if held.lease.holder == "cleanup":
                raise LeaseError(
                    "release.cleanup_in_progress", f"a cleanup holds a lease until {held.lease.expires_at}"
                )

    @contextmanager
    def hold(self, holder: LeaseHolder, *, subject: str | None = None) -> Iterator[RegistryLeaseV2]:
        """Write a lease for `holder`, refuse on conflict, delete it on exit (success or failure).

        On success, also remove the leases earlier killed attempts of the same holder kind on the
        same `subject` left behind (holder provably gone).
        """
        now = self.clock.now()
        lease = RegistryLeaseV2(
            holder=holder,
            lease_id=f"{holder}-{uuid.uuid4().hex}",
            acquired_at=format_timestamp(now),
            expires_at=format_timestamp(now + self.ttl),
            subject=subject,
            process=this_process(),
        )
        key = f"{LEASES}{lease.lease_id}.json"
        try:
            self.store.put_if_absent(key, lease.canonical_bytes())
        except Exception:
            raise LeaseError("release.lease_unavailable", f"the {holder} lease could not be written") from None
        try:
            self.require_no_conflict(holder, own_key=key)
            yield lease
            try:
                self._release_killed_attempts(lease, own_key=key)
            except LeaseError:
                pass  # housekeeping only: what stays behind is reported by gc and broken by break-lease
        finally:
            self.remove(key)

    def break_lease(self, lease_id: str, *, dry_run: bool = True, force: bool = False) -> LeaseBreak:
        """Remove one lease whose holder is provably gone (or, forced, expired and unverifiable)."""
        held = next((h for h in self.all() if h.lease_id == lease_id), None)
        if held is None:
            raise LeaseError("release.lease_not_found", f"no registry lease {lease_id!r}")
        if held.lease is None:
            raise LeaseError(
                "release.lease_unreadable", f"lease {lease_id} cannot be read; inspect and delete it by hand"
            )
        status, expired = held.status(), self._expired(held)
        if status == "alive":
            raise LeaseError("release.lease_holder_alive", f"{held.describe()}: its holder still runs on this host")
        if status == "unverifiable" and not (force and expired):
            reason = "it has not expired yet" if force else "pass --force once it has expired"
            raise LeaseError(
                "release.lease_holder_unverifiable",
                f"{held.describe()}: its holder cannot be seen from this host; {reason}",
            )
        if not dry_run:
            self.remove(held.key)
        return LeaseBreak(lease_id, held.holder, status, expired, forced=status != "gone", broken=not dry_run)

    def remove(self, key: str) -> None:
        try:
            self.store.delete(key)
        except Exception:
            raise LeaseError(
                "release.lease_unavailable", f"lease {key} could not be removed; it expires on its own"
            ) from None

    def _release_killed_attempts(self, lease: RegistryLeaseV2, *, own_key: str) -> None:
        for held in self.all():
            if (
                held.key != own_key
                and isinstance(held.lease, RegistryLeaseV2)
                and (held.lease.holder, held.lease.subject) == (lease.holder, lease.subject)
                and held.status() == "gone"
            ):
                self.remove(held.key)

    def _expired(self, held: HeldLease) -> bool:
        return held.lease is not None and parse_timestamp(held.lease.expires_at) <= self.clock.now()


def _parse(data: bytes) -> RegistryLease | RegistryLeaseV2 | None:
    for kind in (RegistryLeaseV2, RegistryLease):
        try:
            return parse_document(kind, data)
        except (CanonicalError, CodedError):
            continue
    return None
