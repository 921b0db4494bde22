"""The lake domain of this code location: `fork_lake_definitions()`, as any adopter's location gets it.

`build_defs()` is how every domain of `dpone_dagster.defs` hands over its definitions (called once by
`dpone_dagster.definitions`): the `ducklake` resource, the drop/promote/observe/maintain/janitor jobs,
the fork-state and janitor sensors, the maintenance schedule and the workspace-binding executor. The
dbt domain's definitions carry the same objects (`fork_aware_dbt_definitions_for`); they merge as one.

What a reader could get wrong: the jobs' `dpone/workspace` tag and the fork sensor's default status
depend on the configured workspace, read when `build_defs()` is called (the code location's load),
not when this package is imported.
"""

from __future__ import annotations

from dagster import Definitions


def build_defs() -> Definitions:
    from dpone_dagster.integration.lake.definitions import fork_lake_definitions

    return fork_lake_definitions()
