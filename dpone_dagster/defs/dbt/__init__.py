"""Dagster definitions for dbt_project_synthetic: assets (with dbt tests as checks) and resources."""

from __future__ import annotations

from dagster import Definitions

from dpone_dagster.defs.dbt.assets import synthetic_dbt_assets
from dpone_dagster.defs.dbt.resources import fixed_dbt_resource

defs = Definitions(assets=[synthetic_dbt_assets], resources={"dbt": fixed_dbt_resource()})
