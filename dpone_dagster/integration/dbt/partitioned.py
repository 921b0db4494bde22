"""`fork_aware_partitioned_dbt_assets`: time-partitioned dbt models, built one window at a time, deferred per partition.

Models tagged `dpone_partitioned` (and declaring `meta: {dpone: {partition_by: <column>}}`) are
built by their own `@dbt_assets` op with a time-window partitions definition, dagster-dbt's
documented way: the run's time window goes to dbt as the environment variables
`DPONE_PARTITION_START` (inclusive) and `DPONE_PARTITION_END` (exclusive), and the model filters on
them, read with `env_var()` only when `execute` is true. Every built partition is recorded with its
key and partition column, which is what lets a fork build some partitions and read
the others from its parent (`dpone_dagster.lake.resolution.partitions`). The unpartitioned op of
the same project must leave these models out (`exclude=PARTITIONED_SELECT`).

In a fork the run also sets `DPONE_FORK_TABLE_SUFFIX` (`__fork`), so dbt writes the fork's
partitions into `<table>__fork` (the model must take its alias from it, in its own file:
`config(alias="<name>" ~ env_var("DPONE_FORK_TABLE_SUFFIX", ""))`) and the plugin is told that
hidden table as the target; after recording, a second attach lays the union view at the table's own
name.

Why environment variables and not `--vars`: dbt keys its partial parse on the vars, so a window in
`--vars` made every partition run re-parse the whole project (~2.8 s of a 5.1 s build at 11 models).
An `env_var()` evaluated while parsing is tracked per file (a new value re-parses that file only),
and one read only under `execute` is not seen by the parser at all. So the window is read under
`execute` (no re-parse) and the suffix, which decides the alias while parsing, in the partitioned
model's own file (in a fork that file alone is re-parsed). Read in a `generate_alias_name` macro it
would be tracked against the macro's file, and a changed override macro re-parses the whole project.

What a reader could get wrong: a partition key must equal `CAST(<partition column> AS VARCHAR)` for
the rows of that partition, as per-partition defer requires; daily partitions keyed by ISO date over
a DATE column do. A tagged model without `meta.dpone.partition_by` is refused when the run records
it (`dbt.partition_column_missing`). The op has no read set: a fork defers every table.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    BackfillPolicy,
    Output,
    TimeWindowPartitionsDefinition,
)
from dagster_dbt import DbtCliInvocation, DbtProject, dbt_assets

from dpone_dagster.errors import DponeError
from dpone_dagster.integration.dbt.run import (
    DEFAULT_DBT_RESOURCE_KEY,
    dbt_subprocess_env,
    failed_tables,
    recorded_after_dbt,
    row_count,
    selected_tables,
)
from dpone_dagster.integration.dbt.translator import ForkAwareDbtTranslator
from dpone_dagster.integration.lake.resources import DuckLakeResource
from dpone_dagster.lake.dbt_reads import table_of
from dpone_dagster.lake.guard.statement import quote_ident, sql_string
from dpone_dagster.lake.resolution.partitions import FORK_TABLE_SUFFIX, fork_table
from dpone_dagster.lake.resolution.plan import TableName

PARTITIONED_TAG = "dpone_partitioned"
PARTITIONED_SELECT = f"tag:{PARTITIONED_TAG}"


class PartitionColumnMissingError(DponeError):
    code = "dbt.partition_column_missing"


def partition_columns(manifest: Mapping[str, Any]) -> dict[str, str]:
    """`schema.table` -> declared partition column of every model tagged `dpone_partitioned`;
    a tagged model without `meta.dpone.partition_by` is refused (it could not defer by partition)."""
    out: dict[str, str] = {}
    for node in manifest.get("nodes", {}).values():
        if node.get("resource_type") != "model" or PARTITIONED_TAG not in node.get("tags", []):
            continue
        meta = (node.get("config", {}).get("meta") or node.get("meta") or {}).get("dpone") or {}
        column = meta.get("partition_by")
        if not isinstance(column, str) or not column:
            raise PartitionColumnMissingError(
                f"model {node.get('name')!r} is tagged {PARTITIONED_TAG} but declares no meta.dpone.partition_by column"
            )
        out["{}.{}".format(*table_of(node))] = column
    return out


PARTITION_START_ENV = "DPONE_PARTITION_START"
PARTITION_END_ENV = "DPONE_PARTITION_END"
FORK_TABLE_SUFFIX_ENV = "DPONE_FORK_TABLE_SUFFIX"


def partition_env(context: AssetExecutionContext, *, fork: bool) -> dict[str, str | None]:
    """The run's window (and, in a fork, the hidden-table suffix; elsewhere unset) for the dbt subprocess."""
    window = context.partition_time_window
    return {
        PARTITION_START_ENV: window.start.strftime("%Y-%m-%d"),
        PARTITION_END_ENV: window.end.strftime("%Y-%m-%d"),
        FORK_TABLE_SUFFIX_ENV: FORK_TABLE_SUFFIX if fork else None,
    }


def _written(tables: Sequence[str], fork: bool) -> dict[str, str]:
    """Table -> the table this run writes for it (its hidden `__fork` table in a fork)."""
    return {t: str(fork_table(TableName.parse(t))) if fork else t for t in tables}


def _partition_rows(conn, alias: str, table: str, column: str, keys: Sequence[str]) -> int:
    """Rows of these partitions, read through the table's own name (in a fork: the union view)."""
    name = TableName.parse(table)
    listed = ", ".join(sql_string(k) for k in keys)
    (count,) = conn.execute(
        f"SELECT count(*) FROM {name.qualified(alias)} WHERE CAST({quote_ident(column)} AS VARCHAR) IN ({listed})"
    ).fetchone()
    return int(count)


def record_partitions(
    context: AssetExecutionContext,
    ducklake: DuckLakeResource,
    lake: str,
    written: Mapping[str, str],
    events: Sequence[Any],
    invocation: DbtCliInvocation,
) -> list[Any]:
    """Record every built (or errored) partition of the run's range, then re-attach (laying a fork's
    union view) and add the lake metadata and the range's row count, read through the table's name."""
    keys = list(context.partition_keys)
    columns = partition_columns(invocation.manifest)
    built: list[tuple[int, str, dict[str, object]]] = []
    out: list[Any] = []
    with ducklake.connect(lake, list(written.values())) as conn:
        for event in events:
            if isinstance(event, Output):
                asset = context.asset_key_for_output(event.output_name)
                table = f"{asset.path[1]}.{asset.path[2]}"
                for key in keys:
                    metadata = ducklake.record_materialization(
                        conn, table, lake=lake, partition=key, partition_by=columns[table], physical=written[table]
                    )
                built.append((len(out), table, metadata))
            out.append(event)
        for table in failed_tables(invocation, invocation.manifest):
            for key in keys:
                ducklake.record_materialization(
                    conn, table, lake=lake, status="failed", partition=key, partition_by=columns.get(table)
                )
    with ducklake.connect(lake) as conn:
        for index, table, metadata in built:
            metadata["dagster/row_count"] = _partition_rows(conn, ducklake.alias(lake), table, columns[table], keys)
            metadata["table_rows"] = row_count(conn, ducklake.alias(lake), table)
            metadata["partition_by"] = columns[table]
            event = out[index]
            out[index] = event.with_metadata({**event.metadata, **metadata})
    return out


def fork_aware_partitioned_dbt_assets(
    *,
    project: DbtProject,
    translator: ForkAwareDbtTranslator,
    partitions_def: TimeWindowPartitionsDefinition,
    name: str,
    select: str = PARTITIONED_SELECT,
    dbt_resource_key: str = DEFAULT_DBT_RESOURCE_KEY,
) -> AssetsDefinition:
    """The `select`ed models of `project` (default: those tagged `dpone_partitioned`) as one `@dbt_assets`
    op over `partitions_def`; a backfill of many partitions is one dbt run. The manifest must already be
    prepared (the unpartitioned op of the same project prepares it). Needs the resources `ducklake` and
    `dbt_resource_key`, like `fork_aware_dbt_assets`."""
    lake = translator.lake
    with translator.resolved_workspace():  # dagster-dbt builds every spec here: read the workspace once
        build = dbt_assets(
            manifest=project.manifest_path,
            project=project,
            select=select,
            partitions_def=partitions_def,
            backfill_policy=BackfillPolicy.single_run(),
            dagster_dbt_translator=translator,
            name=name,
            pool=f"ducklake_{lake}",
            required_resource_keys={dbt_resource_key, "ducklake"},
        )

    @build
    def _fork_aware_partitioned_dbt_assets(context):  # no annotation: a string one (future import) is refused
        dbt = getattr(context.resources, dbt_resource_key)
        ducklake: DuckLakeResource = context.resources.ducklake
        fork = ducklake.resolve(lake).fork_mode
        written = _written(selected_tables(context, lake), fork)
        with dbt_subprocess_env(ducklake, list(written.values()), extra=partition_env(context, fork=fork)):
            invocation = dbt.cli(["build"], context=context, raise_on_error=False)
        yield from recorded_after_dbt(
            invocation, lambda events: record_partitions(context, ducklake, lake, written, events, invocation)
        )

    return _fork_aware_partitioned_dbt_assets
