{#
  The state of each fast_refresh view (Oracle's USER_MVIEWS.STALENESS), one line per view:
  fresh / stale (changes pending, by master) / needs rebuild (why) / unusable (why) / not built.
  Reads only: nothing is captured, refreshed or purged.

    dbt run-operation mv_status
    dbt run-operation mv_status --args '{models: [customer_orders]}'
#}
{% macro mv_status(models=none) -%}
  {%- for line in adapter.mv_status(graph, _mv_masters(models)) -%}
    {{ print(line) }}
  {%- endfor -%}
{%- endmacro %}
