"""`fork_aware_dbt_definitions`: any dbt-duckdb project as Dagster assets on the fork-aware DuckLake, in one call.

`fork_aware_dbt_assets` builds one `@dbt_assets` op that runs `dbt build` for the selected nodes
(`integration/dbt/run.py`: each model, seed or snapshot is written through the dpone plugin into the
deployment's workspace, then recorded in the lake). dbt tests come back as asset checks. Asset keys
are `<lake>/<schema>/<table>` with the `ducklake` kind and the fork-state tags
(`ForkAwareDbtTranslator`). `fork_aware_dbt_definitions` adds what a code location needs around
those assets (`fork_aware_dbt_definitions_for`): the fixed `dbt` resource and the lake domain with the
`fork_staleness` and `diff_against_parent` checks on the project's tables
(`integration.lake.definitions.fork_lake_definitions`: the `ducklake` resource, the fork jobs,
sensors, schedule and the workspace-binding executor). `ForkAwareDbtProjectComponent` is the same
call as a component; this repository's own location (`dpone_dagster.defs.dbt`) uses the same pieces.

What a reader could get wrong: the project's *profile* is what makes dbt fork-aware: its target must
list the dpone plugin (`module: dpone_dagster.lake.dbt_plugin`, `config: {lake: <lake>}`) and name
the attached alias (`database: lake_<lake>`). The factory checks the profile when it loads and
refuses one without the plugin (`dbt.profile_not_fork_aware`): without it dbt would write wherever
its `path` points.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from dagster import AssetsDefinition, Definitions, ResourceDefinition
from dagster_dbt import DbtProject, dbt_assets

from dpone_dagster.config import DEFAULT_LAKE
from dpone_dagster.integration.binding import IN_PROCESS_ALONE_TAG
from dpone_dagster.integration.dbt.cli import InstalledDbtCliResource
from dpone_dagster.integration.dbt.project import (
    DbtProjectError,
    dbt_executable,
    dbt_project_at,
    prepare_manifest,
    sources_changed_since,
    stored_fingerprint,
)
from dpone_dagster.integration.dbt.run import DEFAULT_BUILD_ARGS, DEFAULT_DBT_RESOURCE_KEY, build_in_lake
from dpone_dagster.integration.dbt.translator import ForkAwareDbtTranslator
from dpone_dagster.integration.lake.definitions import fork_lake_definitions
from dpone_dagster.lake.resolution.naming import lake_alias

PLUGIN_MODULE = "dpone_dagster.lake.dbt_plugin"


def require_fork_aware_profile(project: DbtProject, lake: str) -> None:
    """Refuse a project whose profile target does not attach `lake` through the dpone plugin."""
    profiles_file = Path(project.profiles_dir) / "profiles.yml"
    try:
        profile_name = (
            project.profile or yaml.safe_load((Path(project.project_dir) / "dbt_project.yml").read_text())["profile"]
        )
        profile = yaml.safe_load(profiles_file.read_text())[profile_name]
        outputs = profile["outputs"]
        target = outputs[project.target or profile["target"]]
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        raise DbtProjectError(
            f"dbt project {project.name!r}: its profile (profiles.yml in the profiles folder) could not be read",
            code="dbt.profile_unreadable",
        ) from None
    plugins = [p for p in (target.get("plugins") or []) if isinstance(p, Mapping) and p.get("module") == PLUGIN_MODULE]
    plugin_lake = str(((plugins[0].get("config") or {}).get("lake")) or DEFAULT_LAKE) if plugins else None
    if target.get("type") != "duckdb" or plugin_lake != lake or target.get("database") != lake_alias(lake):
        raise DbtProjectError(
            f"dbt project {project.name!r}: its profile target must be `type: duckdb` with `database: "
            f"{lake_alias(lake)}` and the plugin `{PLUGIN_MODULE}` configured for lake {lake!r} "
            "(see docs/adopting.md); refusing a dbt run that could write outside the fork-aware lake",
            code="dbt.profile_not_fork_aware",
        )


def fork_aware_dbt_resource(project: DbtProject) -> ResourceDefinition:
    """The dbt CLI for `project` as a resource with no run configuration.

    `DbtCliResource` is configurable: a launch could override `project_dir`, `profiles_dir`,
    `profile`, `target`, `dbt_executable`, ... and point dbt at another profile or program. Handed
    to Dagster as a fixed object with an empty config schema, any such run config fails validation.
    It is an `InstalledDbtCliResource` (`integration/dbt/cli.py`): no `dbt --version`, no in-process adapter.
    """
    resource = InstalledDbtCliResource(project_dir=project, dbt_executable=dbt_executable())
    return ResourceDefinition(
        resource_fn=lambda _context: resource,
        config_schema={},
        description=f"dbt CLI for {project.name} (fixed: no run configuration)",
    )


def fork_aware_dbt_assets(
    *,
    project_dir: str | Path | None = None,
    project: DbtProject | None = None,
    profiles_dir: str | Path | None = None,
    lake: str = DEFAULT_LAKE,
    name: str | None = None,
    group_name: str | None = None,
    select: str = "fqn:*",
    exclude: str | None = None,
    translator: ForkAwareDbtTranslator | None = None,
    dbt_resource_key: str = DEFAULT_DBT_RESOURCE_KEY,
    build_args: Sequence[str] = DEFAULT_BUILD_ARGS,
    prepare: bool = True,
    reads_everything: bool = False,
) -> AssetsDefinition:
    """The dbt project (`project_dir` or a ready `project`) as fork-aware `@dbt_assets`.

    Needs the resources `ducklake` (`DuckLakeResource`) and `dbt_resource_key`
    (`fork_aware_dbt_resource(project)`); `fork_aware_dbt_definitions` bundles all three.
    """
    if (project is None) == (project_dir is None):
        raise DbtProjectError("give exactly one of `project_dir` and `project`", code="dbt.project_ambiguous")
    project = project if project is not None else dbt_project_at(project_dir, profiles_dir)  # type: ignore[arg-type]
    require_fork_aware_profile(project, lake)
    if prepare:
        prepare_manifest(project)
    translator = translator or ForkAwareDbtTranslator(lake=lake, group_name=group_name)
    if translator.lake != lake:
        raise DbtProjectError(
            f"the translator keys assets in lake {translator.lake!r}, the factory builds lake {lake!r}",
            code="dbt.lake_mismatch",
        )
    args = tuple(build_args)
    loaded_fingerprint = stored_fingerprint(project)  # before the manifest is read (project.py)
    with translator.resolved_workspace():  # dagster-dbt builds every spec here: read the workspace once
        build = dbt_assets(
            manifest=project.manifest_path,
            project=project,
            dagster_dbt_translator=translator,
            name=name or f"{_identifier(project.name)}_dbt_build",
            select=select,
            exclude=exclude,
            pool=f"ducklake_{lake}",
            required_resource_keys={dbt_resource_key, "ducklake"},
            op_tags={IN_PROCESS_ALONE_TAG: "true"},  # a dbt-only run executes in the run worker
        )

    @build
    def _fork_aware_dbt_assets(context):  # no annotation: a string one (future import) is refused
        dbt = getattr(context.resources, dbt_resource_key)
        # sources edited since this location loaded: the read set comes from dbt's own parse of them
        changed = not reads_everything and sources_changed_since(project, loaded_fingerprint)
        yield from build_in_lake(context, dbt, context.resources.ducklake, lake, args, reads_everything, changed)

    return _fork_aware_dbt_assets


def fork_aware_dbt_definitions(
    *,
    project_dir: str | Path | None = None,
    project: DbtProject | None = None,
    profiles_dir: str | Path | None = None,
    dbt_resource_key: str = DEFAULT_DBT_RESOURCE_KEY,
    **asset_options: Any,
) -> Definitions:
    """Everything for one dbt project (`project_dir` or a ready `project`): `fork_aware_dbt_assets(**asset_options)`
    and what `fork_aware_dbt_definitions_for` adds around them, ready to merge."""
    if (project is None) == (project_dir is None):
        raise DbtProjectError("give exactly one of `project_dir` and `project`", code="dbt.project_ambiguous")
    project = project if project is not None else dbt_project_at(project_dir, profiles_dir)  # type: ignore[arg-type]
    assets = fork_aware_dbt_assets(project=project, dbt_resource_key=dbt_resource_key, **asset_options)
    return fork_aware_dbt_definitions_for([assets], project=project, dbt_resource_key=dbt_resource_key)


def fork_aware_dbt_definitions_for(
    assets: Sequence[AssetsDefinition], *, project: DbtProject, dbt_resource_key: str = DEFAULT_DBT_RESOURCE_KEY
) -> Definitions:
    """Fork-aware dbt `assets` of `project` (from `fork_aware_dbt_assets` and, for partitioned models,
    `fork_aware_partitioned_dbt_assets`) with the fixed `dbt_resource_key` resource and the lake domain
    (`fork_lake_definitions`): `fork_staleness` and `diff_against_parent` checks on their tables, named
    after the first op (`<op>_fork_staleness_checks`), the `ducklake` resource, the fork jobs, sensors,
    schedule and the workspace-binding executor."""
    if not assets:
        raise DbtProjectError("no dbt assets to build definitions for", code="dbt.no_assets")
    return Definitions.merge(
        Definitions(assets=list(assets), resources={dbt_resource_key: fork_aware_dbt_resource(project)}),
        fork_lake_definitions(assets, checks_prefix=f"{assets[0].op.name}_"),
    )


def _identifier(text: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in text)
