"""On-commit refresh: propagate exactly the named commit(s) of a master (Oracle 11gR2, xid$$)."""

import re

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.util import rows

SOURCES = """
version: 2
sources:
  - name: shop
    schema: "{{ target.schema }}"
    tables:
      - name: customers
      - name: incoming
  - name: mv_logs
    schema: "{{ target.schema }}"
    tables:
      - name: mlog_customers
        meta: {mv_log: {master: shop.customers, key: [customer_id], capture: true}}
      - name: mlog_orders
        meta: {mv_log: {master: orders, key: [order_id], capture: true}}
"""

# The master written by dbt: an incremental model whose post-hook refreshes its dependent views.
ORDERS = """
{{ config(materialized='incremental', incremental_strategy='append', file_format='iceberg',
          post_hook="{{ refresh_on_commit() }}") }}
select order_id, customer_id, amount from {{ source('shop', 'incoming') }}
{% if is_incremental() %} where order_id > (select coalesce(max(order_id), 0) from {{ this }}) {% endif %}
"""

VIEW = """
{{ config(materialized='fast_refresh', refresh_method='fast') }}
select o.order_id, o.amount, c.customer_id, c.name
from {{ ref('orders') }} o join {{ source('shop', 'customers') }} c on o.customer_id = c.customer_id
"""

TOTALS = """
{{ config(materialized='fast_refresh', refresh_method='fast') }}
select c.name, count(*) as n, sum(o.amount) as total
from {{ ref('orders') }} o join {{ source('shop', 'customers') }} c on o.customer_id = c.customer_id
group by c.name
"""

PROPAGATE = """
{% macro propagate_commits(commits) %}
  {{ refresh_on_commit(master=source('shop', 'customers'), commits=commits) }}
{% endmacro %}
"""


class TestOnCommit:
    @pytest.fixture(scope="class")
    def models(self):
        return {"orders.sql": ORDERS, "order_names.sql": VIEW, "name_totals.sql": TOTALS, "sources.yml": SOURCES}

    @pytest.fixture(scope="class")
    def macros(self):
        return {"propagate.sql": PROPAGATE}

    def query(self, project, customers_as_of=None):
        customers = f"{project.test_schema}.customers"
        if customers_as_of is not None:
            customers += f" version as of {customers_as_of}"
        return (f"select o.order_id, o.amount, c.customer_id, c.name from {project.test_schema}.orders o "
                f"join {customers} c on o.customer_id = c.customer_id")

    def totals(self, project):
        return sorted(rows(project, f"select name, n, total from {project.test_schema}.name_totals"))

    def expected_totals(self, project, customers_as_of=None):
        return sorted(rows(project, f"select name, count(*), sum(amount) from ({self.query(project, customers_as_of)}) group by name"))

    def view(self, project):
        return sorted(rows(project, f"select order_id, amount, customer_id, name from {project.test_schema}.order_names"))

    def expected(self, project, customers_as_of=None):
        return sorted(rows(project, self.query(project, customers_as_of)))

    def snapshot(self, project, table):
        return rows(project, f"select snapshot_id from {project.test_schema}.{table}.refs where name = 'main'")[0][0]

    def test_post_hook_and_named_commits(self, project):
        schema = project.test_schema
        project.run_sql(f"create table {schema}.customers (customer_id bigint, name string) using iceberg")
        project.run_sql(f"insert into {schema}.customers values (1, 'ada'), (2, 'alan'), (3, 'grace')")
        project.run_sql(f"create table {schema}.incoming (order_id bigint, customer_id bigint, amount double) using iceberg")
        project.run_sql(f"insert into {schema}.incoming values (1, 1, 10.0), (2, 2, 20.0)")
        run_dbt(["run"])
        assert self.view(project) == self.expected(project)

        # A customer changes (not propagated on commit), then orders arrive through the model.
        before_rename = self.snapshot(project, "customers")
        project.run_sql(f"update {schema}.customers set name = 'Ada L.' where customer_id = 1")
        project.run_sql(f"insert into {schema}.incoming values (3, 3, 30.0), (4, 2, 40.0)")
        _, log = run_dbt_and_capture(["run", "--select", "orders"])  # the view is not selected
        assert re.search(r"on-commit refresh of orders \([^)]*\.orders\) commit\(s\)", log), log
        # exactly the orders commit: new orders are in, the customer rename is not yet
        assert self.view(project) == self.expected(project, customers_as_of=before_rename)
        assert self.totals(project) == self.expected_totals(project, customers_as_of=before_rename)  # aggregate too
        assert rows(project, f"select count(*) from {schema}.mlog_orders where _mv_op = 'I'") == [(0,)]  # purged

        # Two commits on customers; name only the first one.
        project.run_sql(f"update {schema}.customers set name = 'Alan T.' where customer_id = 2")
        project.run_sql(f"update {schema}.customers set name = 'Grace H.' where customer_id = 3")
        third = self.snapshot(project, "customers")
        project.run_sql(f"update {schema}.customers set name = 'nobody' where customer_id = 3")
        _, log = run_dbt_and_capture(["run-operation", "propagate_commits", "--args", f"{{commits: [{third}]}}"])
        assert f"commit(s) {third}" in log
        names = {r[2]: r[3] for r in self.view(project)}
        assert names == {1: "ada", 2: "alan", 3: "Grace H."}  # only that commit, as of that commit
        assert self.totals(project) == sorted([("ada", 1, 10.0), ("alan", 2, 60.0), ("Grace H.", 1, 30.0)])

        # The next regular refresh takes everything else, and nothing twice.
        run_dbt(["run", "--select", "order_names", "name_totals"])
        assert self.view(project) == self.expected(project)
        assert self.totals(project) == self.expected_totals(project)
        assert rows(project, f"select _mv_op from {schema}.mlog_customers") == [("W",)]
