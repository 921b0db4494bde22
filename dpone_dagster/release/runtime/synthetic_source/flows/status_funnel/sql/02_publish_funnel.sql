create schema if not exists flow_marts;
create or replace table flow_marts.status_funnel as
select status, count(*) as orders, sum(amount_cents) as amount_cents
from flow_staging.order_statuses
group by status
order by orders desc, status;
