"""The fast_refresh materialization, first stage: build, rebuild, config validation."""

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.util import assert_view_matches_query, relation_exists, rows

CUSTOMERS = """customer_id,name,country
1,Ada,UK
2,Alan,UK
3,Grace,US
4,Edsger,
"""

ORDERS = """order_id,customer_id,amount
100,1,10.5
101,1,20.0
102,2,
103,3,7.25
104,,99.0
105,9,1.0
"""

JOIN_SQL = """
select o.order_id, o.amount, c.customer_id, c.name, c.country
from {{ ref('orders') }} o join {{ ref('customers') }} c on o.customer_id = c.customer_id
"""

AGGREGATE_SQL = """
select c.country, count(*) as orders, sum(o.amount) as amount
from {{ ref('orders') }} o join {{ ref('customers') }} c on o.customer_id = c.customer_id
group by c.country
"""


def defining_query(project, sql):
    return sql.replace("{{ ref('orders') }}", f"{project.test_schema}.orders").replace(
        "{{ ref('customers') }}", f"{project.test_schema}.customers"
    )


class TestBuildAndRebuild:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"customers.csv": CUSTOMERS, "orders.csv": ORDERS}

    @pytest.fixture(scope="class")
    def models(self):
        config = "{{ config(materialized='fast_refresh') }}"
        return {"order_customers.sql": config + JOIN_SQL, "country_totals.sql": config + AGGREGATE_SQL}

    def test_first_run_builds_then_runs_refresh_and_full_refresh_rebuilds(self, project):
        run_dbt(["seed"])
        results, log = run_dbt_and_capture(["run"])
        assert [r.status for r in results] == ["success", "success"]
        assert "order_customers: build (first run" in log
        self.assert_views_match(project)

        describe = rows(project, f"describe extended {project.test_schema}.order_customers")
        assert ("Provider", "iceberg", "") in describe

        project.run_sql(f"insert into {project.test_schema}.orders values (106, 4, 3.0), (107, 2, 4.5)")
        project.run_sql(f"delete from {project.test_schema}.orders where order_id = 100")
        results, log = run_dbt_and_capture(["run"])
        assert all(r.status == "success" for r in results)
        assert "order_customers: complete (fast refresh impossible:" in log
        self.assert_views_match(project)

        results, log = run_dbt_and_capture(["run", "--full-refresh"])
        assert all(r.status == "success" for r in results)
        assert "--full-refresh" in log
        self.assert_views_match(project)

    def assert_views_match(self, project):
        assert_view_matches_query(project, f"{project.test_schema}.order_customers", defining_query(project, JOIN_SQL))
        assert_view_matches_query(project, f"{project.test_schema}.country_totals", defining_query(project, AGGREGATE_SQL))


class TestBadRefreshMethod:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"orders.csv": ORDERS}

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "sometimes_view.sql": "{{ config(materialized='fast_refresh', refresh_method='sometimes', "
            "pre_hook=\"create table {{ this.schema }}.hook_ran (x int)\") }}"
            "select order_id, amount from {{ ref('orders') }}"
        }

    def test_fails_naming_the_value_and_creates_nothing(self, project):
        run_dbt(["seed"])
        results, log = run_dbt_and_capture(["run"], expect_pass=False)
        assert results[0].status == "error"
        assert "refresh_method='sometimes' is not supported" in log
        assert "'force', 'fast', 'complete'" in log
        assert not relation_exists(project, "sometimes_view")
        assert not relation_exists(project, "hook_ran")  # failed before the pre-hook


class TestRefreshMethods:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"orders.csv": ORDERS}

    @pytest.fixture(scope="class")
    def models(self):
        return {
            "fast_only.sql": "{{ config(materialized='fast_refresh', refresh_method='fast') }}"
            "select order_id, amount from {{ ref('orders') }}",
            "always_complete.sql": "{{ config(materialized='fast_refresh', refresh_method='complete') }}"
            "select order_id, amount from {{ ref('orders') }}",
            "parquet_view.sql": "{{ config(materialized='fast_refresh', file_format='parquet') }}"
            "select order_id from {{ ref('orders') }}",
        }

    def test_methods(self, project):
        run_dbt(["seed"])
        results, log = run_dbt_and_capture(["run"], expect_pass=False)
        status = {r.node.name: r.status for r in results}
        # fast_only's master has no change log: refused before anything is built (as Oracle
        # refuses CREATE MATERIALIZED VIEW ... REFRESH FAST without a log)
        assert status == {"fast_only": "error", "always_complete": "success", "parquet_view": "error"}
        assert "file_format='parquet' is not supported" in log
        assert "Model 'fast_only' cannot be fast refreshed: no change log is declared for master" in log
        assert not relation_exists(project, "parquet_view") and not relation_exists(project, "fast_only")

        project.run_sql(f"insert into {project.test_schema}.orders values (200, 1, 1.0)")
        results, log = run_dbt_and_capture(["run", "--select", "fast_only", "always_complete"], expect_pass=False)
        status = {r.node.name: r.status for r in results}
        assert status == {"fast_only": "error", "always_complete": "success"}
        assert "always_complete: complete (refresh_method='complete')" in log
        assert not relation_exists(project, "fast_only")
