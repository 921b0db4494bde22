"""The dbt assets of dbt_project_synthetic: `fork_aware_dbt_assets` over the configured dbt project.

Everything fork-aware (the plugin's targets, tracking, the lake metadata on each materialization,
dbt tests as asset checks) lives in `dpone_dagster.integration.dbt.factory`, which any dbt-duckdb project
can use; this module is the synthetic project's one call of it: the `synthetic_dbt` group, the op
name `synthetic_dbt_build`, the `dbt` resource key.

What a reader could get wrong: importing this module prepares the manifest (`dbt parse` when the
sources changed since the last parse, see `dpone_dagster.integration.dbt.project`).
"""

from __future__ import annotations

from dpone_dagster.integration.dbt.factory import fork_aware_dbt_assets
from dpone_dagster.integration.dbt.project import synthetic_dbt_project
from dpone_dagster.integration.dbt.translator import SyntheticDbtTranslator

DBT_PROJECT = synthetic_dbt_project()
TRANSLATOR = SyntheticDbtTranslator()

synthetic_dbt_assets = fork_aware_dbt_assets(
    project=DBT_PROJECT,
    lake=TRANSLATOR.lake,
    translator=TRANSLATOR,
    exclude="tag:dpone_partitioned",  # built one day at a time: defs/dbt/partitioned.py
    name="synthetic_dbt_build",
)
