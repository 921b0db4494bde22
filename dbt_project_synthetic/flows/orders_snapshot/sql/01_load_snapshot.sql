insert into flow_staging.orders_snapshot
select current_date as snapshot_day, order_id, customer_id, status, amount_cents
from orders_source.orders;
