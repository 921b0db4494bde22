{#- Orders per order day: one row per `order_date`, built one day-partition at a time.
    Dagster runs it per daily partition and passes the window as vars `dpone_partition_start`
    (inclusive) and `dpone_partition_end` (exclusive); without them (a plain `dbt build`) every day
    is built. delete+insert on `order_date` replaces exactly the days of the window, so re-running a
    partition is idempotent. The partition column is declared in `_marts.yml`
    (`meta.dpone.partition_by`); in a fork the table is written under the hidden name
    `daily_order_totals__fork` (see macros/generate_alias_name.sql) and read through a union view. -#}
{{ config(materialized="incremental", incremental_strategy="delete+insert", unique_key="order_date") }}

select
    order_date,
    count(*) as order_count,
    count(distinct customer_id) as customer_count,
    sum(order_amount) as order_amount
from {{ ref("stg_orders") }}
{% if var("dpone_partition_start", none) is not none %}
where order_date >= cast('{{ var("dpone_partition_start") }}' as date)
  and order_date < cast('{{ var("dpone_partition_end") }}' as date)
{% endif %}
group by order_date
