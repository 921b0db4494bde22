select
    cast(payment_id as bigint) as payment_id,
    cast(order_id as bigint) as order_id,
    payment_method,
    payment_kind,
    cast(amount_cents * 0.01 as decimal(18, 2)) as amount,
    case when payment_kind = 'charge' then cast(amount_cents * 0.01 as decimal(18, 2)) else 0 end as charged_amount,
    case when payment_kind = 'refund' then cast(-amount_cents * 0.01 as decimal(18, 2)) else 0 end as refunded_amount,
    paid_at
from {{ ref("raw_payments") }}
