"""The dbt assets of dbt_project_synthetic: one `@dbt_assets` op running `dbt build`.

Each selected model is built into the lake the dpone plugin attaches for the `ducklake` resource's
workspace (see `dpone_dagster.lake.dbt_plugin`); the plugin is told which tables this run writes,
so in a fork those tables replace their defer views. dbt tests run in the same `dbt build` and come
back as asset checks. After dbt exits, every built table is recorded through
`DuckLakeResource.record_materialization` (which is what lets forks defer to it), and its
materialization carries that metadata: workspace, namespace, fork_state, snapshot_id, row count.
That connection names the same targets, so it never lays a defer view (or an SCD2 `_current`
companion) over a table this run just built.

What a reader could get wrong: the events are held until dbt exits. An embedded lake's catalog is
a DuckDB file that only one process can open, so the lake can be read for the metadata only after
the dbt process has let go of it. And the dbt subprocess inherits the environment at the moment
`dbt.cli()` starts it, which is the only way to hand it this run's targets; the environment is set
for exactly that call, under a lock, and restored. The workspace it is given is the deployment's
(`ducklake.workspace_id`, checked against the run's `dpone/workspace` tag when the resource was set
up) together with the project root the deployment resolved its configuration from, so the plugin in
dbt's process reads the same configuration and attaches the same lake.
"""

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from dagster import AssetExecutionContext, Output
from dagster_dbt import DbtCliInvocation, DbtCliResource, dbt_assets

from dpone_dagster.config import load_config
from dpone_dagster.defs.dbt.project import prepare_manifest, synthetic_dbt_project
from dpone_dagster.defs.dbt.translator import SyntheticDbtTranslator, table_of
from dpone_dagster.defs.lake.resources import DuckLakeResource
from dpone_dagster.lake.dbt_plugin import TARGETS_ENV, targets_to_env
from dpone_dagster.lake.resolve import TableName

WORKSPACE_ENV = "DPONE_WORKSPACE"
PROJECT_ROOT_ENV = "DPONE_PROJECT_ROOT"

DBT_PROJECT = synthetic_dbt_project()
prepare_manifest(DBT_PROJECT)
TRANSLATOR = SyntheticDbtTranslator()

_ENV_LOCK = threading.Lock()


def selected_tables(context: AssetExecutionContext, lake: str) -> list[str]:
    """`schema.table` of every selected asset that is a table of `lake`."""
    return sorted(
        f"{key.path[1]}.{key.path[2]}"
        for key in context.selected_asset_keys
        if len(key.path) == 3 and key.path[0] == lake
    )


@contextmanager
def dbt_subprocess_env(ducklake: DuckLakeResource, targets: Sequence[str]) -> Iterator[None]:
    """Expose the deployment's workspace and `targets` to a dbt subprocess started inside the block only."""
    wanted = {
        WORKSPACE_ENV: ducklake.workspace_id,
        PROJECT_ROOT_ENV: str(load_config().project_root),
        TARGETS_ENV: targets_to_env(targets),
    }
    with _ENV_LOCK:
        previous = {name: os.environ.get(name) for name in wanted}
        os.environ.update(wanted)
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


def _row_count(conn, lake_alias: str, table: str) -> int:
    (count,) = conn.execute(f"SELECT count(*) FROM {TableName.parse(table).qualified(lake_alias)}").fetchone()
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
    with ducklake.connect(lake, targets) as conn:
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


@dbt_assets(
    manifest=DBT_PROJECT.manifest_path,
    project=DBT_PROJECT,
    dagster_dbt_translator=TRANSLATOR,
    name="synthetic_dbt_build",
    pool=f"ducklake_{TRANSLATOR.lake}",
)
def synthetic_dbt_assets(
    context: AssetExecutionContext, dbt: DbtCliResource, ducklake: DuckLakeResource
):
    lake = TRANSLATOR.lake
    targets = selected_tables(context, lake)
    with dbt_subprocess_env(ducklake, targets):
        invocation = dbt.cli(["build"], context=context, raise_on_error=False)
    events = list(invocation.stream())
    dbt_error = None if invocation.is_successful() else (invocation.get_error() or RuntimeError("dbt build failed"))
    try:
        recorded = with_lake_metadata(context, ducklake, lake, targets, events, invocation)
    except Exception as exc:
        if dbt_error is not None:
            raise dbt_error from exc
        raise
    yield from recorded
    if dbt_error is not None:
        raise dbt_error
