"""The dbt assets of dbt_project_synthetic: `fork_aware_dbt_assets` over the configured dbt project.

Everything fork-aware (the plugin's targets, tracking, the lake metadata on each materialization,
dbt tests as asset checks) lives in `dpone_dagster.defs.dbt.factory`, which any dbt-duckdb project
can use; this module is the synthetic project's one call of it: the `synthetic_dbt` group, the op
name `synthetic_dbt_build`, the `dbt` resource key.

What a reader could get wrong: importing this module prepares the manifest (`dbt parse` when the
sources changed since the last parse, see `dpone_dagster.defs.dbt.project`). The helpers below are
re-exported from the factory for the callers and tests that import them from here.
"""

from __future__ import annotations

from dpone_dagster.defs.dbt.factory import (
    PROJECT_ROOT_ENV,
    WORKSPACE_ENV,
    dbt_subprocess_env,
    failed_tables,
    fork_aware_dbt_assets,
    selected_tables,
    with_lake_metadata,
)
from dpone_dagster.defs.dbt.project import synthetic_dbt_project
from dpone_dagster.defs.dbt.translator import SyntheticDbtTranslator

__all__ = [
    "DBT_PROJECT",
    "PROJECT_ROOT_ENV",
    "TRANSLATOR",
    "WORKSPACE_ENV",
    "dbt_subprocess_env",
    "failed_tables",
    "selected_tables",
    "synthetic_dbt_assets",
    "with_lake_metadata",
]

DBT_PROJECT = synthetic_dbt_project()
TRANSLATOR = SyntheticDbtTranslator()

synthetic_dbt_assets = fork_aware_dbt_assets(
    project=DBT_PROJECT,
    lake=TRANSLATOR.lake,
    translator=TRANSLATOR,
    exclude="tag:dpone_partitioned",  # built one day at a time: defs/dbt/partitioned.py
    name="synthetic_dbt_build",
)
