{#- SCD2 integrity: a closed version ends after it starts; an open one is the current one. -#}
{% test valid_interval(model, column_name, valid_to) %}
select *
from {{ model }}
where ({{ valid_to }} is not null and {{ valid_to }} <= {{ column_name }})
   or (({{ valid_to }} is null) <> is_current)
{% endtest %}
