"""One fork-aware dbt run: the subprocess environment, `dbt build`, then every built table recorded in the lake.

What every fork-aware dbt op does between Dagster and dbt, whatever builds the op (the unpartitioned
`fork_aware_dbt_assets`, the partitioned `fork_aware_partitioned_dbt_assets`):
- the dpone plugin is told which tables this run writes (`DPONE_DBT_TARGETS`), so in a fork those
  tables replace their defer views while everything upstream is read through the defer views from
  the parent, and (for the unpartitioned op) which tables it reads (`lake/dbt_reads.py`);
- after dbt exits, every built table is recorded through `DuckLakeResource.record_materialization`
  (which is what lets forks defer to it), and its Output carries workspace, namespace, fork_state,
  snapshot_id and row count; an errored model is recorded as failed.

What a reader could get wrong:
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
from typing import Any

from dagster import AssetExecutionContext, Output
from dagster_dbt import DbtCliInvocation, DbtCliResource
from dagster_dbt.asset_utils import get_manifest_and_translator_from_dbt_assets

from dpone_dagster.config import load_config
from dpone_dagster.integration.lake.resources import DuckLakeResource
from dpone_dagster.lake.dbt_handover import READS_FROM_INVOCATION_ENV, TARGETS_ENV, targets_to_env
from dpone_dagster.lake.dbt_reads import dbt_reads, table_of
from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.lake.resolution.reads import READS_ENV, reads_to_env

WORKSPACE_ENV = "DPONE_WORKSPACE"
PROJECT_ROOT_ENV = "DPONE_PROJECT_ROOT"
DEFAULT_DBT_RESOURCE_KEY = "dbt"
"""The resource key of the dbt CLI a fork-aware dbt op asks for (two dbt projects in one location need two)."""
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
    ducklake: DuckLakeResource,
    targets: Sequence[str],
    reads: Sequence[str] | None = None,
    extra: Mapping[str, str | None] | None = None,
    *,
    reads_from_invocation: bool = False,
) -> Iterator[None]:
    """Expose the deployment's workspace, `targets`, `reads` (None: every table, `lake/resolution/reads.py`)
    and `extra` (a None value: unset) to a dbt subprocess started inside the block only. With
    `reads_from_invocation` (and no `reads`) the plugin computes the read set inside dbt, from the
    manifest that dbt invocation parses anyway (`lake/dbt_plugin.py`). Both variables are always set
    or unset here, so a value inherited from this process's environment never reaches dbt."""
    from dpone_dagster.lake.dbt_recording import DAGSTER_RECORDS, RECORDER_ENV

    wanted: dict[str, str | None] = {
        READS_ENV: None if reads is None else reads_to_env(reads),
        READS_FROM_INVOCATION_ENV: "1" if reads_from_invocation else None,
        WORKSPACE_ENV: ducklake.workspace_id,
        PROJECT_ROOT_ENV: str(load_config().project_root),
        TARGETS_ENV: targets_to_env(targets),
        RECORDER_ENV: DAGSTER_RECORDS,  # this op records what dbt built (with the Output metadata)
        INDIRECT_SELECTION_ENV: os.environ.get(INDIRECT_SELECTION_ENV) or DEFAULT_INDIRECT_SELECTION,
        **(extra or {}),
    }
    with _ENV_LOCK, environment(wanted):
        yield


@contextmanager
def environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """`os.environ` with `values` set (a None value: unset) inside the block, restored after it."""
    previous = {name: os.environ.get(name) for name in values}
    _set_environ(values)
    try:
        yield
    finally:
        _set_environ(previous)


def _set_environ(values: Mapping[str, str | None]) -> None:
    for name, value in values.items():
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


def row_count(conn, lake_alias_name: str, table: str) -> int:
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
                metadata["dagster/row_count"] = row_count(conn, ducklake.alias(lake), table)
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
    sources_changed: bool = False,
) -> Iterator[Any]:
    """Run dbt for the selected tables of `lake`, record them, and yield dbt's events with the lake metadata.

    In a fork the dbt plugin defers only what the selection reads (`lake/dbt_reads.py`) in the
    manifest the op was loaded with, or, when the dbt sources changed since (`sources_changed`,
    `project.sources_changed_since`), in the manifest the dbt invocation itself parses; unless
    `reads_everything` (a project whose SQL reads relations dbt's graph does not declare)."""
    targets = selected_tables(context, lake)
    from_invocation = sources_changed and not reads_everything
    reads = None
    if not reads_everything and not from_invocation:
        reads = dbt_reads(get_manifest_and_translator_from_dbt_assets([context.assets_def])[0], targets)
    with dbt_subprocess_env(ducklake, targets, reads, reads_from_invocation=from_invocation):
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
