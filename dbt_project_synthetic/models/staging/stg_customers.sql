select
    cast(customer_id as bigint) as customer_id,
    first_name || ' ' || last_name as full_name,
    lower(email) as email,
    segment,
    country_code,
    signed_up_at,
    updated_at
from {{ ref("raw_customers") }}
