{#- Customers as the source system shows them on `synthetic_as_of_day`: each customer changes
    segment up to twice (and country on the second change), so later as-of days update rows. -#}
{%- set as_of = var("synthetic_as_of_day") -%}
with customers as (
    select range as customer_id
    from range(1, {{ var("synthetic_customers") }} + 1)
),

change_days as (
    select
        customer_id,
        -1 - {{ synthetic_int("customer_signup_day", "customer_id", 365) }} as signup_day,
        {{ synthetic_int("customer_change_1", "customer_id", 120) }} as first_change_day
    from customers
),

versioned as (
    select
        *,
        first_change_day + 1 + {{ synthetic_int("customer_change_2", "customer_id", 60) }} as second_change_day,
        (first_change_day <= {{ as_of }})::integer
            + (first_change_day + 1 + {{ synthetic_int("customer_change_2", "customer_id", 60) }} <= {{ as_of }})::integer
            as version
    from change_days
)

select
    customer_id,
    {{ synthetic_pick(["Alex", "Sam", "Robin", "Kim", "Jordan", "Casey", "Riley", "Morgan", "Avery", "Quinn", "Jamie", "Drew"], "customer_first_name", "customer_id") }} as first_name,
    {{ synthetic_pick(["Example", "Sample", "Placeholder", "Testwood", "Demoford", "Mockridge", "Synthfield", "Dataway"], "customer_last_name", "customer_id") }} as last_name,
    'customer' || lpad(cast(customer_id as varchar), 5, '0') || '@example.com' as email,
    {{ synthetic_pick(["consumer", "small_business", "enterprise"], "customer_segment", "customer_id || ':' || version") }} as segment,
    {{ synthetic_pick(["AA", "BB", "CC", "DD", "EE"], "customer_country", "customer_id || ':' || (version // 2)") }} as country_code,
    {{ synthetic_moment("signup_day", "customer_signup_second", "customer_id") }} as signed_up_at,
    case version
        when 0 then {{ synthetic_moment("signup_day", "customer_signup_second", "customer_id") }}
        when 1 then {{ synthetic_moment("first_change_day", "customer_change_second", "customer_id || ':1'") }}
        else {{ synthetic_moment("second_change_day", "customer_change_second", "customer_id || ':2'") }}
    end as updated_at
from versioned
