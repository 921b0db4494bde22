{#- Orders per order day: one row per `order_date`, built one day-partition at a time.
    Dagster runs it per daily partition and passes the window as the environment variables
    `DPONE_PARTITION_START` (inclusive) and `DPONE_PARTITION_END` (exclusive), read only when
    `execute` (so dbt's partial parse never sees them: a new window re-parses nothing); without them
    (a plain `dbt build`) every day is built. delete+insert on `order_date` replaces exactly the days
    of the window, so re-running a partition is idempotent. The partition column is declared in `_marts.yml`
    (`meta.dpone.partition_by`); in a fork the run sets `DPONE_FORK_TABLE_SUFFIX=__fork`, so the
    table is written under the hidden name `daily_order_totals__fork` and read through a union view.
    The suffix is read here, in the model's own config, and not in a `generate_alias_name` macro:
    dbt tracks an env_var() read while parsing against the file that read it, and a changed
    `generate_alias_name` file makes dbt re-parse the whole project, where a changed model file is
    re-parsed alone. -#}
{{ config(
    materialized="incremental",
    incremental_strategy="delete+insert",
    unique_key="order_date",
    alias="daily_order_totals" ~ env_var("DPONE_FORK_TABLE_SUFFIX", ""),
) }}

select
    order_date,
    count(*) as order_count,
    count(distinct customer_id) as customer_count,
    sum(order_amount) as order_amount
from {{ ref("stg_orders") }}
{% set partition_start = env_var("DPONE_PARTITION_START", "") if execute else "" %}
{% if partition_start %}
where order_date >= cast('{{ partition_start }}' as date)
  and order_date < cast('{{ env_var("DPONE_PARTITION_END") }}' as date)
{% endif %}
group by order_date
