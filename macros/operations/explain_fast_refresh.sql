{#
  What the next refresh of one fast_refresh model would do, without doing it (Oracle's
  DBMS_MVIEW.EXPLAIN_MVIEW): its view class; every reason it cannot be fast refreshed, each with
  what to change; what the next dbt run does and why; the cost estimate refresh_method='force'
  decides by; the statements of each phase (capture, mark, write, publish, purge); layout advice.
  Reads only; works for a model not built yet.

    dbt run-operation explain_fast_refresh --args '{model: customer_orders}'
#}
{% macro explain_fast_refresh(model=none) -%}
  {%- set node = _mv_model_node(model) -%}
  {#- run-operation cannot ref() ephemeral models: such a model is explained from its stored definition -#}
  {%- set sql = render(node.raw_code) if adapter.mv_renderable(graph, model) else none -%}
  {%- for line in adapter.mv_explain(graph, model, sql) -%}
    {{ print(line) }}
  {%- endfor -%}
{%- endmacro %}

{% macro _mv_model_node(name) -%}
  {%- for node in graph.nodes.values() if node.resource_type == 'model' and node.name == name -%}
    {{ return(node) }}
  {%- endfor -%}
  {{ return(none) }}
{%- endmacro %}
