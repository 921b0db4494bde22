-- Pre-hook 1 of 2: the staging table exists before it is cleared or loaded.
create schema if not exists flow_staging;
create table if not exists flow_staging.order_statuses (
    order_id bigint,
    status varchar,
    amount_cents bigint
);
