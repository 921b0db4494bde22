"""The maximum release, part one (issue 20 #8): a flow membership beyond the grant bound refuses before compile.

The refusal must come from the cheap count (flow directories of the snapshot), before dbt or flow
capture runs: the source here has no dbt project and flows that would not even capture, so any
later stage would fail with another code. Up to the bound nothing is refused here: a parent too
large for one document is paged (tests/release/test_paged_parent.py).
"""

from __future__ import annotations

import pytest

from dpone_dagster.contracts.bounds import MAX_WORKLOADS
from dpone_dagster.release.build.budget import ParentCapacityError, flow_directories, require_parent_can_fit
from dpone_dagster.release.pipeline import ReleasePipeline
from tests.release.fabricated import MemorySource


def flows_source(count: int) -> MemorySource:
    return MemorySource({f"flows/w{index:05d}/flow.yml": b"not a flow manifest" for index in range(count)})


def pipeline_without_ports() -> ReleasePipeline:
    """Nothing but the capacity check may run: every port is absent."""
    return ReleasePipeline(None, "sha256:" + "0" * 64, None, None, None, None)


@pytest.mark.parametrize("stage", ["compile_native", "capture_ordinary"])
def test_a_flow_membership_beyond_the_grant_bound_refuses_before_compile_and_capture(stage):
    source = flows_source(MAX_WORKLOADS + 1)
    with pytest.raises(ParentCapacityError) as refused:
        getattr(pipeline_without_ports(), stage)(source)
    assert refused.value.code == "release.parent_too_large"
    assert f"{MAX_WORKLOADS + 1} flow workloads" in refused.value.message


def test_the_maximum_membership_is_not_refused_before_compile():
    require_parent_can_fit(ordinary_workloads=MAX_WORKLOADS)
    require_parent_can_fit(ordinary_workloads=9_900)  # 100 models + 9,900 flows: the design's maximum
    with pytest.raises(ParentCapacityError):
        require_parent_can_fit(ordinary_workloads=MAX_WORKLOADS + 1)


def test_flow_directories_counts_workload_directories_only():
    paths = [
        "flows/a/flow.yml",
        "flows/a/sql/x.sql",
        "flows/b/flow.yml",
        "flows/README.md",
        "models/m.sql",
        "flowsx/c/f",
    ]
    assert flow_directories(paths) == 2
