{#- SCD2 integrity: every key has exactly one row with `is_current` true. -#}
{% test one_current_row_per_key(model, column_name) %}
select {{ column_name }}, count(*) filter (where is_current) as current_rows
from {{ model }}
group by {{ column_name }}
having count(*) filter (where is_current) <> 1
{% endtest %}
