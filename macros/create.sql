{% macro fast_refresh_create_sql(relation, sql) -%}
  {{ return(adapter.dispatch('fast_refresh_create_sql', 'dbt')(relation, sql)) }}
{%- endmacro %}

{#- The table of the view, built in full and atomically replaced: always Iceberg. -#}
{% macro spark_mv__fast_refresh_create_sql(relation, sql) -%}
  create or replace table {{ relation }}
  using iceberg
  {{ partition_cols(label="partitioned by") }}
  {{ location_clause() }}
  {{ comment_clause() }}
  {{ tblproperties_clause() }}
  as
  {{ sql }}
{%- endmacro %}
