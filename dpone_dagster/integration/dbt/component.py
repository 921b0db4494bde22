"""`ForkAwareDbtProjectComponent`: a team's own dbt-duckdb project on the fork-aware DuckLake, as a component.

`dg scaffold defs dpone_dagster.integration.dbt.component.ForkAwareDbtProjectComponent my_dbt
--project-path path/to/dbt` writes a `defs.yaml` like

    type: dpone_dagster.integration.dbt.component.ForkAwareDbtProjectComponent
    attributes:
      project_dir: "{{ context.project_root }}/path/to/dbt"
      lake: main

and the component builds what `fork_aware_dbt_definitions` builds: the project's models, seeds
and snapshots as assets `<lake>/<schema>/<table>` written through the dpone plugin into the
deployment's workspace (a fork writes its own namespace, defers the rest to its parent), dbt tests
as asset checks, the `fork_staleness` and `diff_against_parent` checks, the fixed `dbt` resource,
and the lake domain (`integration.lake.definitions.fork_lake_definitions`): the `ducklake` resource,
the drop/promote/observe/maintain/janitor jobs, the fork-state and janitor sensors, the maintenance
schedule and the workspace-binding executor.

Importing this module (what `dg list components` does through the `dagster_dg_cli.registry_modules`
entry point) reads no configuration and no dbt project: all of that happens in `build_defs`.

What a reader could get wrong: a relative `project_dir` is relative to the folder holding the
`defs.yaml`, not to the current directory. The component does not edit the dbt project: its
profile must already attach the lake through the dpone plugin (docs/adopting.md), and a profile
that does not is refused when the definitions load (`dbt.profile_not_fork_aware`). Two dbt
projects in one code location need two different `dbt_resource_key`s and `op_name`s (the checks are
named after the op). The lake domain is one set of objects per process, so several components and
`fork_lake_definitions()` merge without a duplicate; the binding executor is the location's executor,
so another executor in the same location is refused by `Definitions.merge`.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import Definitions
from dagster.components import Component, ComponentLoadContext, Model, Resolvable, Scaffolder, ScaffoldRequest
from dagster.components.component_scaffolding import scaffold_component
from dagster.components.scaffold.scaffold import scaffold_with
from pydantic import BaseModel

from dpone_dagster.config import DEFAULT_LAKE
from dpone_dagster.integration.dbt.factory import fork_aware_dbt_definitions
from dpone_dagster.integration.dbt.run import DEFAULT_DBT_RESOURCE_KEY


class ForkAwareDbtScaffoldParams(BaseModel):
    project_path: str | None = None
    lake: str = DEFAULT_LAKE


class ForkAwareDbtProjectScaffolder(Scaffolder[ForkAwareDbtScaffoldParams]):
    """Writes the `defs.yaml`; `--project-path` becomes a path under `{{ context.project_root }}`."""

    @classmethod
    def get_scaffold_params(cls) -> type[ForkAwareDbtScaffoldParams]:
        return ForkAwareDbtScaffoldParams

    def scaffold(self, request: ScaffoldRequest[ForkAwareDbtScaffoldParams]) -> None:
        project_dir = "dbt_project"
        if request.params.project_path is not None:
            root = request.project_root or Path(os.getcwd())
            relative = os.path.relpath(Path(request.params.project_path).resolve(), start=Path(root).resolve())
            project_dir = "{{ context.project_root }}/" + Path(relative).as_posix()
        scaffold_component(request, {"project_dir": project_dir, "lake": request.params.lake})


@scaffold_with(ForkAwareDbtProjectScaffolder)
class ForkAwareDbtProjectComponent(Component, Resolvable, Model):
    """A dbt-duckdb project whose profile uses the dpone plugin, materialized into the fork-aware DuckLake."""

    project_dir: str
    profiles_dir: str | None = None
    lake: str = DEFAULT_LAKE
    group_name: str | None = None
    select: str = "fqn:*"
    exclude: str | None = None
    op_name: str | None = None
    dbt_resource_key: str = DEFAULT_DBT_RESOURCE_KEY

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        return fork_aware_dbt_definitions(
            project_dir=_beside(context.path, self.project_dir),
            profiles_dir=_beside(context.path, self.profiles_dir) if self.profiles_dir else None,
            lake=self.lake,
            group_name=self.group_name,
            select=self.select,
            exclude=self.exclude,
            name=self.op_name,
            dbt_resource_key=self.dbt_resource_key,
        )


def _beside(component_path: Path, path: str) -> Path:
    given = Path(path)
    if given.is_absolute():
        return given
    base = component_path if component_path.is_dir() else component_path.parent
    return (base / given).resolve()
