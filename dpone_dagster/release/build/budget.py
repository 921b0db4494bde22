"""The combined delivery budget, and the cheap up-front check that a membership's parent can fit.

Effective limits are already the field-wise minimum of policy, grant and declared workload limits
(`DevelopmentAuthorityReceipt.effective_limits`). The budget is applied when composing, and again
immediately before the first registry write and before the local cache write, because the limits a
receipt carries are the ones in force for *that* operation.

`require_parent_can_fit(ordinary_workloads=n)` runs before anything is compiled or captured: a
count of the source's `flows/<dir>/` directories beyond `MAX_WORKLOADS` (the bound every grant and
every parent list obeys) is refused (`release.parent_too_large`) in a second instead of after a full
compile. Below it every membership fits: a parent too large for one canonical document
(`canonical.MAX_DOCUMENT_BYTES`) is written as a paged parent (`contracts/release_pages.py`), whose
`MAX_PAGES` pages of up to `pages.MAX_PAGE_BYTES` (4 GiB) hold far more than 10,000 flows' entries
(about 1.3 KB a generated flow; even a flow at its bound of 256 source files takes under 100 KB).

What a reader could get wrong: the byte budget counts the exact source files the release carries
(its sidecars), not the size of the compiled documents around them. The flow count is of
directories, so it can only over-count workloads the capture would find (a directory without a
flow manifest fails capture later), never under-count them.
"""

from __future__ import annotations

from collections.abc import Iterable

from dpone_dagster.contracts.bounds import MAX_WORKLOADS
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.policy import DeliveryLimits
from dpone_dagster.release.errors import BudgetExceededError


class ParentCapacityError(CodedError):
    codes = {
        "release.parent_too_large": (
            "The source holds more flow workloads than one release can deliver (10,000, the "
            "grant bound); refused before compile and capture, nothing built. Split the "
            "delivery into several releases."
        ),
    }


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


def require_parent_can_fit(*, ordinary_workloads: int) -> None:
    """Refuse a flow membership beyond the grant bound before anything is compiled (see the module docstring)."""
    if ordinary_workloads > MAX_WORKLOADS:
        raise ParentCapacityError(
            "release.parent_too_large",
            (
                f"{ordinary_workloads} flow workloads are more than one release delivers (at most {MAX_WORKLOADS} "
                "workloads)"
            ),
        )


def flow_directories(paths: Iterable[str], flows_root: str = "flows") -> int:
    """How many `flows/<dir>/` workload directories the source paths name (the cheap count)."""
    prefix = flows_root.rstrip("/") + "/"
    return len(
        {
            path[len(prefix) :].split("/", 1)[0]
            for path in paths
            if path.startswith(prefix) and "/" in path[len(prefix) :]
        }
    )
