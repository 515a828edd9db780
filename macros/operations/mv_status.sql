{#
  The state of each fast_refresh view (Oracle's USER_MVIEWS.STALENESS), one line per view:
  fresh / stale (changes pending, by master) / needs rebuild (why) / unusable (why) / not built.
  Reads only: nothing is captured, refreshed or purged.

    dbt run-operation mv_status
    dbt run-operation mv_status --args '{models: [customer_orders]}'
    dbt run-operation mv_status --args '{fail_on: [stale, needs_rebuild, unusable]}'   # non-zero exit: a CI gate
#}
{% macro mv_status(models=none, fail_on=none) -%}
  {%- set report = adapter.mv_status(graph, _mv_masters(models), _mv_masters(fail_on)) -%}
  {%- for line in report['lines'] -%}
    {{ print(line) }}
  {%- endfor -%}
  {%- if report['failure'] -%}
    {{ exceptions.raise_compiler_error(report['failure']) }}
  {%- endif -%}
{%- endmacro %}
