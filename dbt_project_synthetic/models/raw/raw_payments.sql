{#- Payments for raw_orders: one charge, or two for split payments, at order time; a refund of the
    whole amount when an order is returned. payment_id = order_id * 10 + part (9 for refunds). -#}
with orders as (
    select order_id, ordered_at, status, amount_cents, updated_at
    from {{ ref("raw_orders") }}
),

charges as (
    select
        order_id,
        ordered_at,
        amount_cents,
        unnest(generate_series(1, case when {{ synthetic_unit("payment_split", "order_id") }} < 0.2 then 2 else 1 end)) as part,
        case when {{ synthetic_unit("payment_split", "order_id") }} < 0.2 then 2 else 1 end as parts
    from orders
)

select
    order_id * 10 + part as payment_id,
    order_id,
    {{ synthetic_pick(["credit_card", "bank_transfer", "gift_card", "wallet"], "payment_method", "order_id * 10 + part") }} as payment_method,
    'charge' as payment_kind,
    case
        when parts = 1 then amount_cents
        when part = 1 then amount_cents - amount_cents // 3
        else amount_cents // 3
    end as amount_cents,
    ordered_at + to_seconds(part - 1) as paid_at
from charges

union all

select
    order_id * 10 + 9 as payment_id,
    order_id,
    {{ synthetic_pick(["credit_card", "bank_transfer", "gift_card", "wallet"], "payment_method", "order_id * 10 + 1") }} as payment_method,
    'refund' as payment_kind,
    -amount_cents as amount_cents,
    updated_at as paid_at
from orders
where status = 'returned'
