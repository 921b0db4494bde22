"""Refusals of development-authority verification, each with a stable code and operator meaning.

The one thing a reader could get wrong: a port that fails (policy store down, epoch source raising)
is never treated as "no objection". Every such failure is `authority.unavailable` and verification
stops, fail closed; the underlying exception text is not propagated because it may carry paths or
connection strings.
"""

from __future__ import annotations

from dpone_dagster.contracts.coded import CodedError


class AuthorityError(CodedError):
    """The policy or grant does not confer development delivery authority."""

    codes = {
        "authority.policy_digest_mismatch": (
            "The policy bytes do not hash to the digest pinned in protected "
            "configuration. The policy store was altered or points at another "
            "policy; do not re-pin without review."
        ),
        "authority.grant_policy_mismatch": "The grant was issued under a different policy than the pinned one.",
        "authority.unknown_signer": (
            "A signature names a key that the pinned policy does not list. Remove the stray "
            "signature or update the policy through review."
        ),
        "authority.signature_invalid": (
            "A signature by a listed key does not verify over the grant bytes: the grant or the signature was altered."
        ),
        "authority.threshold_not_met": (
            "Fewer distinct policy keys signed the grant than the policy's threshold k; a "
            "key that signs twice counts once."
        ),
        "authority.environment_not_allowed": "The grant targets an environment the policy does not allow.",
        "authority.window_too_long": "The grant's validity window exceeds the policy maximum (never more than 7 days).",
        "authority.not_yet_valid": (
            "The grant's not_before is in the future; wait, or check the verifying host's clock."
        ),
        "authority.expired": (
            "The grant's expires_at has passed; obtain a new grant. Historical releases stay readable."
        ),
        "authority.revoked": "The grant's revocation epoch is older than the current epoch: it was revoked.",
        "authority.epoch_rollback": (
            "The revocation epoch in force now is lower than one already observed for this "
            "policy and environment: the epoch source was rolled back. Nothing is "
            "authorized; restore the epoch source, never lower the recorded mark."
        ),
        "authority.epoch_mismatch": (
            "The grant names a revocation epoch newer than the current one; the epoch source "
            "is behind or the grant is not from this authority."
        ),
        "authority.rollback": (
            "The grant's sequence is lower than one already accepted for this policy and "
            "environment (rollback protection)."
        ),
        "authority.sequence_conflict": (
            "A different grant was already accepted with the same sequence for this policy and environment."
        ),
        "authority.source_mismatch": (
            "The grant's repository or commit differs from the policy's repository or the "
            "independently reconstructed source."
        ),
        "authority.membership_mismatch": (
            "The workloads in the grant are not exactly the workloads reconstructed from source."
        ),
        "authority.budget_exceeded": (
            "The delivery exceeds the effective limits (the minimum of policy, grant and workload limits)."
        ),
        "authority.unavailable": (
            "A dependency of verification (policy, epoch or sequence store, clock, signature "
            "verifier) failed; nothing was authorized."
        ),
    }
