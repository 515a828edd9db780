"""ANSI mode on and off (``spark.sql.ansi.enabled``; Spark 4's default is on, dbt-spark 1.11 turns it
off unless the profile names it): views with casts, integer arithmetic near the limits and division
refresh fast to what their defining query gives under the same setting, through randomized inserts,
updates and deletes. An int product that overflows wraps with ANSI off, in the view as in its query;
with ANSI on, it and a value the view's own cast cannot convert fail the refresh with Spark's error,
the view keeps its rows, and the refresh after the fix applies everything."""

import pytest
from dbt.tests.util import run_dbt_and_capture

from tests.functional.differential import Column, Master, soak_factor
from tests.functional.test_aggregate_refresh import ShopViews
from tests.functional.util import rows

BIG = 2**56  # a bigint whose sums over a hundred rows stay in range (2**63 - 1)

MASTERS = [
    Master("customers", "customer_id", key_pool=tuple(range(1001, 1007)), columns=[
        Column("code", "string", ["7", "42", "-3", " 5 ", None]),  # cast to int in the views
        Column("tier", "int", [1, 2, 2_000_000_000, None]),  # 2e9 * 1 fits an int, + 2e9 would not
    ]),
    Master("orders", "order_id", [
        Column("customer_id", "bigint", [1001, 1002, 1003, 1004, 1007, None]),
        Column("amount", "decimal(10,2)", [1.5, 2.25, 10.0, -3.0, 0.0, None]),
        Column("quantity", "int", [0, 1, 3, 2_000_000, -7, None]),  # 0: divisions go through nullif
        Column("big", "bigint", [BIG, -BIG, BIG - 1, 1, None]),
        Column("ratio", "double", [0.5, 0.0, -2.5, None]),
        Column("status", "string", ["open", "shipped", None]),
    ]),
]

SRC = {name: f"{{{{ source('shop', '{name}') }}}}" for name in ("customers", "orders")}

VIEWS = {
    # aggregates over casts, integer products widened by SUM, bigints near the limit, divisions
    "ansi_totals": (
        "select o.status, count(*) as n, sum(o.quantity) as quantity, sum(cast(o.quantity as bigint) * 1000) as milli, "
        "sum(o.big) as big, min(o.big) as min_big, max(o.big) as max_big, avg(o.quantity) as avg_quantity, "
        "sum(o.amount / nullif(o.quantity, 0)) as per_unit, avg(o.amount) as avg_amount, "
        "sum(try_divide(o.ratio, o.amount)) as per_amount, sum(o.quantity div 2) as halves "
        f"from {SRC['orders']} o group by o.status"
    ),
    # a join: per-row casts and divisions of both sides, a cast in the join condition
    "ansi_lines": (
        "select o.order_id, c.customer_id, cast(c.code as int) as code, cast(trim(c.code) as int) + c.tier as score, "
        "o.amount / nullif(o.quantity, 0) as unit_price, cast(o.amount as decimal(12,4)) * o.quantity as extended, "
        "o.big % 7 as big_mod, try_cast(c.code as smallint) as code16, o.ratio / nullif(o.amount, 0) as ratio_amount "
        f"from {SRC['orders']} o join {SRC['customers']} c on o.customer_id = c.customer_id "
        "where cast(coalesce(c.code, '0') as int) <> 0"
    ),
    # an aggregate over the join grouped by a cast, with HAVING on a division
    "ansi_codes": (
        "select cast(c.code as int) as code, count(*) as n, sum(o.amount) as amount, max(o.quantity) as max_quantity "
        f"from {SRC['orders']} o join {SRC['customers']} c on o.customer_id = c.customer_id "
        "group by cast(c.code as int) having sum(o.amount) / count(*) > -100"
    ),
    # an outer join: the customer side NULL-supplied, casts of NULLs
    "ansi_outer": (
        "select o.order_id, o.quantity * 2 as double_quantity, cast(c.code as bigint) * c.tier as weighted "
        f"from {SRC['orders']} o left join {SRC['customers']} c on o.customer_id = c.customer_id"
    ),
}


class AnsiViews(ShopViews):
    VIEWS = VIEWS
    MASTERS = MASTERS
    ANSI = "false"

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, dbt_profile_target):
        target = dict(dbt_profile_target)
        target["server_side_parameters"] = {**target["server_side_parameters"], "spark.sql.ansi.enabled": self.ANSI}
        return target

    def refreshed_fast(self, workload):
        """``dbt run``: every view fast refreshed and equal to its query."""
        log = self.refreshed(workload)
        assert log.count("fast refresh:") == len(VIEWS), log

    def test_views_match_their_queries(self, project):
        ansi = rows(project, "set spark.sql.ansi.enabled")[0][1]
        assert ansi == self.ANSI, ansi
        workload = self.built(project, seed=39)
        for round_number in range(2 * soak_factor()):  # one batched round, one of single statements
            workload.alternating_round(round_number, operations=8)
            self.refreshed_fast(workload)
        self.after_rounds(workload)

    def after_rounds(self, workload):
        """More of the test on the refreshed views (a subclass's)."""


OVERFLOW = 2_000_000_000  # an int whose double (ansi_outer's quantity * 2) does not fit an int


def overflowing_order(schema):
    return f"insert into {schema}.orders values (9002, 1001, 1.00, {OVERFLOW}, 1, 0.5, 'open')"


class TestAnsiOff(AnsiViews):
    ANSI = "false"

    def after_rounds(self, workload):
        """An int product that overflows wraps around, in the view as in its query."""
        project = workload.project
        project.run_sql(overflowing_order(project.test_schema))
        self.refreshed_fast(workload)
        assert rows(project, f"select double_quantity from {project.test_schema}.ansi_outer where order_id = 9002") \
            == [(OVERFLOW * 2 - 2**32,)]


class TestAnsiOn(AnsiViews):
    ANSI = "true"

    def after_rounds(self, workload):
        """A row the view cannot cast, and an int product that overflows, fail the refresh as they
        fail the query, and change nothing; fixed, they apply."""
        schema = workload.project.test_schema
        self.fails_then_applies(
            workload, "ansi_lines", "CAST_INVALID_INPUT", "'x1'",
            [f"insert into {schema}.customers values (9001, 'x1', 1)",
             f"insert into {schema}.orders values (9001, 9001, 1.00, 1, 1, 0.5, 'open')"],
            # fixed: the view's expressions never see the passing 'x1' (its images cancel out first)
            f"update {schema}.customers set code = '11' where customer_id = 9001",
        )
        self.fails_then_applies(
            workload, "ansi_outer", "ARITHMETIC_OVERFLOW", "integer overflow", [overflowing_order(schema)],
            f"update {schema}.orders set quantity = 7 where order_id = 9002",
        )

    def fails_then_applies(self, workload, view, error, detail, changes, fix):
        """``changes`` fail ``view``'s refresh with Spark's ``error`` (naming ``detail``), in one line
        without a traceback, the view unchanged; after ``fix`` every view refreshes to its query."""
        project = workload.project
        before = sorted(rows(project, f"select * from {project.test_schema}.{view}"), key=repr)
        for change in changes:
            project.run_sql(change)
        _, log = run_dbt_and_capture(["run", "--select", view], expect_pass=False)
        assert error in log and detail in log and "Traceback" not in log, log
        assert sorted(rows(project, f"select * from {project.test_schema}.{view}"), key=repr) == before
        project.run_sql(fix)
        self.refreshed_fast(workload)
