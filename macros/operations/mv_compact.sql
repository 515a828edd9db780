{#
  Compact the fast_refresh views whose refreshes left many delete files or small data files (mv_status
  recommends it, naming the view): Iceberg's rewrite_data_files, every data file with deletes rewritten
  with them applied, small files binpacked. Run it between refreshes.

    dbt run-operation mv_compact                                  # the views that are due
    dbt run-operation mv_compact --args '{models: [customer_orders]}'
    dbt run-operation mv_compact --args '{models: [customer_orders], every: true}'   # due or not
#}
{% macro mv_compact(models=none, every=false) -%}
  {%- for line in adapter.mv_compact(graph, _mv_masters(models), every) -%}
    {{ print(line) }}
  {%- endfor -%}
{%- endmacro %}
