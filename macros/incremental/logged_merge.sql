{#
  The `logged_merge` incremental strategy: dbt's merge of an incremental model's new rows that also
  appends the rows it changed to the model's change log (a dbt source whose meta.mv_log names the
  model), so the fast_refresh models built on it need no capture:

    {{ config(materialized='incremental', incremental_strategy='logged_merge', unique_key='order_id') }}

  dbt-spark's incremental materialization validates and renders strategies with the two macros
  below, which it calls without dispatch: this plugin's versions (its macros win over dbt-spark's)
  add `logged_merge`. dbt-spark's own macros cannot be called once overridden (internal packages
  have no namespace), so for every other strategy the two bodies are dbt-spark 1.11's, unchanged.
  The merge, the log rows and both commits are made by the adapter
  (dbt_incremental_mv/refresh/operations/logged_merge.py); the model's `main` statement then refreshes the
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
  {#-- dbt-spark 1.11's validation, with logged_merge named among the strategies #}
  {% set invalid_strategy_msg -%}
    Invalid incremental strategy provided: {{ raw_strategy }}
    Expected one of: 'append', 'merge', 'insert_overwrite', 'microbatch', 'logged_merge'
  {%- endset %}
  {% set invalid_merge_msg -%}
    Invalid incremental strategy provided: {{ raw_strategy }}
    You can only choose this strategy when file_format is set to 'delta' or 'iceberg' or 'hudi'
  {%- endset %}
  {% set invalid_insert_overwrite_endpoint_msg -%}
    Invalid incremental strategy provided: {{ raw_strategy }}
    You cannot use this strategy when connecting via endpoint
    Use the 'append' or 'merge' strategy instead
  {%- endset %}
  {% if raw_strategy not in ['append', 'merge', 'insert_overwrite', 'microbatch'] %}
    {% do exceptions.raise_compiler_error(invalid_strategy_msg) %}
  {%-else %}
    {% if raw_strategy == 'merge' and file_format not in ['delta', 'iceberg', 'hudi'] %}
      {% do exceptions.raise_compiler_error(invalid_merge_msg) %}
    {% endif %}
    {% if raw_strategy in ['insert_overwrite', 'microbatch'] and target.endpoint %}
      {% do exceptions.raise_compiler_error(invalid_insert_overwrite_endpoint_msg) %}
    {% endif %}
  {% endif %}
  {% do return(raw_strategy) %}
{% endmacro %}


{% macro dbt_spark_get_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates) %}
  {%- if strategy == 'logged_merge' -%}
    {{ log(model.name ~ ': ' ~ adapter.mv_logged_merge(model, source, target, graph), info=True) }}
    refresh table {{ target }}
  {#-- dbt-spark 1.11's strategies #}
  {%- elif strategy == 'append' -%}
    {{ get_insert_into_sql(source, target) }}
  {%- elif strategy == 'insert_overwrite' -%}
    {{ get_insert_overwrite_sql(source, target, existing) }}
  {%- elif strategy == 'microbatch' -%}
    {% set missing_partition_key_microbatch_msg -%}
      dbt-spark 'microbatch' incremental strategy requires a `partition_by` config.
      Ensure you are using a `partition_by` column that is of grain {{ config.get('batch_size') }}.
    {%- endset %}
    {%- if not config.get('partition_by') -%}
      {{ exceptions.raise_compiler_error(missing_partition_key_microbatch_msg) }}
    {%- endif -%}
    {{ get_insert_overwrite_sql(source, target, existing) }}
  {%- elif strategy == 'merge' -%}
    {{ get_merge_sql(target, source, unique_key, dest_columns=none, incremental_predicates=incremental_predicates) }}
  {%- else -%}
    {% set no_sql_for_strategy_msg -%}
      No known SQL for the incremental strategy provided: {{ strategy }}
    {%- endset %}
    {%- do exceptions.raise_compiler_error(no_sql_for_strategy_msg) -%}
  {%- endif -%}
{% endmacro %}
