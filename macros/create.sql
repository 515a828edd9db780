{% macro fast_refresh_create_sql(relation, sql, tblproperties, partition_spec=[]) -%}
  {{ return(adapter.dispatch('fast_refresh_create_sql', 'dbt')(relation, sql, tblproperties, partition_spec)) }}
{%- endmacro %}

{#- The table of the view, built in full and atomically replaced: always Iceberg.
    partition_spec: partition_by, then clustered_by as Iceberg bucket() transforms (view_table.py). -#}
{% macro spark_mv__fast_refresh_create_sql(relation, sql, tblproperties, partition_spec=[]) -%}
  create or replace table {{ relation }}
  using iceberg
  {%- if partition_spec %}
  partitioned by ({{ partition_spec | join(', ') }})
  {%- endif %}
  {%- set location_root = config.get('location_root') %}
  {%- if location_root is not none %}
  location '{{ location_root }}/{{ relation.identifier }}'  {#- dbt-spark's location_clause, by the table's name: a view's internal states are tables of their own -#}
  {%- endif %}
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

{#- persist_docs column comments: a fast_refresh view is always Iceberg, whatever file_format says
    (dbt-spark skips models without file_format='iceberg'). -#}
{% macro spark_mv__alter_column_comment(relation, column_dict) -%}
  {%- if config.get('materialized') != 'fast_refresh' -%}
    {{ return(spark__alter_column_comment(relation, column_dict)) }}
  {%- endif -%}
  {%- for column_name in column_dict -%}
    {%- call statement('comment_' ~ loop.index) -%}
      alter table {{ relation }} alter column {{ adapter.quote(column_name) }}
      comment '{{ column_dict[column_name]['description'] | replace("\\", "\\\\") | replace("'", "\\'") }}'
    {%- endcall -%}
  {%- endfor -%}
{%- endmacro %}
