"""In-process adapters for the authority ports: for tests, the demo and single-process embedding.

The one thing a reader could get wrong: `InMemoryAcceptedSequenceStore` forgets everything when the
process exits, so it gives rollback protection only within one process. A long-lived deployment uses
`SqlAcceptedSequenceStore` (`dpone_dagster.authority.sql_sequences`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import datetime

from dpone_dagster.authority.ports import AcceptedSequence, CurrentTarget
from dpone_dagster.contracts.target import TargetConfiguration


class FixedClock:
    """A clock that always answers the moment it was given (tests and deterministic replays)."""

    def __init__(self, moment: datetime) -> None:
        if moment.tzinfo is None:
            raise ValueError("FixedClock needs a timezone-aware moment")
        self.moment = moment

    def now(self) -> datetime:
        return self.moment


class InMemoryPolicySource:
    """Policy bytes keyed by digest."""

    def __init__(self, policies: Mapping[str, bytes]) -> None:
        self._policies = dict(policies)

    def policy_bytes(self, policy_digest: str) -> bytes:
        try:
            return self._policies[policy_digest]
        except KeyError:
            raise LookupError("no stored policy for that digest") from None


class StaticRevocationEpochs:
    """A single revocation epoch for every (policy, environment); `revoke()` advances it."""

    def __init__(self, epoch: int = 0) -> None:
        self.epoch = epoch

    def current_epoch(self, policy_digest: str, environment: str) -> int:
        return self.epoch

    def revoke(self) -> int:
        self.epoch += 1
        return self.epoch


class InMemoryAcceptedSequenceStore:
    """Thread-safe compare-and-set of the highest accepted grant sequence per (policy, environment),
    and the revocation epoch's high-water mark beside it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._highest: dict[tuple[str, str], AcceptedSequence] = {}
        self._epochs: dict[tuple[str, str], int] = {}

    def raise_epoch(self, policy_digest: str, environment: str, epoch: int) -> int:
        key = (policy_digest, environment)
        with self._lock:
            self._epochs[key] = max(self._epochs.get(key, epoch), epoch)
            return self._epochs[key]

    def highest(self, policy_digest: str, environment: str) -> AcceptedSequence | None:
        with self._lock:
            return self._highest.get((policy_digest, environment))

    def accept(self, policy_digest: str, environment: str, accepted: AcceptedSequence) -> bool:
        key = (policy_digest, environment)
        with self._lock:
            current = self._highest.get(key)
            if current is not None and not _may_replace(current, accepted):
                return False
            self._highest[key] = accepted
            return True


def _may_replace(current: AcceptedSequence, candidate: AcceptedSequence) -> bool:
    if candidate.sequence > current.sequence:
        return True
    return candidate == current


class ControllableCurrentTarget:
    """A `CurrentTargetVerifier` whose live answers a test or the demo can change or break.

    `policy_digest` / `revocation_epoch` are what the "live" target reports; `broken = True` makes
    every call raise; `calls` counts how often admission consulted it.
    """

    def __init__(self, policy_digest: str, revocation_epoch: int = 0) -> None:
        self.policy_digest = policy_digest
        self.revocation_epoch = revocation_epoch
        self.broken = False
        self.calls = 0

    def current(self, target: TargetConfiguration) -> CurrentTarget:
        self.calls += 1
        if self.broken:
            raise ConnectionError("synthetic current-target verifier outage")
        return CurrentTarget(policy_digest=self.policy_digest, revocation_epoch=self.revocation_epoch)
