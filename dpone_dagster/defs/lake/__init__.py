"""The lake domain: the `ducklake` resource, the fork-drop and fork-state observation jobs, the fork sensor.

`defs` is built on first access (PEP 562): the dbt assets import `DuckLakeResource` from this
package, and the fork sensor's default status and the jobs' `dpone/workspace` tag depend on the
configured workspace, which must be read when the code location loads, not whenever some test
first imports a submodule.
"""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def _defs() -> Any:
    from dagster import Definitions

    from dpone_dagster.integration.lake.jobs import build_drop_fork_job, build_fork_state_observation_job
    from dpone_dagster.integration.lake.maintenance import (
        build_fork_janitor_job,
        build_fork_janitor_sensor,
        build_lake_maintenance_job,
        build_lake_maintenance_schedule,
    )
    from dpone_dagster.integration.lake.promote import build_promote_fork_job
    from dpone_dagster.integration.lake.resources import ducklake_resource
    from dpone_dagster.integration.lake.sensors import build_fork_state_sensor

    maintenance_job, janitor_job = build_lake_maintenance_job(), build_fork_janitor_job()
    return Definitions(
        jobs=[build_drop_fork_job(), build_fork_state_observation_job(), maintenance_job, janitor_job, build_promote_fork_job()],
        sensors=[build_fork_state_sensor(), build_fork_janitor_sensor(janitor_job)],
        schedules=[build_lake_maintenance_schedule(maintenance_job)],
        resources={"ducklake": ducklake_resource()},  # the one object: dbt components merge it too
    )


def __getattr__(name: str) -> Any:
    if name == "defs":
        return _defs()
    raise AttributeError(name)
