"""The generic test users attach to fast_refresh models: passes on a correct view, fails (with a
row per difference) on a wrong one, and names a model it cannot check."""

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.test_fast_refresh_build import AGGREGATE_SQL, CUSTOMERS, JOIN_SQL, ORDERS

SCHEMA_YML = """
version: 2
models:
  - name: order_customers
    data_tests: [matches_defining_query]
  - name: country_totals
    data_tests: [matches_defining_query]
  - name: plain_table
    data_tests: [matches_defining_query]
"""


class TestMatchesDefiningQuery:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"customers.csv": CUSTOMERS, "orders.csv": ORDERS}

    @pytest.fixture(scope="class")
    def models(self):
        config = "{{ config(materialized='fast_refresh') }}"
        return {
            "order_customers.sql": config + JOIN_SQL,
            "country_totals.sql": config + AGGREGATE_SQL,
            "plain_table.sql": "{{ config(materialized='table') }} select 1 as id",
            "schema.yml": SCHEMA_YML,
        }

    def test_detects_a_wrong_view(self, project):
        schema = project.test_schema
        run_dbt(["seed"])
        run_dbt(["run"])
        results = run_dbt(["test", "--select", "order_customers", "country_totals"])
        assert [r.status for r in results] == ["pass", "pass"]

        # a duplicated row and a changed aggregate: each found, the other view still passes
        project.run_sql(f"insert into {schema}.order_customers select * from {schema}.order_customers where order_id = 100")
        project.run_sql(f"update {schema}.country_totals set amount = amount + 1 where country = 'UK'")
        results = run_dbt(["test", "--select", "order_customers", "country_totals"], expect_pass=False)
        failures = {r.node.attached_node.split(".")[-1]: r.failures for r in results}
        assert failures == {"order_customers": 1, "country_totals": 2}  # the UK row: old missing, new extra

        # the masters change: the view differs until the next refresh, then passes again
        run_dbt(["run", "--full-refresh", "--select", "order_customers", "country_totals"])
        project.run_sql(f"insert into {schema}.orders values (200, 3, 1.0)")
        run_dbt(["test", "--select", "order_customers"], expect_pass=False)
        run_dbt(["run", "--select", "order_customers"])
        assert [r.status for r in run_dbt(["test", "--select", "order_customers"])] == ["pass"]

    def test_names_a_model_it_cannot_check(self, project):
        run_dbt(["run", "--select", "plain_table"])
        _, log = run_dbt_and_capture(["test", "--select", "plain_table"], expect_pass=False)
        assert "has no stored definition: it was not built by the fast_refresh materialization" in log, log
