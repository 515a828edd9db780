{% macro fast_refresh_create_sql(relation, sql, tblproperties) -%}
  {{ return(adapter.dispatch('fast_refresh_create_sql', 'dbt')(relation, sql, tblproperties)) }}
{%- endmacro %}

{#- The table of the view, built in full and atomically replaced: always Iceberg. -#}
{% macro spark_mv__fast_refresh_create_sql(relation, sql, tblproperties) -%}
  create or replace table {{ relation }}
  using iceberg
  {{ partition_cols(label="partitioned by") }}
  {{ location_clause() }}
  {{ comment_clause() }}
  {%- if tblproperties %}
  tblproperties (
    {%- for key, value in tblproperties.items() %}
    '{{ key | replace("\\", "\\\\") | replace("'", "\\'") }}' = '{{ value | replace("\\", "\\\\") | replace("'", "\\'") }}'{{ "," if not loop.last }}
    {%- endfor %}
  )
  {%- endif %}
  as
  {{ sql }}
{%- endmacro %}
