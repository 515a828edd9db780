{#
  The `logged_merge` incremental strategy: dbt's merge of an incremental model's new rows that also
  appends the rows it changed to the model's change log (a dbt source whose meta.mv_log names the
  model), so the fast_refresh models built on it need no capture:

    {{ config(materialized='incremental', incremental_strategy='logged_merge', unique_key='order_id') }}

  dbt-spark's incremental materialization validates and renders strategies with the two macros
  below (not dispatched): this plugin's versions add `logged_merge` and hand every other strategy to
  dbt-spark's own. The merge, the log rows and both commits are made by the adapter
  (dbt_incremental_mv/refresh/logged_merge.py); the model's `main` statement then refreshes the
  table's cached metadata.
#}
{% macro dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format) %}
  {%- if raw_strategy == 'logged_merge' -%}
    {%- if file_format != 'iceberg' -%}
      {% do exceptions.raise_compiler_error(
        "Invalid incremental strategy provided: logged_merge needs file_format='iceberg' (it is '" ~ file_format ~ "')") %}
    {%- endif -%}
    {% do return(raw_strategy) %}
  {%- endif -%}
  {% do return(dbt_spark.dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format)) %}
{% endmacro %}


{% macro dbt_spark_get_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates) %}
  {%- if strategy == 'logged_merge' -%}
    {{ log(model.name ~ ': ' ~ adapter.mv_logged_merge(model, source, target, graph), info=True) }}
    refresh table {{ target }}
  {%- else -%}
    {{ dbt_spark.dbt_spark_get_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates) }}
  {%- endif -%}
{% endmacro %}
