"""A chain of three stacked fast_refresh models: a join over the masters, a filter over the join,
an aggregate with HAVING over the filter. Each upstream model is the master of the next one, its
change log captured from its Iceberg history after dbt refreshed it (models run in DAG order)."""

from dataclasses import replace

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.differential import Workload, soak_factor
from tests.functional.test_aggregate_refresh import MASTERS, visible_columns

SRC = {name: f"{{{{ source('shop', '{name}') }}}}" for name in ("customers", "orders")}
VIEWS = {
    "order_regions": (  # over the masters
        "select o.order_id, o.status, o.amount, o.quantity, c.customer_id, c.region_id "
        f"from {SRC['orders']} o join {SRC['customers']} c on o.customer_id = c.customer_id"
    ),
    "live_order_regions": (  # over order_regions
        "select r.order_id, r.region_id, r.amount, r.quantity from {{ ref('order_regions') }} r "
        "where r.status is null or r.status <> 'cancelled'"
    ),
    "region_totals": (  # over live_order_regions
        "select l.region_id, count(*) as n, sum(l.amount) as total, max(l.quantity) as max_quantity "
        "from {{ ref('live_order_regions') }} l group by l.region_id having count(*) >= 2"
    ),
}
LOGS = """
  - name: model_logs
    schema: "{{ target.schema }}"
    tables:
      - name: mlog_order_regions
        meta: {mv_log: {master: order_regions, key: [order_id], capture: true}}
      - name: mlog_live_order_regions
        meta: {mv_log: {master: live_order_regions, key: [order_id], capture: true}}
"""


def defining_query(schema, sql):
    for name in ("orders", "customers"):
        sql = sql.replace(SRC[name], f"{schema}.{name}")
    for name in VIEWS:
        sql = sql.replace(f"{{{{ ref('{name}') }}}}", f"{schema}.{name}")
    return sql


class TestThreeStackedViews:
    @pytest.fixture(scope="class")
    def models(self):
        files = {f"{name}.sql": "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n" + sql
                 for name, sql in VIEWS.items()}
        files["sources.yml"] = Workload.sources_yml(MASTERS[:2]) + LOGS
        return files

    def check_all(self, workload):
        schema = workload.project.test_schema
        for name, sql in VIEWS.items():
            workload.check(name, defining_query(schema, sql), visible_columns(workload.project, name))

    @pytest.mark.parametrize("seed", [31])
    def test_randomized_workload(self, project, seed):
        workload = Workload(project, [replace(m, rows={}) for m in MASTERS[:2]], seed)
        workload.create(initial_rows=10)
        results = run_dbt(["run"])
        assert [r.node.name for r in results] == list(VIEWS)  # in DAG order
        self.check_all(workload)

        # (the chain below, whose levels write their logs, runs longer: this one covers capture)
        for round_number in range(2 * soak_factor()):
            workload.alternating_round(round_number, operations=8)
            results, log = run_dbt_and_capture(["run"])
            assert all(r.status == "success" for r in results), log
            # every level fast refreshed from the level below's change (its log captured)
            assert log.count("fast refresh:") == len(VIEWS), log
            self.check_all(workload)

        for kinds in (("insert", "delete"), ("update_key", "update")):
            workload.round(10, kinds=kinds)
            results, log = run_dbt_and_capture(["run"])
            assert all(r.status == "success" for r in results), log
            self.check_all(workload)


# The same chain over a logged incremental model, every level writing its change log itself: the
# incremental model by the logged_merge strategy, the two upstream views with mv_log=true. No level
# captures the one below from its history.
STAGED_COLUMNS = ("order_id", "customer_id", "amount", "weight", "quantity", "status")
STAGED = {
    "stg_orders": (  # the logged incremental model: merges the source rows that changed
        "{{ config(materialized='incremental', incremental_strategy='logged_merge', unique_key='order_id', "
        "file_format='iceberg') }}\n"
        f"select {', '.join('o.' + c for c in STAGED_COLUMNS)} from {SRC['orders']} o\n"
        "{% if is_incremental() %}\nwhere not exists (select 1 from {{ this }} t where "
        + " and ".join(f"t.{c} <=> o.{c}" for c in STAGED_COLUMNS) + ")\n{% endif %}"
    ),
    "order_regions": (
        "{{ config(materialized='fast_refresh', refresh_method='fast', mv_log=true) }}\n"
        "select o.order_id, o.status, o.amount, o.quantity, c.customer_id, c.region_id "
        f"from {{{{ ref('stg_orders') }}}} o join {SRC['customers']} c on o.customer_id = c.customer_id"
    ),
    "live_order_regions": (
        "{{ config(materialized='fast_refresh', refresh_method='fast', mv_log=true) }}\n" + VIEWS["live_order_regions"]
    ),
    "region_totals": "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n" + VIEWS["region_totals"],
}
OWN_LOGS = """
  - name: model_logs
    schema: "{{ target.schema }}"
    tables:
      - name: mlog_stg_orders
        meta: {mv_log: {master: stg_orders, key: [order_id]}}
      - name: mlog_order_regions
        meta: {mv_log: {master: order_regions, key: [order_id]}}
      - name: mlog_live_order_regions
        meta: {mv_log: {master: live_order_regions, key: [order_id]}}
"""


class TestThreeStackedViewsOverALoggedIncrementalModel:
    @pytest.fixture(scope="class")
    def models(self):
        files = {f"{name}.sql": sql for name, sql in STAGED.items()}
        files["sources.yml"] = Workload.sources_yml(MASTERS[:2]) + OWN_LOGS
        return files

    def check_all(self, workload):
        schema = workload.project.test_schema
        for name, sql in STAGED.items():
            if name == "stg_orders":
                continue
            query = defining_query(schema, sql.split("\n", 1)[1]).replace("{{ ref('stg_orders') }}", f"{schema}.stg_orders")
            workload.check(name, query, visible_columns(workload.project, name))

    def assert_logged_by_their_writers(self, log, schema):
        for name in ("stg_orders", "order_regions", "live_order_regions"):
            assert f"captured {schema}.mlog_{name}" not in log, log  # nobody captured them
        assert log.count("fast refresh:") == 3, log

    @pytest.mark.parametrize("seed", [37])
    def test_randomized_workload(self, project, seed, monkeypatch):
        schema = project.test_schema
        workload = Workload(project, [replace(m, rows={}) for m in MASTERS[:2]], seed)
        workload.create(initial_rows=10)
        results = run_dbt(["run"])
        assert [r.node.name for r in results] == list(STAGED)  # in DAG order
        self.check_all(workload)

        merged = []  # what the incremental model said each round
        for round_number in range(3 * soak_factor()):
            workload.alternating_round(round_number, operations=8)
            results, log = run_dbt_and_capture(["run"])
            assert all(r.status == "success" for r in results), log
            self.assert_logged_by_their_writers(log, schema)
            merged += [line for line in log.splitlines() if "stg_orders: " in line and "merge" in line]
            self.check_all(workload)
        assert any(f"image(s) to {schema}.mlog_stg_orders" in line for line in merged), merged

        for kinds in (("insert", "delete"), ("update_key", "update")):
            workload.round(10, kinds=kinds)
            results, log = run_dbt_and_capture(["run"])
            assert all(r.status == "success" for r in results), log
            self.check_all(workload)

        # a crash between a view's commit and its log's: the log lags, and the next refresh of the
        # view below captures the missing commit from the view's history (exactly once)
        from dbt_incremental_mv.refresh.phases import own_log

        def crash(ctx, pending):
            raise RuntimeError("killed between the view's commit and its log's")

        workload.round(8)
        run_dbt(["run", "--select", "stg_orders"])
        monkeypatch.setattr(own_log, "publish", crash)
        results, log = run_dbt_and_capture(["run", "--select", "order_regions"], expect_pass=False)
        monkeypatch.undo()
        assert "killed between" in log, log
        results, log = run_dbt_and_capture(["run"])
        assert all(r.status == "success" for r in results), log
        assert f"captured {schema}.mlog_order_regions" in log, log  # the lost commit, from history
        self.check_all(workload)
        workload.round(8)
        results, log = run_dbt_and_capture(["run"])
        assert all(r.status == "success" for r in results), log
        self.check_all(workload)
