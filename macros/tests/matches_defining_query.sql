{#
  Generic test for users: the stored fast_refresh view equals its defining query recomputed now
  (as multisets; the plugin's hidden _mv_* columns left out). Each failing row says whether it is
  missing from the view or extra in it. Run it right after `dbt run` (masters changed since the
  last refresh make the view differ until the next one).

    models:
      - name: customer_orders
        data_tests:
          - matches_defining_query
#}
{% test matches_defining_query(model) %}
  {%- if execute -%}
    {{ adapter.mv_mismatch_sql(model) }}
  {%- else -%}
    select 1 as mv_problem where false
  {%- endif -%}
{% endtest %}
