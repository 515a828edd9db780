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
