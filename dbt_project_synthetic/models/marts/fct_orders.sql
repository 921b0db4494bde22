{#- One row per order with its payment totals. Incremental (merge on order_id): a run re-reads
    orders updated since `fct_orders_lookback_days` before the newest row it already holds, so
    status changes and refunds update existing rows and new orders are inserted. -#}
{{ config(materialized="incremental", incremental_strategy="merge", unique_key="order_id") }}

with orders as (
    select * from {{ ref("stg_orders") }}
    {% if is_incremental() %}
    where updated_at > (
        select coalesce(max(updated_at), cast('1900-01-01' as timestamp)) - to_days({{ var("fct_orders_lookback_days") }})
        from {{ this }}
    )
    {% endif %}
),

payments as (
    select
        order_id,
        count(*) as payment_count,
        sum(charged_amount) as amount_paid,
        sum(refunded_amount) as amount_refunded,
        max(paid_at) as last_paid_at
    from {{ ref("stg_payments") }}
    where order_id in (select order_id from orders)
    group by order_id
)

select
    orders.order_id,
    orders.customer_id,
    orders.ordered_at,
    orders.order_date,
    orders.status,
    orders.order_amount,
    coalesce(payments.payment_count, 0) as payment_count,
    coalesce(payments.amount_paid, 0) as amount_paid,
    coalesce(payments.amount_refunded, 0) as amount_refunded,
    coalesce(payments.amount_paid, 0) - coalesce(payments.amount_refunded, 0) as net_amount,
    greatest(orders.updated_at, coalesce(payments.last_paid_at, orders.updated_at)) as updated_at
from orders
left join payments on payments.order_id = orders.order_id
