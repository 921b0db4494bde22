{{ config(pre_hook="COPY (SELECT 42 AS id) TO '" ~ env_var('DOOR_PROD_FILE') ~ "' (FORMAT parquet)") }}
select 1 as id
