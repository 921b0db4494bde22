"""The combined delivery budget: workloads and source bytes against the effective limits.

Effective limits are already the field-wise minimum of policy, grant and declared workload limits
(`DevelopmentAuthorityReceipt.effective_limits`). The budget is applied when composing, and again
immediately before the first registry write and before the local cache write, because the limits a
receipt carries are the ones in force for *that* operation. What a reader could get wrong: the byte
budget counts the exact source files the release carries (its sidecars), not the size of the
compiled documents around them.
"""

from __future__ import annotations

from dpone_dagster.contracts.policy import DeliveryLimits
from dpone_dagster.release.errors import BudgetExceededError


def require_within_budget(*, workloads: int, source_bytes: int, limits: DeliveryLimits) -> None:
    if workloads > limits.max_workloads:
        raise BudgetExceededError(
            "release.budget_exceeded",
            f"the release delivers {workloads} workloads; the effective limit is {limits.max_workloads}",
        )
    if source_bytes > limits.max_source_bytes:
        raise BudgetExceededError(
            "release.budget_exceeded",
            f"the release carries {source_bytes} source bytes; the effective limit is {limits.max_source_bytes}",
        )
