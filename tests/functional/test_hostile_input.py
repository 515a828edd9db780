"""Identifiers and config values that try SQL injection: refused, or quoted and harmless, never
executed. A canary table must survive every attempt with its rows unchanged."""

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture, write_file

from tests.functional.util import assert_view_matches_query, rows

ODD = "we`ird 'col\\"  # a master column name with a backtick, a quote and a backslash
DROP = "drop table {schema}.canary"

SOURCES = """
version: 2
sources:
  - name: shop
    schema: "{{{{ target.schema }}}}"
    tables:
      - name: orders
  - name: mv_logs
    schema: "{{{{ target.schema }}}}"
    tables:
      - name: mlog_orders
        meta: {{mv_log: {{master: shop.orders, key: [{key}], capture: true}}}}
"""

VIEW = """{{{{ config(materialized='fast_refresh', refresh_method='fast'{config}) }}}}
select o.order_id, o.`we``ird 'col\\` as odd from {{{{ source('shop', 'orders') }}}} o
"""

ON_COMMIT = """
{% macro hostile_on_commit(commits) %}
  {{ refresh_on_commit(master=source('shop', 'orders'), commits=commits) }}
{% endmacro %}
"""


class TestHostileInput:
    @pytest.fixture(scope="class")
    def models(self):
        return {"odd.sql": VIEW.format(config=""), "sources.yml": SOURCES.format(key="order_id")}

    @pytest.fixture(scope="class")
    def macros(self):
        return {"hostile.sql": ON_COMMIT}

    def canary_intact(self, project):
        assert rows(project, f"select id from {project.test_schema}.canary") == [(1,)]

    def test_injection_attempts_are_refused_or_harmless(self, project):
        schema = project.test_schema
        drop = DROP.format(schema=schema)
        project.run_sql(f"create table {schema}.canary (id int) using iceberg")
        project.run_sql(f"insert into {schema}.canary values (1)")
        project.run_sql(f"create table {schema}.orders (order_id bigint, `we``ird 'col\\` string) using iceberg")
        project.run_sql(f"insert into {schema}.orders values (1, 'it''s'), (2, 'back\\\\slash'), (3, null)")
        query = f"select order_id, `we``ird 'col\\` as odd from {schema}.orders"
        model = project.project_root.join("models", "odd.sql")
        sources = project.project_root.join("models", "sources.yml")

        # an odd master column name is quoted end to end: built, then fast refreshed
        run_dbt(["run"])
        project.run_sql(f"insert into {schema}.orders values (4, '); {drop}; --')")
        _, log = run_dbt_and_capture(["run"])
        assert "odd: fast refresh:" in log, log
        assert_view_matches_query(project, f"{schema}.odd", query, columns="order_id, odd")
        self.canary_intact(project)

        # a config value: refused by validation, naming it; nothing runs
        write_file(VIEW.format(config=f", refresh_stats=\"true'); {drop}; --\""), model)
        _, log = run_dbt_and_capture(["run"], expect_pass=False)
        assert "refresh_stats=" in log and "must be true or false" in log, log
        self.canary_intact(project)

        # tblproperties keys and values: stored verbatim as literals
        value = f"x'); {drop}; --\\"
        write_file(VIEW.format(config=", tblproperties={'hostile': \"" + value.replace("\\", "\\\\") + "\"}"), model)
        run_dbt(["run", "--full-refresh"])
        self.canary_intact(project)
        stored = rows(project, f"show tblproperties {schema}.odd ('hostile')")
        assert stored and stored[0][-1] == value, stored

        # a log key naming no master column: refused before anything changes
        write_file(VIEW.format(config=""), model)
        write_file(SOURCES.format(key=f"'order_id`) or 1=1; {drop}; --'"), sources)
        _, log = run_dbt_and_capture(["run"], expect_pass=False)
        assert "mlog_orders" in log and "order_id`) or 1=1" in log, log
        self.canary_intact(project)
        write_file(SOURCES.format(key="order_id"), sources)

        # on-commit commit ids are numbers, never pasted text
        _, log = run_dbt_and_capture(
            ["run-operation", "hostile_on_commit", "--args", f"{{commits: ['1) or (1=1); {drop}; --']}}"],
            expect_pass=False,
        )
        assert "is not a commit id: name commits by their integer ids" in log, log
        self.canary_intact(project)
        run_dbt(["run"])
        assert_view_matches_query(project, f"{schema}.odd", query, columns="order_id, odd")
