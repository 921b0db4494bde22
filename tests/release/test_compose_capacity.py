"""The maximum release, part one (issue 20 #8): a membership whose parent cannot fit refuses before compile.

The refusal must come from the cheap count (flow directories of the snapshot), before dbt or flow
capture runs: the source here has no dbt project and flows that would not even capture, so any
later stage would fail with another code.
"""

from __future__ import annotations

import pytest

from dpone_dagster.contracts.canonical import MAX_DOCUMENT_BYTES
from dpone_dagster.release.build.budget import (
    ParentCapacityError,
    flow_directories,
    least_bytes_per_flow,
    require_parent_can_fit,
)
from dpone_dagster.release.pipeline import ReleasePipeline
from tests.release.fabricated import MemorySource


def flows_source(count: int) -> MemorySource:
    return MemorySource({f"flows/w{index:05d}/flow.yml": b"not a flow manifest" for index in range(count)})


def pipeline_without_ports() -> ReleasePipeline:
    """Nothing but the capacity check may run: every port is absent."""
    return ReleasePipeline(None, "sha256:" + "0" * 64, None, None, None, None)


@pytest.mark.parametrize("stage", ["compile_native", "capture_ordinary"])
def test_the_maximum_flow_membership_refuses_before_compile_and_capture(stage):
    source = flows_source(9_900)
    with pytest.raises(ParentCapacityError) as refused:
        getattr(pipeline_without_ports(), stage)(source)
    assert refused.value.code == "release.parent_too_large"
    assert "9900 flow workloads" in refused.value.message


def test_the_cap_is_where_the_shortest_valid_entries_pass_the_canonical_limit():
    fitting = MAX_DOCUMENT_BYTES // least_bytes_per_flow()
    require_parent_can_fit(ordinary_workloads=fitting)
    with pytest.raises(ParentCapacityError):
        require_parent_can_fit(ordinary_workloads=fitting + 1)
    require_parent_can_fit(ordinary_workloads=3_000)  # the real parent passes the cap near 3,200 flows: never refused here


def test_flow_directories_counts_workload_directories_only():
    paths = ["flows/a/flow.yml", "flows/a/sql/x.sql", "flows/b/flow.yml", "flows/README.md", "models/m.sql", "flowsx/c/f"]
    assert flow_directories(paths) == 2
