"""Views that read the clock (current_date(), current_timestamp()): the clock is fixed per run by
DBT_INCREMENTAL_MV_NOW, never by sleeping. Filters of one table by the time are fast refreshed:
join, outer join (also a filter in its ON), aggregate (also over outer joins, and a HAVING comparing
a MAX or MIN with the time), ranked, windowed and UNION ALL views apply the rows the time moved
across as changes (also when nothing else changed), a per-partition view recomputes their partitions; a clock
read elsewhere recomputes the view when the time it reads moved. After every run each view equals its
query at that run's time, across randomized changes."""

import os
from dataclasses import dataclass

import pytest
from dbt.tests.util import run_dbt_and_capture

from dbt_incremental_mv import environment
from tests.functional.differential import Column, Master
from tests.functional.test_aggregate_refresh import ShopViews, visible_columns
from tests.functional.util import force_as_a_rule, rows  # noqa: F401 - a fixture
from tests.fuzz.check import at_time


@dataclass(frozen=True)
class At:
    """A timestamp value of the random DML, written as a timestamp literal (differential.literal
    writes its repr)."""

    text: str

    def __repr__(self):
        return f"timestamp'{self.text}'"


MASTERS = [
    Master("customers", "customer_id", key_pool=tuple(range(1001, 1006)), columns=[
        Column("segment", "string", ["retail", "corporate", None]),
    ]),
    Master("orders", "order_id", [
        Column("customer_id", "bigint", [1001, 1002, 1003, 1004, None]),
        Column("amount", "decimal(10,2)", [1.5, 2.25, 10.0, None]),
        Column("status", "string", ["open", "cancelled", None]),
        Column("due", "string", ["2026-11-30", "2026-12-01", "2026-12-02", "2026-12-05", None]),
        Column("received", "string", ["2026-12-01 09:00:00", "2026-12-01 12:00:00", "2026-12-02 08:00:00", None]),
        Column("placed", "timestamp", [At("2026-11-30 23:30:00"), At("2026-12-01 00:15:00"), At("2026-12-05 07:00:00"), None]),
    ]),
]
ORDERS = "{{ source('shop', 'orders') }}"
CUSTOMERS = "{{ source('shop', 'customers') }}"

VIEWS = {
    # a join filtered by the date: orders leave the view the day after they are due
    "open_due_orders": (
        f"select o.order_id, o.amount, c.segment from {ORDERS} o join {CUSTOMERS} c on o.customer_id = c.customer_id "
        "where cast(o.due as date) >= current_date() and (o.status is null or o.status <> 'cancelled')"
    ),
    # an aggregate of the rows received up to now (rows dated in the future enter as time passes)
    "received_by_customer": (
        "select o.customer_id, count(*) as n, sum(o.amount) as total "
        f"from {ORDERS} o where cast(o.received as timestamp) <= current_timestamp() group by o.customer_id"
    ),
    # an aggregate of a join by the date, with a MAX: the orders that left take their amounts with them
    "due_by_segment": (
        "select c.segment, count(*) as n, sum(o.amount) as total, max(o.amount) as top "
        f"from {ORDERS} o join {CUSTOMERS} c on o.customer_id = c.customer_id "
        "where cast(o.due as date) >= current_date() group by c.segment"
    ),
    # two filters of one table by the time, and HAVING: a group the time moved rows out of can leave
    "busy_customers": (
        f"select o.customer_id, count(*) as n from {ORDERS} o where cast(o.due as date) >= current_date() "
        "and cast(o.received as timestamp) <= current_timestamp() group by o.customer_id having count(*) > 1"
    ),
    # a self-join whose two sides each have a filter by the time: both sides' rows cross
    "due_received_pairs": (
        f"select o.customer_id, count(*) as pairs, sum(p.amount) as amount from {ORDERS} o join {ORDERS} p "
        "on o.customer_id = p.customer_id where cast(o.due as date) >= current_date() "
        "and cast(p.received as timestamp) <= current_timestamp() group by o.customer_id"
    ),
    # a timestamp column's date against the date: its crossing check pruned by the column's times
    "placed_lately": (
        f"select o.order_id, o.placed from {ORDERS} o where cast(o.placed as date) >= date_add(current_date(), -1)"
    ),
    # per partition: the two latest orders per customer received up to now, of customers with a
    # segment, counted: the rows the time moved across recompute their customers
    "latest_received": (
        "with r as (select o.*, row_number() over (partition by o.customer_id order by o.received desc, o.order_id) as rn "
        f"from {ORDERS} o where cast(o.received as timestamp) <= current_timestamp() and exists "
        f"(select 1 from {CUSTOMERS} c where c.customer_id = o.customer_id and c.segment is not null)) "
        "select customer_id, count(*) as n, sum(amount) as amount from r where rn <= 2 group by customer_id"
    ),
    # the latest order due from today on of each customer (ranked), and each order's next due one
    # (windowed): the rows the time moved across recompute their customers
    "latest_due": (
        "select * from (select o.order_id, o.customer_id, o.due, row_number() over (partition by o.customer_id "
        f"order by o.due desc, o.order_id) as rn from {ORDERS} o where cast(o.due as date) >= current_date()) r "
        "where rn = 1"
    ),
    "next_due": (
        "select o.order_id, o.customer_id, lead(o.due) over (partition by o.customer_id order by o.due, o.order_id) "
        f"as next_due from {ORDERS} o where cast(o.due as date) >= current_date()"
    ),
    # a UNION ALL of a join branch and an aggregate branch, each with its filter by the time
    "due_or_received": (
        f"select o.order_id as id, o.amount from {ORDERS} o where cast(o.due as date) >= current_date() union all "
        f"select r.customer_id, sum(r.amount) from {ORDERS} r where cast(r.received as timestamp) <= current_timestamp() "
        "group by r.customer_id"
    ),
    # an outer join whose ON keeps the orders due from today on: a customer keeps its row, null-extended once its
    # last due order left; the slices of the customers the crossed orders name are recomputed
    "customer_due_orders": (
        f"select c.customer_id, c.segment, o.order_id, o.due from {CUSTOMERS} c left join {ORDERS} o "
        "on o.customer_id = c.customer_id and cast(o.due as date) >= current_date()"
    ),
    # the same counted per customer (an aggregate over the outer join): the crossed orders' customers' slices
    "due_count_by_customer": (
        f"select c.customer_id, count(o.order_id) as due, sum(o.amount) as amount from {CUSTOMERS} c left join {ORDERS} o "
        "on o.customer_id = c.customer_id and cast(o.due as date) >= current_date() group by c.customer_id"
    ),
    # each customer's orders due from today on, numbered (a window over the outer join: per partition)
    "due_order_numbers": (
        f"select c.customer_id, o.order_id, row_number() over (partition by c.customer_id order by o.due, o.order_id) "
        f"as n from {CUSTOMERS} c left join {ORDERS} o on o.customer_id = c.customer_id "
        "and cast(o.due as date) >= current_date()"
    ),
    # the customers with an order due from today on (HAVING on their latest due date): a customer whose last due
    # order passed leaves, its group re-evaluated; one whose order came back due (a change) returns
    "customers_still_due": (
        f"select o.customer_id, count(*) as n, sum(o.amount) as amount from {ORDERS} o group by o.customer_id "
        "having max(cast(o.due as date)) >= current_date()"
    ),
    # the orders received up to now (the anchor's filter) with their customer, if any: crossed orders are slices
    "received_with_customer": (
        f"select o.order_id, o.received, c.segment from {ORDERS} o left join {CUSTOMERS} c "
        "on c.customer_id = o.customer_id where cast(o.received as timestamp) <= current_timestamp()"
    ),
    # the date selected: recomputed when the date moved, fast refreshed within a day
    "days_to_due": f"select o.order_id, datediff(cast(o.due as date), current_date()) as days from {ORDERS} o",
}


@pytest.mark.usefixtures("force_as_a_rule")
class TestClockRefresh(ShopViews):
    VIEWS = VIEWS
    MASTERS = MASTERS
    CONFIG = "materialized='fast_refresh'"

    now = "2026-12-01 10:00:00"

    def check_all(self, workload):
        schema = workload.project.test_schema
        for name, sql in VIEWS.items():
            query = at_time(sql, self.now).replace(ORDERS, f"{schema}.orders").replace(CUSTOMERS, f"{schema}.customers")
            workload.check(name, query, visible_columns(workload.project, name))

    def run_at(self, workload, now: str) -> dict[str, str]:
        """``dbt run`` with the clock at ``now``, every view checked; each model's log line."""
        self.now = now
        os.environ[environment.NOW.name] = now
        try:
            results, log = run_dbt_and_capture(["run"])
        finally:
            os.environ.pop(environment.NOW.name, None)
        assert all(r.status == "success" for r in results), log
        self.check_all(workload)
        return {name: next(line for line in log.splitlines() if f" {name}: " in line) for name in VIEWS}

    def test_time_moves(self, project):
        os.environ[environment.NOW.name] = self.now
        try:
            workload = self.built(project, seed=7, initial_rows=12)
        finally:
            os.environ.pop(environment.NOW.name, None)
        # the clock moves within the day and no row crosses: every view fast refreshed
        workload.round(6, masters=["orders"], kinds=("insert", "update"))
        lines = self.run_at(workload, "2026-12-01 10:30:00")
        assert all("fast refresh:" in line for line in lines.values()), lines
        # rows received at 12:00 are crossed by the time (changed or not): the aggregates apply them
        project.run_sql(
            f"insert into {project.test_schema}.orders values (9001, 1001, 4.00, 'open', '2026-12-05', "
            "'2026-12-01 12:00:00', timestamp'2026-12-05 07:00:00')"
        )
        lines = self.run_at(workload, "2026-12-01 13:00:00")
        for aggregate in ("received_by_customer", "busy_customers"):
            assert "fast refresh:" in lines[aggregate] and "TIME o" in lines[aggregate], lines
        assert "fast refresh:" in lines["due_or_received"] and "branch 2: TIME r" in lines["due_or_received"], lines
        assert "fast refresh:" in lines["due_received_pairs"] and "TIME p" in lines["due_received_pairs"], lines
        assert "fast refresh:" in lines["open_due_orders"] and "fast refresh:" in lines["days_to_due"], lines
        assert "fast refresh:" in lines["latest_received"] and "TIME o" in lines["latest_received"], lines
        assert "fast refresh:" in lines["received_with_customer"] and "TIME o" in lines["received_with_customer"], lines
        # the next day: due orders leave, the selected date moved
        workload.round(6, masters=["orders", "customers"])
        lines = self.run_at(workload, "2026-12-02 09:00:00")
        # join views and aggregates apply the rows the time moved across as changes
        assert "fast refresh:" in lines["open_due_orders"] and "TIME o" in lines["open_due_orders"], lines
        assert "fast refresh:" in lines["placed_lately"] and "TIME o" in lines["placed_lately"], lines  # 11-30 23:30 left
        assert "fast refresh:" in lines["received_by_customer"] and "TIME o" in lines["received_by_customer"], lines  # 12-02 08:00 came
        assert "fast refresh:" in lines["due_by_segment"] and "TIME o" in lines["due_by_segment"], lines  # 12-01 left
        assert "TIME o, TIME p" in lines["due_received_pairs"], lines
        assert "fast refresh:" in lines["due_or_received"] and "branch 1: TIME o" in lines["due_or_received"], lines
        for ranked in ("latest_due", "next_due"):
            assert "fast refresh:" in lines[ranked] and "TIME " in lines[ranked], lines
        assert "fast refresh:" in lines["latest_received"] and "TIME o" in lines["latest_received"], lines
        assert "fast refresh:" in lines["customer_due_orders"] and "TIME o" in lines["customer_due_orders"], lines
        assert "fast refresh:" in lines["due_count_by_customer"] and "TIME o" in lines["due_count_by_customer"], lines
        assert "fast refresh:" in lines["due_order_numbers"] and "TIME o" in lines["due_order_numbers"], lines
        assert "fast refresh:" in lines["customers_still_due"] and "TIME o" in lines["customers_still_due"], lines
        assert "reads the clock in a selected value" in lines["days_to_due"], lines
        # nothing changed, but the time moved across rows: mv_status and explain say so, the run applies them
        os.environ[environment.NOW.name] = "2026-12-06 00:00:00"
        try:
            _, status = run_dbt_and_capture(["run-operation", "mv_status"])
            _, explained = run_dbt_and_capture(
                ["run-operation", "explain_fast_refresh", "--args", "{model: open_due_orders}"]
            )
        finally:
            os.environ.pop(environment.NOW.name, None)
        assert "crossed the view's time boundary" in status and "the next run applies them" in status, status
        assert "clock: the query reads the time" in explained and "this run reads it as 2026-12-06 00:00:00" in explained
        assert "its rows reflect 2026-12-02 09:00:00" in explained, explained
        assert "the rows a refresh finds the time moved across are applied as changes" in explained, explained
        lines = self.run_at(workload, "2026-12-06 00:00:00")
        assert "steps run: TIME o" in lines["open_due_orders"] and "steps run: TIME o" in lines["placed_lately"], lines
        assert "steps run: TIME o, DEL+INS slices" in lines["customer_due_orders"], lines
        # nothing changed and the time moved across no row: nothing to do
        lines = self.run_at(workload, "2026-12-06 00:30:00")
        assert "nothing marked" in lines["open_due_orders"], lines
        assert "nothing marked" in lines["received_by_customer"], lines
        history = rows(
            project,
            f"select clock from {project.test_schema}.mv_refresh_history where model = 'open_due_orders' "
            "order by refreshed_at desc limit 1",
        )
        assert history == [("2026-12-06 00:30:00",)], history
