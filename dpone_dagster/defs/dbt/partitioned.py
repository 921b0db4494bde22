"""The daily-partitioned dbt assets of dbt_project_synthetic: `fork_aware_partitioned_dbt_assets` over its days.

Models tagged `dpone_partitioned` are left out of the unpartitioned `synthetic_dbt_build` and built
here one day at a time by the generic partitioned op (`dpone_dagster.integration.dbt.partitioned`:
the window's vars, per-partition recording, a fork's `<table>__fork` and union view).

What a reader could get wrong: the partitions are fixed, not "up to today": they span the synthetic
world (`synthetic_start_date` plus `synthetic_as_of_day` days, from dbt_project.yml), so the same
code always shows the same partitions. A partition key is the ISO date of the day, which is exactly
`CAST(order_date AS VARCHAR)` for the rows of that day, as per-partition defer requires.
"""

from __future__ import annotations

from dagster import DailyPartitionsDefinition

from dpone_dagster.defs.dbt.assets import DBT_PROJECT, TRANSLATOR
from dpone_dagster.integration.dbt.partitioned import fork_aware_partitioned_dbt_assets

DAILY_START = "2024-01-01"
DAILY_END = "2024-03-02"
"""Exclusive: the synthetic world's last day is synthetic_start_date + synthetic_as_of_day (60)."""
DAILY_PARTITIONS = DailyPartitionsDefinition(start_date=DAILY_START, end_date=DAILY_END)

synthetic_dbt_daily_assets = fork_aware_partitioned_dbt_assets(
    project=DBT_PROJECT, translator=TRANSLATOR, partitions_def=DAILY_PARTITIONS, name="synthetic_dbt_daily"
)
