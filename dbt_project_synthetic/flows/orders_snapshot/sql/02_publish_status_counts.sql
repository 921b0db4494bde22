create schema if not exists flow_marts;
create or replace table flow_marts.order_status_counts as
select snapshot_day, status, count(*) as orders, sum(amount_cents) as amount_cents
from flow_staging.orders_snapshot
group by all
order by all;
