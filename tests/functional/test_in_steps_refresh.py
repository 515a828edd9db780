"""Models refused as one view that split into internal states (analysis/states.py) are maintained
in steps (refresh/units.py): each state a table of its own that logs its changes, refreshed first,
then the query over them, in one dbt run. With refresh_method='fast' every step is fast refreshed,
and the view equals its query recomputed on the masters under randomized changes, next to a stack
a user split by hand that reads the same master log (its purge must wait for the states). Then the
life of the states: mv_status and explain see them, a definition that splits differently retires
the old state (dropped once the view no longer reads it), --full-refresh rebuilds every step, and a
run interrupted after any statement is completed by the next one."""

from dataclasses import replace

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture, write_file

from tests.depth import fault_points
from tests.functional.differential import Workload, soak_factor
from tests.functional.test_change_logs import interrupted_runs_recover, run
from tests.functional.test_aggregate_refresh import MASTERS, visible_columns

ORDERS, CUSTOMERS = "{{ source('shop', 'orders') }}", "{{ source('shop', 'customers') }}"
# the latest order of each customer (ties cannot happen: ordered by the key), counted by amount and region
LATEST = (
    "with ranked as (select o.customer_id, o.order_id, o.amount, row_number() over "
    f"(partition by o.customer_id order by o.order_id desc) as rn from {ORDERS} o) "
    "select customer_id, order_id, amount from ranked where rn = 1"
)
COUNTED = (
    "select l.amount, c.region_id, count(*) as customers from LATEST l join "
    f"{CUSTOMERS} c on l.customer_id = c.customer_id group by l.amount, c.region_id"
)
WHOLE = LATEST.replace(" select customer_id", ", latest as (select customer_id") + ") " + COUNTED.replace("LATEST", "latest")
# the first and the latest order of each customer: one is a state, the query over it reads the other as written
FIRST_LATEST = (
    "with latest as (select customer_id, order_id, amount from (select o.customer_id, o.order_id, o.amount, "
    f"row_number() over (partition by o.customer_id order by o.order_id desc) as rn from {ORDERS} o) r where rn = 1), "
    "firsts as (select customer_id, order_id, status from (select o.customer_id, o.order_id, o.status, "
    f"row_number() over (partition by o.customer_id order by o.order_id) as rn from {ORDERS} o) r where rn = 1) "
    "select f.status as first_status, count(*) as customers, sum(l.amount) as latest_total "
    "from latest l join firsts f on l.customer_id = f.customer_id group by f.status"
)
# each customer's first label among its orders' statuses and its segment (the first row per key of a UNION:
# a state keyed by its PARTITION BY), counted by label
FIRST_LABELS = (
    f"with u as (select o.customer_id as k, o.status as label from {ORDERS} o union "
    f"select c.customer_id, c.segment from {CUSTOMERS} c), "
    "r as (select k, label from (select k, label, row_number() over (partition by k order by label) as rn from u) x "
    "where rn = 1) select r.label, count(*) as n from r group by r.label"
)
# the labels of the customers (a UNION: a state keyed by every column), counted by the parity of the customer
LABEL_PARITY = (
    f"with u as (select o.customer_id as k, o.status as label from {ORDERS} o union "
    f"select c.customer_id, c.segment from {CUSTOMERS} c) "
    "select u.k % 2 as parity, count(*) as n, count(u.label) as labels from u group by u.k % 2"
)
# shipped orders, a line per customer and each customer's total, in one UNION ALL (branches in parentheses,
# as dbt_utils.union_relations writes them: a state keyed by each branch's number and own key), per region
MOVES = (
    f"with moves as ((select o.order_id as id, o.customer_id as customer, o.amount from {ORDERS} o "
    f"where o.status = 'shipped') union all (select c.customer_id, c.customer_id + 0, "
    f"cast(c.region_id as decimal(10,2)) from {CUSTOMERS} c) union all (select o.customer_id, max(o.customer_id), "
    f"sum(o.amount) from {ORDERS} o group by o.customer_id)) select c.region_id, sum(m.amount) as amount, "
    f"count(*) as n from moves m join {CUSTOMERS} c on m.customer = c.customer_id group by c.region_id"
)
# the latest order of each customer with its region (a ranking of a join, in a subquery in FROM: a state keyed
# by its PARTITION BY), per region
REGION_LATEST = (
    "select l.region_id, count(*) as customers, sum(l.amount) as latest_total from (select customer_id, region_id, "
    "amount from (select o.customer_id, c.region_id, o.amount, row_number() over (partition by o.customer_id "
    f"order by o.order_id desc) as rn from {ORDERS} o left join {CUSTOMERS} c on o.customer_id = c.customer_id) "
    "numbered where rn = 1) l group by l.region_id"
)
# orders and customers full outer joined (orders of no customer, customers without orders), counted by a
# column of each side (not the join key): the join a state keyed by both tables' keys (NULL where a side is
# missing), partitioned by its key; the aggregate over it
FULL_STATUS = (
    "select o.status, c.segment, count(*) as n, count(o.order_id) as orders, sum(o.amount) as amount "
    f"from {ORDERS} o full outer join {CUSTOMERS} c on o.customer_id = c.customer_id group by o.status, c.segment"
)
# the same on columns no key holds (NULLs on both sides), filtered, under DISTINCT: partitioned by the joined value
FULL_QUANTITY = (
    f"select distinct c.segment, o.quantity, o.status from {ORDERS} o full join {CUSTOMERS} c "
    "on o.quantity = c.region_id where o.status is null or o.status <> 'cancelled'"
)
FAST = "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n"
MODELS = {
    "whole": FAST + WHOLE,
    "first_latest": FAST + FIRST_LATEST,
    "first_labels": FAST + FIRST_LABELS,
    "label_parity": FAST + LABEL_PARITY,
    "moves": FAST + MOVES,
    "region_latest": FAST + REGION_LATEST,
    "full_status": FAST + FULL_STATUS,
    "full_quantity": FAST + FULL_QUANTITY,
    "latest": "{{ config(materialized='fast_refresh', refresh_method='fast', mv_log=true) }}\n" + LATEST,
    "latest_amounts": FAST + COUNTED.replace("LATEST", "{{ ref('latest') }}"),
}
TESTS = """
models:
  - name: whole
    data_tests: [matches_defining_query]
"""
LOGS = """
  - name: model_logs
    schema: "{{ target.schema }}"
    tables:
      - name: mlog_latest
        meta: {mv_log: {master: latest, key: [customer_id]}}
"""


class TestViewsMaintainedInSteps:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            **{f"{name}.sql": sql for name, sql in MODELS.items()},
            "sources.yml": Workload.sources_yml(MASTERS[:2]) + LOGS,
            "schema.yml": TESTS,
        }

    def query(self, workload, sql):
        schema = workload.project.test_schema
        return sql.replace(ORDERS, f"{schema}.orders").replace(CUSTOMERS, f"{schema}.customers")

    def check(self, workload, whole=WHOLE):
        for view, sql in (
            ("whole", whole), ("first_latest", FIRST_LATEST), ("first_labels", FIRST_LABELS), ("latest_amounts", WHOLE),
            ("label_parity", LABEL_PARITY), ("moves", MOVES), ("region_latest", REGION_LATEST),
            ("full_status", FULL_STATUS), ("full_quantity", FULL_QUANTITY),
        ):
            workload.check(view, self.query(workload, sql), visible_columns(workload.project, view))

    def operation(self, *args):
        _, log = run_dbt_and_capture(["run-operation", *args])
        return log

    @pytest.mark.parametrize("seed", [41])
    def test_each_step_is_fast_refreshed_and_the_view_equals_its_query(self, project, seed):
        workload = Workload(project, [replace(m, rows={}) for m in MASTERS[:2]], seed)
        workload.create(initial_rows=10)
        results, log = run_dbt_and_capture(["run"])
        assert all(r.status == "success" for r in results), log
        assert "whole__mv_state_latest: build (first run" in log and "first_latest__mv_state_firsts: build" in log, log
        self.check(workload)
        assert "whole: fresh" in self.operation("mv_status", "--args", "{models: [whole]}")
        for round_number in range(2 * soak_factor()):
            workload.alternating_round(round_number, operations=8)
            status = self.operation("mv_status", "--args", "{models: [whole]}")
            assert "whole: stale (whole__mv_state_latest: stale (changes pending: " in status, status
            results, log = run_dbt_and_capture(["run"])
            assert all(r.status == "success" for r in results), log
            for unit in ("whole__mv_state_latest", "whole", "first_latest__mv_state_firsts", "first_latest",
                         "first_labels__mv_state_r", "first_labels", "label_parity__mv_state_u", "label_parity",
                         "moves__mv_state_moves", "moves", "region_latest__mv_state_l", "region_latest",
                         "full_status__mv_state_joined", "full_status", "full_quantity__mv_state_joined",
                         "full_quantity"):
                assert f"{unit}: fast refresh: " in log or f"{unit}: fast: nothing" in log, (unit, log)
            assert "latest: fast refresh:" in log and "latest_amounts: fast refresh:" in log, log
            self.check(workload)

        # the generic test compares the view with the model's own query on the masters
        results, log = run_dbt_and_capture(["test", "-s", "whole"])
        assert [r.status for r in results] == ["pass"], log

        explained = self.operation("explain_fast_refresh", "--args", "{model: whole}")
        assert "view class: maintained in 2 steps: the internal state latest (a ranked view, key customer_id" in explained
        assert "-- step 1 of 2" in explained and "-- explain_fast_refresh: whole__mv_state_latest (" in explained

        # the model changes so that it splits differently: the new state is built, the view rebuilt
        # over it, and the old state, no longer read, dropped with its log
        renamed = WHOLE.replace("latest", "newest")
        write_file(FAST + renamed, project.project_root, "models", "whole.sql")
        workload.alternating_round(99, operations=8)
        results, log = run_dbt_and_capture(["run"])
        assert all(r.status == "success" for r in results), log
        assert "whole__mv_state_newest: build (first run" in log and "whole: build (" in log, log
        assert "dropped the internal state" in log and "whole__mv_state_latest it no longer reads" in log, log
        tables = {row[1] for row in project.run_sql(f"show tables in {project.test_schema}", fetch="all")}
        assert "whole__mv_state_newest" in tables and "whole__mv_state_latest" not in tables, tables
        assert "whole__mv_state_latest__log" not in tables, tables
        self.check(workload, whole=renamed)

        results, log = run_dbt_and_capture(["run", "--full-refresh"])
        assert all(r.status == "success" for r in results), log
        assert "whole__mv_state_newest: build (--full-refresh" in log and "whole: build (--full-refresh" in log, log
        workload.alternating_round(100, operations=8)
        run_dbt(["run"])
        self.check(workload, whole=renamed)

        # interrupted after any statement (in a state's refresh, between the state's commit and the
        # view's, in the view's), the next run goes on from there: nothing lost, nothing doubled
        whole = self.query(workload, renamed)
        faults = fault_points(40, 8, "in steps")
        points = interrupted_runs_recover(workload, "whole", whole, faults, visible_columns(project, "whole"))
        assert points >= 2, points

        # compaction covers the internal states, and the refreshes go on from the compacted tables
        compacted = self.operation("mv_compact", "--args", "{models: [whole], every: true}")
        assert "whole: compacted in " in compacted and "whole__mv_state_newest: compacted in " in compacted, compacted
        workload.alternating_round(300, operations=8)
        results, log = run("--select", "whole")
        assert "whole__mv_state_newest: fast refresh: " in log and "whole: fast refresh: " in log, log
        workload.check("whole", whole, visible_columns(project, "whole"))
