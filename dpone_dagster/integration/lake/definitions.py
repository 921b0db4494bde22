"""`fork_lake_definitions`: everything the fork-aware lake adds to a code location, in one call.

What a code location needs next to its DuckLake table assets, whoever builds them (the dbt factory,
`ForkAwareDbtProjectComponent`, this repository's `defs/lake`):
- the `ducklake` resource (`DuckLakeResource`, no run configuration) and the workspace-binding
  executor (`integration/binding.py`: every run checked against and stamped with the deployment's
  `dpone/workspace` before a step starts);
- the fork lifecycle jobs `create_fork_job` (the UI's fork dialog), `drop_fork_job`,
  `promote_fork_job`, `fork_state_observation_job`, `lake_maintenance_job`, `fork_janitor_job`; the
  sensors `fork_state_sensor`, `fork_janitor_sensor`; the schedule `lake_maintenance_schedule`;
- given assets, the `fork_staleness` and `diff_against_parent` checks on their DuckLake tables
  (`fork_lake_checks`).

What a reader could get wrong: the jobs, sensors and schedule are built once per deployment
workspace and handed out as the *same objects* on every call, like the `ducklake` resource and the
executor. `Definitions.merge` accepts a job, sensor, schedule, resource or executor defined in several
Definitions only when it is one object, so two dbt components and `defs/lake` merge into one code
location without a duplicate. The checks are not shared: each call builds its own, named after
`checks_prefix`, so two dbt projects in one location need two prefixes (the factory uses its op name).
A job that names its own executor (e.g. `release_job`) does not get the binding executor: it must use a
bound executor itself (`integration.binding.IN_PROCESS_EXECUTOR`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from dagster import (
    AssetChecksDefinition,
    AssetsDefinition,
    Definitions,
    JobDefinition,
    ScheduleDefinition,
    SensorDefinition,
)

from dpone_dagster.integration.binding import DEFAULT_EXECUTOR, deployment_workspace
from dpone_dagster.integration.lake.diff import build_diff_checks
from dpone_dagster.integration.lake.jobs import (
    build_create_fork_job,
    build_drop_fork_job,
    build_fork_state_observation_job,
)
from dpone_dagster.integration.lake.maintenance import (
    build_fork_janitor_job,
    build_fork_janitor_sensor,
    build_lake_maintenance_job,
    build_lake_maintenance_schedule,
)
from dpone_dagster.integration.lake.promote import build_promote_fork_job
from dpone_dagster.integration.lake.resources import ducklake_resource
from dpone_dagster.integration.lake.sensors import build_fork_state_sensor
from dpone_dagster.integration.lake.staleness import build_staleness_checks


@dataclass(frozen=True)
class _LakeObjects:
    jobs: tuple[JobDefinition, ...]
    sensors: tuple[SensorDefinition, ...]
    schedules: tuple[ScheduleDefinition, ...]


@cache
def _lake_objects(workspace: str) -> _LakeObjects:
    """The jobs, sensors and schedule of a deployment acting for `workspace` (their tags and default
    statuses depend on it), one set per process and workspace."""
    maintenance_job, janitor_job = build_lake_maintenance_job(), build_fork_janitor_job()
    return _LakeObjects(
        jobs=(
            build_create_fork_job(),
            build_drop_fork_job(),
            build_fork_state_observation_job(),
            maintenance_job,
            janitor_job,
            build_promote_fork_job(),
        ),
        sensors=(build_fork_state_sensor(workspace=workspace), build_fork_janitor_sensor(janitor_job)),
        schedules=(build_lake_maintenance_schedule(maintenance_job),),
    )


def fork_lake_checks(assets: Sequence[AssetsDefinition], *, checks_prefix: str = "") -> list[AssetChecksDefinition]:
    """`fork_staleness` and `diff_against_parent` on every DuckLake table asset of `assets`, as two
    multi-asset checks named `<checks_prefix>fork_staleness_checks` and `<checks_prefix>diff_against_parent_checks`."""
    return [
        build_staleness_checks(assets, name=f"{checks_prefix}fork_staleness_checks"),
        build_diff_checks(assets, name=f"{checks_prefix}diff_against_parent_checks"),
    ]


def fork_lake_definitions(assets: Sequence[AssetsDefinition] = (), *, checks_prefix: str = "") -> Definitions:
    """The lake domain for the deployment's workspace (see the module docstring), with the fork checks
    on the DuckLake tables of `assets` (the assets themselves are not included)."""
    shared = _lake_objects(deployment_workspace())
    return Definitions(
        asset_checks=fork_lake_checks(assets, checks_prefix=checks_prefix) if assets else None,
        jobs=list(shared.jobs),
        sensors=list(shared.sensors),
        schedules=list(shared.schedules),
        resources={"ducklake": ducklake_resource()},
        executor=DEFAULT_EXECUTOR,
    )
