select
    customers.customer_id,
    customers.segment,
    customers.country_code,
    count(orders.order_id) as order_count,
    coalesce(sum(orders.net_amount), 0) as lifetime_net_amount,
    min(orders.ordered_at) as first_ordered_at,
    max(orders.ordered_at) as last_ordered_at
from {{ ref("dim_customers_scd2") }} as customers
left join {{ ref("fct_orders") }} as orders on orders.customer_id = customers.customer_id
where customers.is_current
group by all
