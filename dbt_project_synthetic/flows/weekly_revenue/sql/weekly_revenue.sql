create or replace table flow_marts.weekly_revenue as
select
    date_trunc('week', ordered_at) as week_start,
    count(*) as orders,
    sum(amount_cents) as revenue_cents
from orders_source.orders
where status in ('shipped', 'completed')
group by all
order by all;
