{#
  The state of each fast_refresh view (Oracle's USER_MVIEWS.STALENESS), one line per view:
  fresh / stale (changes pending, by master) / needs rebuild (why) / unusable (why) / not built.
  Reads only: nothing is captured, refreshed or purged.

    dbt run-operation mv_status
    dbt run-operation mv_status --args '{models: [customer_orders]}'
    dbt run-operation mv_status --args '{fail_on: [stale, needs_rebuild, unusable]}'   # non-zero exit: a CI gate
#}
{% macro mv_status(models=none, fail_on=none) -%}
  {#- a view maintained in steps stores only the query over its internal states: its model's SQL is rendered -#}
  {%- set rendered = {} -%}
  {%- for name in adapter.mv_in_steps(graph, _mv_masters(models)) if adapter.mv_renderable(graph, name) -%}
    {%- do rendered.update({name: render(_mv_model_node(name).raw_code)}) -%}
  {%- endfor -%}
  {%- set report = adapter.mv_status(graph, _mv_masters(models), _mv_masters(fail_on), rendered) -%}
  {%- for line in report['lines'] -%}
    {{ print(line) }}
  {%- endfor -%}
  {%- if report['failure'] -%}
    {{ exceptions.raise_compiler_error(report['failure']) }}
  {%- endif -%}
{%- endmacro %}
