{#
  A materialized view kept up to date by fast refresh.

  Python decides, Jinja renders and runs:
    plan     validate config, change logs and view definition; plan build / complete / fast (reads only):
             the refresh (its engine and the record of its run) that every later call takes. A query
             refused as one view that splits into internal states is maintained in steps (refresh/units.py):
             its states, then the view, each planned and refreshed below as a model of its own
    mark     capture the masters' new commits into their logs; fix which log rows and master snapshots
             this refresh uses; decide (once); return the propagate steps
    execute  the steps, each statement run through the adapter (dbt logs it): one staged Iceberg
             commit on the view, published atomically with the record of what it consumed
             (mv_log=true: what it changed written to the view's own change log first, on a
             branch the publish moves the log to)
    finish   purge log rows that every dependent view has consumed; log one line: what was done and why
#}
{% materialization fast_refresh, adapter='spark_mv' %}
  {%- set existing_relation = load_cached_relation(this) -%}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set full_refresh = should_full_refresh() -%}
  {%- set refresh = adapter.fast_refresh_plan(model, compiled_code, target_relation, existing_relation, full_refresh, graph) -%}
  {%- set grant_config = config.get('grants') -%}
  {%- if refresh.plan.contract is not none -%}
    {{ get_assert_columns_equivalent(compiled_code) }}  {#- names and types, before anything is created -#}
  {%- endif -%}
  {{ run_hooks(pre_hooks) }}

  {%- if existing_relation is not none and existing_relation.type != 'table' -%}
    {% do adapter.drop_relation(existing_relation) %}
  {%- endif -%}

  {%- set done = namespace(changed=false, action=refresh.action) -%}
  {%- for unit in refresh.units or [none] -%}
    {%- if unit is not none -%}  {#- maintained in steps: this unit's table, planned now that the units before it are refreshed -#}
      {%- set relation = target_relation.incorporate(path={'identifier': unit.identifier}) -%}
      {%- set existing = adapter.get_relation(relation.database, relation.schema, unit.identifier) -%}
      {%- set refresh = adapter.fast_refresh_plan(unit.model, unit.sql, relation, existing, full_refresh, unit.graph) -%}
    {%- endif -%}
    {%- set propagation = adapter.fast_refresh_mark(refresh) -%}
    {% do adapter.fast_refresh_execute(refresh, propagation, fast_refresh_create_sql, relation if unit is not none else target_relation) %}
    {%- set line = adapter.fast_refresh_finish(refresh, propagation, unit.graph if unit is not none else graph) -%}
    {{ log(refresh.plan.model_name ~ ': ' ~ line, info=True) }}
    {%- set done.changed = done.changed or (propagation.steps | length > 0) -%}
    {%- set done.action = refresh.action -%}
  {%- endfor -%}
  {% call noop_statement('main', 'OK' if done.changed else 'NO CHANGES') %}{% endcall %}

  {% set should_revoke = should_revoke(existing_relation, full_refresh_mode=(done.action != 'fast')) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}
  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
