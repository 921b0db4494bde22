{#- Every order is fully charged: the charges add up to the order amount. -#}
{% test payments_cover_amount(model, column_name, amount_paid) %}
select *
from {{ model }}
where {{ amount_paid }} <> {{ column_name }}
{% endtest %}
