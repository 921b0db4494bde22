"""Resources the synthetic dbt assets need: the dbt CLI, pointed at the project and the venv's `dbt`.

What a reader could get wrong: `DbtCliResource` is a configurable resource, and Dagster lets any
launch override every field of a configurable resource: `project_dir`, `profiles_dir`, `profile`,
`target`, `dbt_executable`, `global_config_flags`, `state_path`. Each of those can point dbt at
another profile, another project or another program, i.e. at a lake this deployment does not act
for. So the `dbt` resource is handed to Dagster as a fixed object whose config schema is empty
(`dpone_dagster.integration.dbt.factory.fork_aware_dbt_resource`): run config that names any field is
rejected at validation, before a run exists.
"""

from __future__ import annotations

from dagster import ResourceDefinition
from dagster_dbt import DbtCliResource

from dpone_dagster.integration.dbt.factory import fork_aware_dbt_resource
from dpone_dagster.integration.dbt.project import dbt_executable, synthetic_dbt_project


def dbt_cli_resource() -> DbtCliResource:
    return DbtCliResource(project_dir=synthetic_dbt_project(), dbt_executable=dbt_executable())


def fixed_dbt_resource() -> ResourceDefinition:
    """The synthetic project's dbt CLI as a resource with no run configuration (see the module docstring)."""
    return fork_aware_dbt_resource(synthetic_dbt_project())
