"""The dbt domain of this code location: dbt_project_synthetic through the integration package.

`build_defs()` is how every domain of `dpone_dagster.defs` hands over its definitions (called once by
`dpone_dagster.definitions`): here the synthetic project's unpartitioned and daily assets, given to
`fork_aware_dbt_definitions_for` exactly as an adopter with a partitioned project would, which adds
dbt's `dbt` resource and the lake domain (fork checks on every table, `ducklake`, fork jobs, sensors,
schedule, the workspace-binding executor).

What a reader could get wrong: importing this package builds nothing; `build_defs()` imports the
asset modules, which resolve the configured dbt project and prepare its manifest.
"""

from __future__ import annotations

from dagster import Definitions


def build_defs() -> Definitions:
    from dpone_dagster.defs.dbt.assets import DBT_PROJECT, synthetic_dbt_assets
    from dpone_dagster.defs.dbt.partitioned import synthetic_dbt_daily_assets
    from dpone_dagster.integration.dbt.factory import fork_aware_dbt_definitions_for

    return fork_aware_dbt_definitions_for([synthetic_dbt_assets, synthetic_dbt_daily_assets], project=DBT_PROJECT)
