-- Pre-hook 1 of 2: the staging table exists before anything is cleared or loaded.
create schema if not exists flow_staging;
create table if not exists flow_staging.orders_snapshot (
    snapshot_day date,
    order_id bigint,
    customer_id bigint,
    status varchar,
    amount_cents bigint
);
