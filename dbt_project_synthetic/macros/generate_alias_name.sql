{#- A model that declares `meta.dpone.partition_by` is written under `<name><suffix>` when the run
    passes the var `dpone_fork_table_suffix` (dpone's partitioned Dagster assets do so in a fork,
    with `__fork`): the fork keeps its own partitions in that hidden table, and the model's own name
    is a view over the fork's partitions plus the parent's rows for the others
    (dpone_dagster.lake.partitions). Every other node, and every run without the var, gets dbt's
    default alias. -#}
{% macro generate_alias_name(custom_alias_name=none, node=none) -%}
    {%- set alias = default__generate_alias_name(custom_alias_name, node) -%}
    {%- set suffix = var("dpone_fork_table_suffix", "") -%}
    {%- set dpone_meta = ((node.config.meta or {}).get("dpone") or {}) if node is not none else {} -%}
    {%- if suffix and node.resource_type == "model" and dpone_meta.get("partition_by") -%}
        {{ alias ~ suffix }}
    {%- else -%}
        {{ alias }}
    {%- endif -%}
{%- endmacro %}
