create or replace table flow_marts.daily_revenue as
select
    cast(ordered_at as date) as order_day,
    count(*) as orders,
    sum(amount_cents) as revenue_cents
from orders_source.orders
where status = 'completed'
group by order_day
order by order_day;
