{#- Models land in the schema they name (raw, staging, marts), not `<target schema>_<name>`:
    the lake is the environment boundary, so schema names stay the same in every workspace. -#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {%- if custom_schema_name is none -%}
        {{ target.schema }}
    {%- else -%}
        {{ custom_schema_name | trim }}
    {%- endif -%}
{%- endmacro %}
