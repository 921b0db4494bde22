"""Resources the dbt assets need: the dbt CLI, pointed at the project and the venv's `dbt`."""

from __future__ import annotations

from dagster_dbt import DbtCliResource

from dpone_dagster.defs.dbt.project import dbt_executable, synthetic_dbt_project


def dbt_cli_resource() -> DbtCliResource:
    return DbtCliResource(project_dir=synthetic_dbt_project(), dbt_executable=dbt_executable())
