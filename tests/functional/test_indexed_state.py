"""A join view with indexed_state=true (analysis/indexed.py) keeps the join of its other tables
sorted by a dimension's key, as an internal state, and is the dimension joined to that state,
maintained in two steps. Under randomized changes (NULL join keys, key changes, deletes, batched
and single statements) each step is fast refreshed and the view equals its query recomputed on the
masters; the state's table is written sorted by the dimension's key with bloom filters on its
keys; a run interrupted after any statement (in the state's refresh, between the state's commit
and the view's, in the view's) is completed by the next one; indexed_state=false drops the
state and rebuilds the view as one."""

from dataclasses import replace

import pytest
from dbt.tests.util import run_dbt_and_capture, write_file

from tests.depth import fault_points, sample
from tests.functional.differential import Workload, soak_factor
from tests.functional.test_aggregate_refresh import MASTERS, visible_columns
# (under a name pytest does not collect a second time here)
from tests.functional.test_change_logs import TestRefreshersInSeparateProcesses as Refreshers
from tests.functional.test_change_logs import interrupted_runs_recover

ORDERS, CUSTOMERS, REGIONS = (f"{{{{ source('shop', '{t}') }}}}" for t in ("orders", "customers", "regions"))
# regions, their customers and the customers' orders: the smallest dimension (regions) is the one indexed,
# the state the customers' orders sorted by region_id
REGION_ORDERS = (
    "select r.region, c.customer_id, c.segment, o.order_id, o.amount, o.status "
    f"from {REGIONS} r join {CUSTOMERS} c on c.region_id = r.region_id "
    f"join {ORDERS} o on o.customer_id = c.customer_id where o.status is null or o.status <> 'cancelled'"
)
# retail customers' orders: the state the orders (NULL customer_id included) sorted by customer_id
RETAIL_ORDERS = (
    "select o.order_id, o.amount, c.customer_id, c.region_id "
    f"from {ORDERS} o join {CUSTOMERS} c on o.customer_id = c.customer_id where c.segment = 'retail'"
)
INDEXED = "{{ config(materialized='fast_refresh', refresh_method='fast', indexed_state=true) }}\n"
MODELS = {"region_orders": INDEXED + REGION_ORDERS, "retail_orders": INDEXED + RETAIL_ORDERS}
STATES = {"region_orders": "region_orders__mv_state_by_region_id", "retail_orders": "retail_orders__mv_state_by_customer_id"}


class TestIndexedJoinState:
    @pytest.fixture(scope="class")
    def models(self):
        return {**{f"{name}.sql": sql for name, sql in MODELS.items()}, "sources.yml": Workload.sources_yml(MASTERS)}

    def query(self, workload, sql):
        schema = workload.project.test_schema
        for source, table in ((ORDERS, "orders"), (CUSTOMERS, "customers"), (REGIONS, "regions")):
            sql = sql.replace(source, f"{schema}.{table}")
        return sql

    def check(self, workload):
        for view, sql in (("region_orders", REGION_ORDERS), ("retail_orders", RETAIL_ORDERS)):
            workload.check(view, self.query(workload, sql), visible_columns(workload.project, view))

    def test_the_view_over_its_indexed_state_equals_its_query(self, project):
        workload = Workload(project, [replace(m, rows={}) for m in MASTERS], 43)
        workload.create(initial_rows=10)
        results, log = run_dbt_and_capture(["run"])
        assert all(r.status == "success" for r in results), log
        for view, state in STATES.items():
            assert f"{state}: build (first run" in log and f"{view}: build (" in log, log
        self.check(workload)
        schema = project.test_schema
        properties = dict(
            (r[0], r[1]) for r in project.run_sql(f"show tblproperties {schema}.{STATES['retail_orders']}", fetch="all")
        )
        blooms = {k.rpartition(".")[2] for k, v in properties.items() if "bloom-filter-enabled.column." in k and v == "true"}
        assert blooms == {"_mv_o_order_id"}, properties
        # the view over it is sorted by the dimension's key (its DELETEs by changed customers prune), blooms the state's
        properties = dict((r[0], r[1]) for r in project.run_sql(f"show tblproperties {schema}.retail_orders", fetch="all"))
        blooms = {k.rpartition(".")[2] for k, v in properties.items() if "bloom-filter-enabled.column." in k and v == "true"}
        assert blooms == {"_mv_mv_indexed_o__order_id"}, properties
        # written sorted by the dimension's key: each data file holds a range of it (one file here; the build sorts)
        _, explained = run_dbt_and_capture(["run-operation", "explain_fast_refresh", "--args", "{model: retail_orders}"])
        assert "indexed by customers's key: the join of orders sorted by orders.customer_id" in explained, explained
        for round_number in range(3 * soak_factor()):
            workload.alternating_round(round_number, operations=8)
            results, log = run_dbt_and_capture(["run"], expect_pass=None)  # (the assertion shows the log)
            assert all(r.status == "success" for r in results), log
            for view, state in STATES.items():
                for unit in (state, view):
                    assert f"{unit}: fast refresh: " in log or f"{unit}: fast: nothing" in log, (unit, log)
            self.check(workload)

        # interrupted after any statement, the next run goes on from there: nothing lost, nothing doubled
        query = self.query(workload, REGION_ORDERS)
        faults = fault_points(30, 6, "indexed state")
        points = interrupted_runs_recover(workload, "region_orders", query, faults, visible_columns(project, "region_orders"))
        assert points >= 2, points

        # the config off: the view is rebuilt as one join view and its state dropped with its log
        write_file(
            "{{ config(materialized='fast_refresh', refresh_method='fast', indexed_state=false) }}\n" + RETAIL_ORDERS,
            project.project_root,
            "models",
            "retail_orders.sql",
        )
        results, log = run_dbt_and_capture(["run", "--select", "retail_orders"])
        assert all(r.status == "success" for r in results), log
        assert f"{STATES['retail_orders']} it no longer reads" in log, log
        tables = {row[1] for row in project.run_sql(f"show tables in {schema}", fetch="all")}
        assert STATES["retail_orders"] not in tables and f"{STATES['retail_orders']}__log" not in tables, tables
        workload.alternating_round(300, operations=8)
        results, log = run_dbt_and_capture(["run", "--select", "retail_orders"])
        assert "retail_orders: fast refresh: " in log, log
        query = self.query(workload, RETAIL_ORDERS)
        workload.check("retail_orders", query, visible_columns(project, "retail_orders"))


class TestRefreshersOfAnIndexedState(Refreshers):
    """Two refreshers in separate processes (test_change_logs.py's test) of a join view kept over
    an indexed state: A paused inside the state's step, inside the view's step, or between the
    state's publish and the view's step, while B refreshes both steps and publishes; then both at
    once. Each step has one compare-and-swap winner, the loser fails cleanly, and nothing is lost
    or applied twice."""

    CONFIGS = {"order_countries": ", indexed_state=true"}

    def pause_points(self) -> list[tuple[str, str | None]]:
        """A paused in the state's step (its first write, before its publish): A loses the state's
        compare-and-swap; in the view's step (a write of the view over the state): A loses the
        view's; between the state's publish and the view's step: A's view step starts after B's
        publish, from where B left the view, and publishes (what A changed in the state, B's view
        step has already read from the state's snapshots)."""
        state = "order_countries__mv_state_by_customer_id"
        points = [("delete from", state), ("mv_indexed", "order_countries"), (f"{state}', 'main'", None)]
        return sample(points, 1, "indexed state refreshers")  # at the CI's depth one, drawn by the run seed


class TestIndexedStateChosenByItsRecord:
    """indexed_state='auto' (the default; refresh/indexed_choice.py): a join view keeps the state
    once its record says the dimension's changes cost more than the state would, and drops it when
    the facts' changes outweigh them, each switch a rebuild, the view equal to its query throughout.
    The prices are patched so that this small view's facts cost what large ones do (a GB read at
    1e9 s), and two recorded refreshes suffice."""

    @pytest.fixture(scope="class")
    def models(self):
        auto = "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n"
        return {"retail_orders.sql": auto + RETAIL_ORDERS, "sources.yml": Workload.sources_yml(MASTERS)}

    def test_the_state_is_built_and_dropped_as_the_record_prices_it(self, project, monkeypatch):
        from dbt_incremental_mv.refresh import indexed_choice
        from dbt_incremental_mv.refresh.cost import calibration
        from dbt_incremental_mv.refresh.phases import plan as plan_phase

        prices = replace(calibration(), seconds_per_gb_read=1e9, fast_fixed_seconds=0.0)
        monkeypatch.setattr(plan_phase, "calibration", lambda: prices)
        monkeypatch.setattr(indexed_choice, "MIN_RECORDED", 2)
        # every customer change re-joined with the orders, as a dimension's moves into the view are
        # (an update patched from the view, or a new customer no order can hold, reads no order and
        # is not recorded as the dimension's: tests/functional/test_join_refresh.py)
        from dbt_incremental_mv.refresh.phases import mark

        monkeypatch.setattr(mark, "plan_patched_by", lambda plan, spec: None)
        workload = Workload(project, [replace(m, rows={}) for m in MASTERS], 47)
        workload.create(initial_rows=10)
        schema, state = project.test_schema, STATES["retail_orders"]
        query = TestIndexedJoinState().query(workload, RETAIL_ORDERS)

        def run(masters, expected):
            if masters:
                workload.round(6, masters=masters)
            if "customers" in masters:  # a change the view sees (changes outside its segment cost nothing)
                customers = f"{schema}.customers"
                project.run_sql(
                    f"update {customers} set segment = case when segment = 'retail' then 'corporate' else 'retail' end "
                    f"where customer_id in (select min(customer_id) from {customers})"
                )
            results, log = run_dbt_and_capture(["run"], expect_pass=None)
            assert all(r.status == "success" for r in results), log
            for line in expected:
                assert line in log, (line, log)
            workload.check("retail_orders", query, visible_columns(project, "retail_orders"))
            tables = {row[1] for row in project.run_sql(f"show tables in {schema}", fetch="all")}
            return state in tables

        assert not run([], ["retail_orders: build (first run"])
        # the customers changing alone: recorded, then the state pays (the switch rebuilds once)
        assert not run(["customers"], ["retail_orders: fast refresh: "])
        _, explained = run_dbt_and_capture(
            ["run-operation", "explain_fast_refresh", "--args", "{model: retail_orders}"]
        )
        assert "indexed state: indexed_state=auto: the state is not kept: of the last 1 fast refreshes" not in explained
        assert (
            "indexed state: indexed_state=auto: the state is not kept until 2 fast refreshes are recorded (1 so far)"
            in explained
        ), explained
        assert not run(["customers"], ["retail_orders: fast refresh: "])
        _, explained = run_dbt_and_capture(
            ["run-operation", "explain_fast_refresh", "--args", "{model: retail_orders}"]
        )
        assert (
            "indexed state: indexed_state=auto: the state is built now: of the last 2 fast refreshes 2 changed"
            in explained
        ), explained
        assert run(
            ["customers"],
            [f"{state}: build (first run", "retail_orders: build (the view is now read from its internal state"],
        )
        # the orders changing alone, refreshed through the state: recorded until they outweigh the customers
        for _ in range(3):
            assert run(["orders"], [f"{state}: fast refresh: ", "retail_orders: fast refresh: "])
        _, explained = run_dbt_and_capture(
            ["run-operation", "explain_fast_refresh", "--args", "{model: retail_orders}"]
        )
        assert "the state is dropped now: of the last 5 fast refreshes 2 changed shop.customers" in explained, explained
        assert not run(
            ["orders"], ["retail_orders: build (the view is now maintained as one view", f"{state} it no longer reads"]
        )
        assert not run(["orders", "customers"], ["retail_orders: fast refresh: "])
