"""`fork_aware_dbt_assets`: any dbt-duckdb project as Dagster assets on the fork-aware DuckLake.

One `@dbt_assets` op runs `dbt build` for the selected nodes. Each model, seed or snapshot is built
into the lake the dpone dbt plugin attaches for the deployment's workspace
(`dpone_dagster.lake.dbt_plugin`); the plugin is told which tables this run writes, so in a fork
those tables replace their defer views while everything upstream is read through the defer views
from the parent. dbt tests come back as asset checks. After dbt exits, every built table is
recorded through `DuckLakeResource.record_materialization` (which is what lets forks defer to it),
and its materialization carries workspace, namespace, fork_state, snapshot_id and row count.
Asset keys are `<lake>/<schema>/<table>` with the `ducklake` kind and the fork-state tags
(`ForkAwareDbtTranslator`). `dbt_project_synthetic` is one user of this factory
(`dpone_dagster.defs.dbt.assets`); `ForkAwareDbtProjectComponent` is the same thing as a component.

What a reader could get wrong:
- the project's *profile* is what makes dbt fork-aware: its target must list the dpone plugin
  (`module: dpone_dagster.lake.dbt_plugin`, `config: {lake: <lake>}`) and name the attached alias
  (`database: lake_<lake>`). The factory checks the profile when it loads and refuses one without
  the plugin (`dbt.profile_not_fork_aware`): without it dbt would write wherever its `path` points.
- the events are held until dbt exits. An embedded lake's catalog is a DuckDB file only one
  process can open, so the lake is read for the metadata only after the dbt process let go of it.
- the dbt subprocess inherits the environment at the moment `dbt.cli()` starts it, which is the
  only way to hand it this run's targets; the environment is set for exactly that call, under a
  lock, and restored. The workspace it is given is the deployment's (`ducklake.workspace_id`,
  checked against the run's `dpone/workspace` tag when the resource was set up) together with the
  project root the deployment resolved its configuration from.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from dagster import AssetExecutionContext, AssetsDefinition, Definitions, Output, ResourceDefinition
from dagster_dbt import DbtCliInvocation, DbtCliResource, DbtProject, dbt_assets
from dagster_dbt.asset_utils import get_manifest_and_translator_from_dbt_assets

from dpone_dagster.config import DEFAULT_LAKE, load_config
from dpone_dagster.integration.dbt.cli import InstalledDbtCliResource
from dpone_dagster.integration.dbt.project import DbtProjectError, dbt_executable, manifest_is_current, prepare_manifest
from dpone_dagster.integration.dbt.reads import dbt_reads
from dpone_dagster.integration.dbt.translator import ForkAwareDbtTranslator, table_of
from dpone_dagster.integration.lake.resources import DuckLakeResource, ducklake_resource
from dpone_dagster.integration.binding import IN_PROCESS_ALONE_TAG
from dpone_dagster.lake.dbt_plugin import TARGETS_ENV, targets_to_env
from dpone_dagster.lake.resolution.naming import lake_alias
from dpone_dagster.lake.resolution.reads import READS_ENV, reads_to_env
from dpone_dagster.lake.resolution.plan import TableName

WORKSPACE_ENV = "DPONE_WORKSPACE"
PROJECT_ROOT_ENV = "DPONE_PROJECT_ROOT"
PLUGIN_MODULE = "dpone_dagster.lake.dbt_plugin"
DEFAULT_DBT_RESOURCE_KEY = "dbt"
DEFAULT_BUILD_ARGS: tuple[str, ...] = ("build",)
INDIRECT_SELECTION_ENV = "DBT_INDIRECT_SELECTION"
DEFAULT_INDIRECT_SELECTION = "cautious"
"""dbt runs a test only when every model it refers to is selected (docs/ui.md, "Selecting part of the
dbt project"): a relationships test on an unselected model no longer fails a partial build. dagster-dbt
reads this variable when `dbt.cli()` starts and replaces it with `empty` when checks are deselected;
a value the process environment already sets wins."""

_ENV_LOCK = threading.Lock()


def selected_tables(context: AssetExecutionContext, lake: str) -> list[str]:
    """`schema.table` of every selected asset that is a table of `lake`."""
    return sorted(
        f"{key.path[1]}.{key.path[2]}"
        for key in context.selected_asset_keys
        if len(key.path) == 3 and key.path[0] == lake
    )


@contextmanager
def dbt_subprocess_env(
    ducklake: DuckLakeResource, targets: Sequence[str], reads: Sequence[str] | None = None
) -> Iterator[None]:
    """Expose the deployment's workspace, `targets` and `reads` (None: every table, `lake/resolution/reads.py`)
    to a dbt subprocess started inside the block only."""
    wanted: dict[str, str | None] = {
        READS_ENV: None if reads is None else reads_to_env(reads),
        WORKSPACE_ENV: ducklake.workspace_id,
        PROJECT_ROOT_ENV: str(load_config().project_root),
        TARGETS_ENV: targets_to_env(targets),
        INDIRECT_SELECTION_ENV: os.environ.get(INDIRECT_SELECTION_ENV) or DEFAULT_INDIRECT_SELECTION,
    }
    with _ENV_LOCK:
        previous = {name: os.environ.get(name) for name in wanted}
        for name, value in wanted.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        try:
            yield
        finally:
            for name, value in previous.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def failed_tables(invocation: DbtCliInvocation, manifest: Mapping[str, Any]) -> list[str]:
    """`schema.table` of every model, seed or snapshot dbt reports as errored in this run."""
    nodes = manifest.get("nodes", {})
    try:
        results = invocation.get_artifact("run_results.json").get("results", [])
    except FileNotFoundError:
        return []
    out = []
    for result in results:
        node = nodes.get(result.get("unique_id", ""), {})
        if result.get("status") == "error" and node.get("resource_type") in ("model", "seed", "snapshot"):
            out.append("{}.{}".format(*table_of(node)))
    return sorted(out)


def _row_count(conn, lake_alias_name: str, table: str) -> int:
    (count,) = conn.execute(f"SELECT count(*) FROM {TableName.parse(table).qualified(lake_alias_name)}").fetchone()
    return int(count)


def with_lake_metadata(
    context: AssetExecutionContext,
    ducklake: DuckLakeResource,
    lake: str,
    targets: Sequence[str],
    events: Sequence[Any],
    invocation: DbtCliInvocation,
) -> list[Any]:
    """Record every built table (and every errored one) and add the lake metadata to its Output."""
    out: list[Any] = []
    with ducklake.connect(lake, targets, reads=()) as conn:  # reads only what dbt just wrote: no defer view
        for event in events:
            if isinstance(event, Output):
                key = context.asset_key_for_output(event.output_name)
                table = f"{key.path[1]}.{key.path[2]}"
                metadata = ducklake.record_materialization(conn, table, lake=lake)
                metadata["dagster/row_count"] = _row_count(conn, ducklake.alias(lake), table)
                event = event.with_metadata({**event.metadata, **metadata})
            out.append(event)
        for table in failed_tables(invocation, invocation.manifest):
            ducklake.record_materialization(conn, table, lake=lake, status="failed")
    return out


def build_in_lake(
    context: AssetExecutionContext,
    dbt: DbtCliResource,
    ducklake: DuckLakeResource,
    lake: str,
    args: Sequence[str] = DEFAULT_BUILD_ARGS,
    reads_everything: bool = False,
) -> Iterator[Any]:
    """Run dbt for the selected tables of `lake`, record them, and yield dbt's events with the lake metadata.

    In a fork the dbt plugin defers only what the selection reads (`integration/dbt/reads.py`), unless
    `reads_everything` (a project whose SQL reads relations dbt's graph does not declare)."""
    targets = selected_tables(context, lake)
    reads = None if reads_everything else dbt_reads(get_manifest_and_translator_from_dbt_assets([context.assets_def])[0], targets)
    with dbt_subprocess_env(ducklake, targets, reads):
        invocation = dbt.cli(list(args), context=context, raise_on_error=False)
    yield from recorded_after_dbt(
        invocation, lambda events: with_lake_metadata(context, ducklake, lake, targets, events, invocation)
    )


def recorded_after_dbt(invocation: DbtCliInvocation, record: Callable[[list], Iterable]) -> Iterator:
    """Stream dbt's events to the end, then yield what `record(events)` makes of them (the lake
    metadata of each built table); dbt's own error is raised last, after whatever was recorded, and
    wins over an error of the recording itself (which is chained to it)."""
    events = list(invocation.stream())
    dbt_error = None if invocation.is_successful() else (invocation.get_error() or RuntimeError("dbt build failed"))
    try:
        recorded = record(events)
    except Exception as exc:
        if dbt_error is not None:
            raise dbt_error from exc
        raise
    yield from recorded
    if dbt_error is not None:
        raise dbt_error


def dbt_project_at(project_dir: str | Path, profiles_dir: str | Path | None = None) -> DbtProject:
    """The `DbtProject` in `project_dir` (profiles.yml in `profiles_dir`, default the project folder)."""
    project_dir = Path(project_dir).resolve()
    if not (project_dir / "dbt_project.yml").is_file():
        raise DbtProjectError(
            f"no dbt_project.yml in the dbt project folder {project_dir.name!r}", code="dbt.project_missing"
        )
    return DbtProject(project_dir=project_dir, profiles_dir=Path(profiles_dir).resolve() if profiles_dir else project_dir)


def require_fork_aware_profile(project: DbtProject, lake: str) -> None:
    """Refuse a project whose profile target does not attach `lake` through the dpone plugin."""
    profiles_file = Path(project.profiles_dir) / "profiles.yml"
    try:
        profile_name = project.profile or yaml.safe_load((Path(project.project_dir) / "dbt_project.yml").read_text())["profile"]
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
        # sources edited since the manifest was prepared (a run worker never re-parses): the graph
        # may miss a new ref, so this run defers every table instead of only what the graph reads
        everything = reads_everything or not manifest_is_current(project)
        yield from build_in_lake(context, dbt, context.resources.ducklake, lake, args, everything)

    return _fork_aware_dbt_assets


def fork_aware_dbt_definitions(
    *, dbt_resource_key: str = DEFAULT_DBT_RESOURCE_KEY, **kwargs: Any
) -> Definitions:
    """`fork_aware_dbt_assets(**kwargs)` with its `dbt` and `ducklake` resources, ready to merge."""
    assets = fork_aware_dbt_assets(dbt_resource_key=dbt_resource_key, **kwargs)
    project = kwargs.get("project") or dbt_project_at(kwargs["project_dir"], kwargs.get("profiles_dir"))
    return Definitions(
        assets=[assets],
        resources={dbt_resource_key: fork_aware_dbt_resource(project), "ducklake": ducklake_resource()},
    )


def _identifier(text: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in text)
