"""The baseline for `bench_load`: a bare dagster-dbt code location over dbt_project_synthetic.

Only what the dagster-dbt documentation shows: a `DbtProject`, one `@dbt_assets` running
`dbt build`, a `DbtCliResource`. No dpone configuration, lake resource or other domain.
"""

from pathlib import Path

from dagster import AssetExecutionContext, Definitions
from dagster_dbt import DbtCliResource, DbtProject, dbt_assets

project = DbtProject(project_dir=Path(__file__).resolve().parent.parent / "dbt_project_synthetic")


@dbt_assets(manifest=project.manifest_path, project=project)
def bare_dbt_assets(context: AssetExecutionContext, dbt: DbtCliResource):
    yield from dbt.cli(["build"], context=context).stream()


defs = Definitions(assets=[bare_dbt_assets], resources={"dbt": DbtCliResource(project_dir=project)})
