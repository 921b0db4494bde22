select
    cast(order_id as bigint) as order_id,
    cast(customer_id as bigint) as customer_id,
    ordered_at,
    cast(ordered_at as date) as order_date,
    status,
    cast(amount_cents * 0.01 as decimal(18, 2)) as order_amount,
    updated_at
from {{ ref("raw_orders") }}
