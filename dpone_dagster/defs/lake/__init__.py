"""Dagster definitions for fork data environments: the `ducklake` resource and the fork-drop job."""

from __future__ import annotations

from dagster import Definitions

from dpone_dagster.defs.lake.jobs import drop_fork_job
from dpone_dagster.defs.lake.resources import DuckLakeResource

defs = Definitions(jobs=[drop_fork_job], resources={"ducklake": DuckLakeResource()})
