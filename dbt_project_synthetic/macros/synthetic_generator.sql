{#-
  The seeded generator behind the raw layer.

  Every "random" value is md5(seed | stream | key) read as an unsigned 64-bit integer: a pure
  function of the `synthetic_seed` var, a stream name and a row key. No state, no clock and no
  DuckDB RNG, so a row's values do not depend on thread count, batch size, run order or which
  other rows exist. Changing a stream name changes the data; keep them stable.
-#}

{% macro synthetic_bits(stream, key) -%}
    md5_number_lower('{{ var("synthetic_seed") }}|{{ stream }}|' || cast({{ key }} as varchar))
{%- endmacro %}

{#- An integer in [0, n). -#}
{% macro synthetic_int(stream, key, n) -%}
    cast({{ synthetic_bits(stream, key) }} % {{ n }} as bigint)
{%- endmacro %}

{#- A double in [0, 1), from the top 53 bits. -#}
{% macro synthetic_unit(stream, key) -%}
    (cast({{ synthetic_bits(stream, key) }} >> 11 as double) / 9007199254740992.0)
{%- endmacro %}

{#- One element of a fixed list of string literals. -#}
{% macro synthetic_pick(options, stream, key) -%}
    ([{%- for option in options -%}'{{ option }}'{{ ", " if not loop.last }}{%- endfor -%}])[1 + {{ synthetic_int(stream, key, options | length) }}]
{%- endmacro %}

{% macro synthetic_start() -%}
    cast('{{ var("synthetic_start_date") }}' as timestamp)
{%- endmacro %}

{#- A timestamp `day` days after the start, at a deterministic second of that day. -#}
{% macro synthetic_moment(day, stream, key) -%}
    ({{ synthetic_start() }} + to_days(cast({{ day }} as integer)) + to_seconds({{ synthetic_int(stream, key, 86400) }}))
{%- endmacro %}
