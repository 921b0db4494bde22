create schema if not exists flow_marts;
create or replace table flow_marts.customer_order_counts as
select customer_id, count(*) as orders, max(ordered_at) as last_ordered_at
from orders_source.orders
group by all
order by all;
