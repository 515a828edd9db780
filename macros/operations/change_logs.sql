{#
  Change-log operations (the equivalent of Oracle's CREATE MATERIALIZED VIEW LOG):

    dbt run-operation create_mv_log                          # every declared log that does not exist
    dbt run-operation create_mv_log --args '{master: orders}'
    dbt run-operation capture_mv_log                         # append new master commits to capture-managed logs
#}
{% macro create_mv_log(master=none) -%}
  {%- for line in adapter.mv_log_create(graph, _mv_masters(master)) -%}
    {{ log(line, info=True) }}
  {%- endfor -%}
{%- endmacro %}

{% macro capture_mv_log(master=none) -%}
  {%- for line in adapter.mv_log_capture(graph, _mv_masters(master)) -%}
    {{ log(line, info=True) }}
  {%- endfor -%}
{%- endmacro %}

{% macro _mv_masters(master) -%}
  {%- if master is none -%}
    {{ return(none) }}
  {%- elif master is string -%}
    {{ return([master]) }}
  {%- else -%}
    {{ return(master) }}
  {%- endif -%}
{%- endmacro %}

{#
  On-commit refresh (Oracle's REFRESH FAST ON COMMIT): in a post-hook of a model that writes a
  master, propagate just the commit(s) it made to every fast_refresh view reading that master.

    {{ config(post_hook="{{ refresh_on_commit() }}") }}                 -- this model is the master
    {{ refresh_on_commit(master=ref('orders')) }}                       -- from an operation
    {{ refresh_on_commit(master=source('cdc', 'orders'), commits=[42]) }}  -- an ingestion-written log
#}
{% macro refresh_on_commit(master=none, commits=none) -%}
  {%- if execute -%}
    {%- for line in adapter.mv_refresh_on_commit(master if master is not none else this, graph, commits) -%}
      {{ log(line, info=True) }}
    {%- endfor -%}
  {%- endif -%}
  {{ return('') }}
{%- endmacro %}

{#
  Layout advice: the Iceberg sort orders that let each view's refresh prune data files (Oracle's
  advice to index the view's rowid columns and the masters' join columns). Printed, never run.

    dbt run-operation mv_layout_advice
    dbt run-operation mv_layout_advice --args '{models: [customer_orders]}'
#}
{% macro mv_layout_advice(models=none) -%}
  {%- for line in adapter.mv_layout_advice(graph, _mv_masters(models)) -%}
    {{ print(line) }}
  {%- endfor -%}
{%- endmacro %}
