{#
  A materialized view kept up to date by fast refresh.

  Python decides (validation and the refresh plan: adapter.fast_refresh_plan), Jinja renders:
  the plan is made before anything is run, so a bad config changes nothing.
#}
{% materialization fast_refresh, adapter='spark_mv' %}
  {%- set existing_relation = load_cached_relation(this) -%}
  {%- set existing_type = existing_relation.type if existing_relation is not none else none -%}
  {%- set plan = adapter.fast_refresh_plan(model, existing_type, should_full_refresh()) -%}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set grant_config = config.get('grants') -%}

  {{ log(model.name ~ ': ' ~ plan.action ~ ' (' ~ plan.reason ~ ')', info=True) }}

  {{ run_hooks(pre_hooks) }}

  {%- if existing_relation is not none and existing_type != 'table' -%}
    {% do adapter.drop_relation(existing_relation) %}
  {%- endif -%}

  {%- call statement('main') -%}
    {{ fast_refresh_create_sql(target_relation, compiled_code) }}
  {%- endcall -%}

  {% set should_revoke = should_revoke(existing_relation, full_refresh_mode=(plan.action != 'fast')) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}
  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
