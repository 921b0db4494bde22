"""The release job: every stage of group `release` with its checks, in lineage order.

What a reader could get wrong: the job selects the whole group, so one launch verifies, composes,
publishes and installs; a blocking check that fails stops everything downstream of it. It runs in
one process on purpose: the stages are strictly sequential, and a process per step would load the
whole code location (dbt manifest included) ten times for no parallelism. "Materialize all" on the
group (the implicit asset job) runs the same way: the stages' `dpone/in_process` op tag makes the code
location's default executor run it in process and tag it `dpone/release` (`integration/binding.py`).
"""

from __future__ import annotations

import dagster as dg

from dpone_dagster.defs.release.assets import GROUP
from dpone_dagster.integration.binding import IN_PROCESS_EXECUTOR, workspace_tags

RELEASE_JOB_NAME = "release_job"

release_job = dg.define_asset_job(
    RELEASE_JOB_NAME,
    selection=dg.AssetSelection.groups(GROUP),
    description="Verify the development authority, compile and capture the source, compose, publish and "
    "install one immutable development release. Its workloads stay dormant.",
    tags={"dpone/release": "true", **workspace_tags()},
    executor_def=IN_PROCESS_EXECUTOR,
)
