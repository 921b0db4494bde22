"""The combined delivery budget, and the cheap up-front check that a membership's parent can fit.

Effective limits are already the field-wise minimum of policy, grant and declared workload limits
(`DevelopmentAuthorityReceipt.effective_limits`). The budget is applied when composing, and again
immediately before the first registry write and before the local cache write, because the limits a
receipt carries are the ones in force for *that* operation.

`require_parent_can_fit(ordinary_workloads=n)` runs before anything is compiled or captured: the
parent (`dpone.release-set.v3`, one canonical document under `canonical.MAX_DOCUMENT_BYTES`) holds
at least one ordinary constituent and one source sidecar per flow workload, so a count of the
source's `flows/<dir>/` directories gives a lower bound on its size. A membership whose lower bound
exceeds the cap is refused (`release.parent_too_large`) in a second instead of after a full compile.

What a reader could get wrong: the byte budget counts the exact source files the release carries
(its sidecars), not the size of the compiled documents around them. The fit check is a lower
bound (shortest valid ids, paths and names): it never refuses a parent that would fit, and a
membership just under it can still fail later in compose with `canonical.too_large`.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from dpone_dagster.contracts.canonical import MAX_DOCUMENT_BYTES
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.policy import DeliveryLimits
from dpone_dagster.contracts.release_documents import OrdinaryConstituent, SourceSidecar
from dpone_dagster.release.errors import BudgetExceededError


class ParentCapacityError(CodedError):
    codes = {
        "release.parent_too_large": "The source holds more flow workloads than one release parent can describe under the canonical document cap; refused before compile and capture, nothing built. Split the delivery into several releases.",
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
    """Refuse a membership whose parent cannot fit the canonical cap (a lower bound; see the module docstring)."""
    least = ordinary_workloads * least_bytes_per_flow()
    if least > MAX_DOCUMENT_BYTES:
        raise ParentCapacityError(
            "release.parent_too_large",
            f"{ordinary_workloads} flow workloads need a release parent of at least {least} bytes; "
            f"one parent holds at most {MAX_DOCUMENT_BYTES} (about {MAX_DOCUMENT_BYTES // least_bytes_per_flow()} flows)",
        )


def flow_directories(paths: Iterable[str], flows_root: str = "flows") -> int:
    """How many `flows/<dir>/` workload directories the source paths name (the cheap count)."""
    prefix = flows_root.rstrip("/") + "/"
    return len({path[len(prefix):].split("/", 1)[0] for path in paths if path.startswith(prefix) and "/" in path[len(prefix):]})


@cache
def least_bytes_per_flow() -> int:
    """Canonical bytes of the smallest valid ordinary constituent plus its smallest sidecar, with separators."""
    zero = "sha256:" + "0" * 64
    constituent = OrdinaryConstituent(
        constituent_id=zero, pack_id="a", selector="flow:a", dag_id="a", fingerprint=zero, dag_content_sha256="0" * 64, hook_ids=()
    )
    sidecar = SourceSidecar(constituent_id=zero, path="a", content_sha256="0" * 64, size=0)
    return len(constituent.canonical_bytes()) + 1 + len(sidecar.canonical_bytes()) + 1
