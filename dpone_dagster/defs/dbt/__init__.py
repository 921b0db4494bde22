"""Dagster definitions for dbt_project_synthetic: assets (with dbt tests as checks) and resources."""

from __future__ import annotations

from dagster import Definitions

from dpone_dagster.defs.dbt.assets import synthetic_dbt_assets
from dpone_dagster.defs.dbt.partitioned import synthetic_dbt_daily_assets
from dpone_dagster.defs.dbt.resources import fixed_dbt_resource
from dpone_dagster.integration.lake.staleness import build_staleness_checks

defs = Definitions(
    assets=[synthetic_dbt_assets, synthetic_dbt_daily_assets],
    # fork_staleness (WARN) on every DuckLake table asset, lineage from the dbt deps
    asset_checks=[build_staleness_checks([synthetic_dbt_assets, synthetic_dbt_daily_assets])],
    resources={"dbt": fixed_dbt_resource()},
)
