{#- Customer dimension with full history (slowly changing dimension, type 2).

    One row per customer version: valid_from <= t < valid_to, valid_to null and is_current true
    for the live version. Incremental (merge on customer_version_id): a run compares each
    customer's tracked attributes with its current version; a change closes that version (sets
    valid_to, is_current = false) and opens a new one. The `is_current` column is what dpone keys on
    to recognise an SCD2 table. -#}
{{ config(materialized="incremental", incremental_strategy="merge", unique_key="customer_version_id") }}

with source as (
    select
        customer_id,
        full_name,
        email,
        segment,
        country_code,
        updated_at as changed_at,
        md5(concat_ws('|', full_name, email, segment, country_code)) as attributes_hash
    from {{ ref("stg_customers") }}
),

{% if is_incremental() %}
current_versions as (
    select * from {{ this }} where is_current
),

changed as (
    select source.*
    from source
    left join current_versions on current_versions.customer_id = source.customer_id
    where current_versions.customer_id is null
       or current_versions.attributes_hash <> source.attributes_hash
),

closed as (
    select
        current_versions.customer_version_id,
        current_versions.customer_id,
        current_versions.full_name,
        current_versions.email,
        current_versions.segment,
        current_versions.country_code,
        current_versions.attributes_hash,
        current_versions.valid_from,
        changed.changed_at as valid_to,
        false as is_current
    from current_versions
    inner join changed on changed.customer_id = current_versions.customer_id
),
{% else %}
changed as (
    select * from source
),
{% endif %}

opened as (
    select
        md5(cast(customer_id as varchar) || '|' || cast(changed_at as varchar)) as customer_version_id,
        customer_id,
        full_name,
        email,
        segment,
        country_code,
        attributes_hash,
        changed_at as valid_from,
        cast(null as timestamp) as valid_to,
        true as is_current
    from changed
)

{% if is_incremental() %}
select * from closed
union all
{% endif %}
select * from opened
