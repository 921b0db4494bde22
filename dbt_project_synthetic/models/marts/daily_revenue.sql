select
    cast(paid_at as date) as revenue_date,
    payment_method,
    count(*) as payment_count,
    sum(case when payment_kind = 'charge' then amount else 0 end) as gross_amount,
    -sum(case when payment_kind = 'refund' then amount else 0 end) as refunded_amount,
    sum(amount) as net_amount
from {{ ref("stg_payments") }}
group by all
