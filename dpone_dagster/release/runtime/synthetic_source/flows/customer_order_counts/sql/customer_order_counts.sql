-- One row per synthetic customer: how many orders, how much revenue, when the first came in.
create schema if not exists flow_marts;
create or replace table flow_marts.customer_order_counts as
select
    customer_id,
    count(*) as orders,
    sum(amount_cents) as amount_cents,
    min(ordered_at) as first_ordered_at
from orders_source.orders
group by customer_id
order by customer_id;
