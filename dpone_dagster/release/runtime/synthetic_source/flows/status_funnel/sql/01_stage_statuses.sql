insert into flow_staging.order_statuses
select order_id, status, amount_cents
from orders_source.orders;
