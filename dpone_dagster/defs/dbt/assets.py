"""The unpartitioned dbt assets of dbt_project_synthetic: `fork_aware_dbt_assets` over the configured dbt project.

Everything fork-aware (the plugin's targets, tracking, the lake metadata on each materialization,
dbt tests as asset checks) lives in `dpone_dagster.integration.dbt`, which any dbt-duckdb project
uses the same way; this module is the synthetic project's one call of the factory: the
`synthetic_dbt` group, the op name `synthetic_dbt_build`, the `dbt` resource key, and the daily
models left to `defs/dbt/partitioned.py`.

What a reader could get wrong: importing this module resolves the configured dbt project
(`dbt_project_dir`, default `dbt_project_synthetic`) and prepares its manifest (`dbt parse` when the
sources changed since the last parse, see `dpone_dagster.integration.dbt.project`).
"""

from __future__ import annotations

from dpone_dagster.defs.dbt.translator import SyntheticDbtTranslator
from dpone_dagster.integration.dbt.factory import fork_aware_dbt_assets
from dpone_dagster.integration.dbt.partitioned import PARTITIONED_SELECT
from dpone_dagster.integration.dbt.project import configured_dbt_project

DBT_PROJECT = configured_dbt_project()
TRANSLATOR = SyntheticDbtTranslator()

synthetic_dbt_assets = fork_aware_dbt_assets(
    project=DBT_PROJECT,
    lake=TRANSLATOR.lake,
    translator=TRANSLATOR,
    exclude=PARTITIONED_SELECT,  # built one day at a time: defs/dbt/partitioned.py
    name="synthetic_dbt_build",
)
