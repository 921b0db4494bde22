"""The small ports development-authority verification depends on. Adapters implement them.

Verification reads no globals: the composition root injects a clock, the source of policy bytes,
the revocation-epoch source, the accepted-sequence store and the signature verifier. The one thing
a reader could get wrong: `AcceptedSequenceStore.accept` must be an atomic compare-and-set (refuse
when a higher sequence, or a different grant at the same sequence, is already recorded); checking
`highest` first and writing later is not enough when two verifiers race. The same store keeps the
revocation epoch's high-water mark beside the sequence (`RevocationEpochMarks.raise_epoch`), so an
epoch source rolled back (1 -> 0) is refused instead of re-accepting what epoch 1 revoked. Target
admission's port, `CurrentTargetVerifier` (the live policy digest and epoch), is here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from dpone_dagster.clock import Clock
from dpone_dagster.contracts.base import ContractModel
from dpone_dagster.contracts.bounds import Count, Digest
from dpone_dagster.contracts.target import TargetConfiguration


@runtime_checkable
class PolicySource(Protocol):
    def policy_bytes(self, policy_digest: str) -> bytes:
        """The stored bytes of the policy pinned as `policy_digest` (verified by the caller)."""
        ...


@runtime_checkable
class RevocationEpochSource(Protocol):
    def current_epoch(self, policy_digest: str, environment: str) -> int:
        """The revocation epoch in force now for grants under this policy and environment."""
        ...


@dataclass(frozen=True)
class AcceptedSequence:
    sequence: int
    grant_digest: str


@runtime_checkable
class RevocationEpochMarks(Protocol):
    def raise_epoch(self, policy_digest: str, environment: str, epoch: int) -> int:
        """Atomically raise the high-water mark of (policy, environment) to `epoch` if it is higher,
        and return the mark afterwards (never lower than `epoch`, never lowered by anyone)."""
        ...


@runtime_checkable
class AcceptedSequenceStore(RevocationEpochMarks, Protocol):
    def highest(self, policy_digest: str, environment: str) -> AcceptedSequence | None:
        """The highest grant sequence accepted so far for (policy, environment), or None."""
        ...

    def accept(self, policy_digest: str, environment: str, accepted: AcceptedSequence) -> bool:
        """Atomically record `accepted`; False if a higher sequence or a different grant at the same
        sequence is already recorded. Re-accepting the identical (sequence, grant) returns True."""
        ...


@runtime_checkable
class SignatureVerifier(Protocol):
    def verify(self, public_key: bytes, signature: bytes, message: bytes) -> bool:
        """True only if `signature` is a valid signature of `message` under `public_key`."""
        ...


class CurrentTarget(ContractModel):
    """The live policy digest and revocation epoch of a target, as the verifier reopened them."""

    policy_digest: Digest
    revocation_epoch: Count


@runtime_checkable
class CurrentTargetVerifier(Protocol):
    def current(self, target: TargetConfiguration) -> CurrentTarget:
        """Reopen the target's protected policy digest and current revocation epoch, now."""
        ...


@dataclass(frozen=True)
class AuthorityPorts:
    """Everything `verify_grant` needs from the outside world, injected together."""

    clock: Clock
    policies: PolicySource
    epochs: RevocationEpochSource
    sequences: AcceptedSequenceStore
    signatures: SignatureVerifier
