"""The daily-partitioned dbt assets of dbt_project_synthetic: one `@dbt_assets` per partitions definition.

Models tagged `dpone_partitioned` (and declaring `meta: {dpone: {partition_by: <column>}}`) are left
out of the unpartitioned `synthetic_dbt_build` and built here one day at a time, dagster-dbt's
documented way: the partition's time window goes to dbt as the vars `dpone_partition_start`
(inclusive) and `dpone_partition_end` (exclusive), and the model filters on them. Every built
partition is recorded with its key and partition column, which is what lets a fork build some
days and read the others from its parent (`dpone_dagster.lake.resolution.partitions`).

In a fork the run also passes `dpone_fork_table_suffix` (`__fork`), so dbt writes the fork's days
into `<table>__fork` (macros/generate_alias_name.sql) and the plugin is told that hidden table as
the target; after recording, a second attach lays the union view at the table's own name.

What a reader could get wrong: the partitions are fixed, not "up to today": they span the synthetic
world (`synthetic_start_date` plus `synthetic_as_of_day` days, from dbt_project.yml), so the same
code always shows the same partitions. A partition key is the ISO date of the day, which is exactly
`CAST(order_date AS VARCHAR)` for the rows of that day, as per-partition defer requires.
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dagster import AssetExecutionContext, BackfillPolicy, DailyPartitionsDefinition, Output
from dagster_dbt import DbtCliInvocation, DbtCliResource, dbt_assets

from dpone_dagster.defs.dbt.assets import DBT_PROJECT, TRANSLATOR
from dpone_dagster.errors import DponeError
from dpone_dagster.integration.dbt.factory import (
    _row_count,
    dbt_subprocess_env,
    failed_tables,
    recorded_after_dbt,
    selected_tables,
)
from dpone_dagster.integration.dbt.translator import table_of
from dpone_dagster.integration.lake.resources import DuckLakeResource
from dpone_dagster.lake.guard.statement import quote_ident, sql_string
from dpone_dagster.lake.resolution.partitions import FORK_TABLE_SUFFIX, fork_table
from dpone_dagster.lake.resolution.plan import TableName

PARTITIONED_TAG = "dpone_partitioned"
PARTITIONED_SELECT = f"tag:{PARTITIONED_TAG}"
DAILY_START = "2024-01-01"
DAILY_END = "2024-03-02"
"""Exclusive: the synthetic world's last day is synthetic_start_date + synthetic_as_of_day (60)."""
DAILY_PARTITIONS = DailyPartitionsDefinition(start_date=DAILY_START, end_date=DAILY_END)


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
                f"model {node.get('name')!r} is tagged {PARTITIONED_TAG} but declares no "
                "meta.dpone.partition_by column"
            )
        out["{}.{}".format(*table_of(node))] = column
    return out


def partition_vars(context: AssetExecutionContext, *, fork: bool) -> dict[str, str]:
    window = context.partition_time_window
    out = {
        "dpone_partition_start": window.start.strftime("%Y-%m-%d"),
        "dpone_partition_end": window.end.strftime("%Y-%m-%d"),
    }
    if fork:
        out["dpone_fork_table_suffix"] = FORK_TABLE_SUFFIX
    return out


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
            metadata["table_rows"] = _row_count(conn, ducklake.alias(lake), table)
            metadata["partition_by"] = columns[table]
            event = out[index]
            out[index] = event.with_metadata({**event.metadata, **metadata})
    return out


@dbt_assets(
    manifest=DBT_PROJECT.manifest_path,
    project=DBT_PROJECT,
    select=PARTITIONED_SELECT,
    partitions_def=DAILY_PARTITIONS,
    backfill_policy=BackfillPolicy.single_run(),  # a backfill of many days is one dbt run
    dagster_dbt_translator=TRANSLATOR,
    name="synthetic_dbt_daily",
    pool=f"ducklake_{TRANSLATOR.lake}",
)
def synthetic_dbt_daily_assets(context: AssetExecutionContext, dbt: DbtCliResource, ducklake: DuckLakeResource):
    lake = TRANSLATOR.lake
    fork = ducklake.resolve(lake).fork_mode
    written = _written(selected_tables(context, lake), fork)
    args = ["build", "--vars", json.dumps(partition_vars(context, fork=fork), sort_keys=True)]
    with dbt_subprocess_env(ducklake, list(written.values())):
        invocation = dbt.cli(args, context=context, raise_on_error=False)
    yield from recorded_after_dbt(
        invocation, lambda events: record_partitions(context, ducklake, lake, written, events, invocation)
    )
