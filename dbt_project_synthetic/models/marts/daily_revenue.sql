select
    cast(paid_at as date) as revenue_date,
    payment_method,
    count(*) as payment_count,
    sum(charged_amount) as gross_amount,
    sum(refunded_amount) as refunded_amount,
    sum(amount) as net_amount
from {{ ref("stg_payments") }}
group by all
