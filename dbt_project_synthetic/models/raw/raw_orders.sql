{#- Orders placed up to `synthetic_as_of_day`, with the status the source system shows that day:
    placed -> shipped (after 1 day) -> completed (after 3); a few are returned after 10 days. -#}
{%- set as_of = var("synthetic_as_of_day") -%}
{%- set per_day = var("synthetic_orders_per_day") -%}
with orders as (
    select
        range as order_id,
        (range - 1) // {{ per_day }} as order_day
    from range(1, ({{ as_of }} + 1) * {{ per_day }} + 1)
),

aged as (
    select
        order_id,
        order_day,
        {{ as_of }} - order_day as age_days,
        {{ synthetic_unit("order_returned", "order_id") }} < 0.06 as will_be_returned
    from orders
),

statused as (
    select
        *,
        case
            when will_be_returned and age_days >= 10 then 'returned'
            when age_days >= 3 then 'completed'
            when age_days >= 1 then 'shipped'
            else 'placed'
        end as status
    from aged
)

select
    order_id,
    1 + {{ synthetic_int("order_customer", "order_id", var("synthetic_customers")) }} as customer_id,
    {{ synthetic_moment("order_day", "order_second", "order_id") }} as ordered_at,
    status,
    500 + {{ synthetic_int("order_amount_cents", "order_id", 20000) }} as amount_cents,
    {{ synthetic_moment("order_day", "order_second", "order_id") }}
        + to_days(case status when 'returned' then 10 when 'completed' then 3 when 'shipped' then 1 else 0 end)
        as updated_at
from statused
