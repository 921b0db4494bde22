{{ config(materialized='external', location=env_var('DOOR_PROD_DIR') ~ '/external_door.parquet') }}
select 1 as id
