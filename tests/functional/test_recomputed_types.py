"""Values a refresh recomputes from stored state (AVG from a hidden sum and count, SUM from its
stored value, HAVING over stored values) have the type, precision and rounding Spark gives the
defining query (issue 62): a UNION ALL widens a branch's AVG of a decimal (decimal(14,6), rounded)
to the union's double, and a refresh must round as the branch does before widening."""

import pytest

from tests.functional.differential import Column, Master
from tests.functional.test_aggregate_refresh import SRC, ShopViews, visible_columns
from tests.functional.util import rows

O, C = SRC["orders"], SRC["customers"]
VIEWS = {
    # AVG of decimal(10,2) (decimal(14,6)) in one branch, of int (double) in the other: the union's
    # column is double; SUM of decimal(10,2) (decimal(20,2)) beside SUM of double: double
    "mixed_averages": (
        f"select o.status as k, avg(o.amount) as avg_value, sum(o.amount) as total, min(o.amount) as low "
        f"from {O} o group by o.status "
        "union all "
        f"select c.segment, avg(o.quantity), sum(o.weight), min(o.weight) "
        f"from {O} o join {C} c on o.customer_id = c.customer_id group by c.segment"
    ),
    # HAVING over an AVG whose branch type is decimal while the union stores double
    "mixed_having": (
        f"select o.status as k, avg(o.amount) as avg_value from {O} o group by o.status "
        "having avg(o.amount) >= 1.583333 "
        "union all "
        f"select c.segment, avg(o.weight) from {O} o join {C} c on o.customer_id = c.customer_id "
        "group by c.segment"
    ),
    # expressions over aggregates (issue 65): recomputed from the stored aggregates in their own
    # types (a decimal(20,2) sum over a bigint count divides at Spark's scale), HAVING on an
    # aggregate not selected
    "derived_values": (
        "select o.status, round(sum(o.amount), 1) as total_1dp, sum(o.amount) / count(*) as mean_amount, "
        "coalesce(max(o.weight), -1.0) as heaviest, cast(count(o.quantity) as int) * 2 as twice_counted, "
        "o.status || ':' || cast(min(o.quantity) as string) as label "
        f"from {O} o group by o.status having sum(o.quantity) > 0 or max(o.amount) is null"
    ),
    # the usual mart: each customer with its orders' total, 0 when it has none (outer join)
    "customer_spend": (
        "select c.customer_id, c.segment, coalesce(sum(o.amount), 0) as spent, count(o.order_id) as orders, "
        "round(avg(o.amount), 1) as mean_amount "
        f"from {C} c left join {O} o on o.customer_id = c.customer_id group by c.customer_id, c.segment"
    ),
    # a global aggregate labelled by a constant: Spark needs no GROUP BY for it
    "labelled_totals": (
        "select 'all orders' as scope, 1 as version, count(*) as n, sum(o.amount) as total, "
        f"avg(o.amount) as avg_amount, coalesce(sum(o.weight), 0) / greatest(count(*), 1) as per_order from {O} o"
    ),
}


class TestRecomputedTypes(ShopViews):
    VIEWS = VIEWS

    @pytest.mark.parametrize("seed", [62])
    def test_values_as_spark_computes_them(self, project, seed):
        workload = self.built(project, seed)
        for round_number in range(4):
            workload.alternating_round(round_number, operations=8)
            log = self.refreshed(workload, from_logs=round_number == 3)
            assert log.count("fast refresh:") == len(VIEWS), log
        workload.delete_every_row("orders")
        self.refreshed(workload)
        workload.round(10, masters=["orders"], kinds=("insert",))
        self.refreshed(workload)


BIG = 60_000_000_000_000_000_000_000_000_000_000_000_000  # two of them overflow a decimal(38, 0)
NANOS = 4_000_000_000_000_000_000  # three of them overflow a BIGINT
READINGS = [
    Master("readings", "reading_id", key_pool=tuple(range(1, 9)), columns=[
        Column("sensor", "bigint", [1, 2, None]),
        Column("nanos", "bigint", [NANOS, NANOS + 7, -NANOS, 11, None]),
        # positive: with mixed signs Spark's SUM is NULL or not by the order it adds them in (a
        # partial sum overflows), so the query itself would have no one answer
        Column("big", "decimal(38,0)", [BIG, BIG, 1, None]),
    ]),
]
SENSORS = "{{ source('shop', 'readings') }}"
OVERFLOW_VIEWS = {
    # AVG(BIGINT) sums in double (a BIGINT sum of its values wraps, ANSI off); SUM(BIGINT) wraps as Spark's does
    "sensor_nanos": f"select r.sensor, avg(r.nanos) as avg_nanos, sum(r.nanos) as total_nanos, count(*) as n "
                    f"from {SENSORS} r group by r.sensor",
    # SUM(decimal(38,0)) is NULL while it overflows, and its value again when it comes back into range
    # (a delta of two deleted BIGs overflows itself)
    "sensor_big": f"select r.sensor, sum(r.big) as total, avg(r.big) as mean, count(r.big) as n from {SENSORS} r "
                  "group by r.sensor",
}
# the same view refreshed by a DELETE and an INSERT (not rewritten whole: rewrite_rows=0)
OVERFLOW_VIEWS["sensor_big_written"] = OVERFLOW_VIEWS["sensor_big"]


class TestOverflowAnsiOff(ShopViews):
    """Sums that overflow, ANSI off (dbt-spark's default): the view as Spark computes its query
    (with ANSI on, the query itself fails: tests/functional/test_ansi_mode.py)."""

    VIEWS = OVERFLOW_VIEWS
    MASTERS = READINGS
    VIEW_CONFIG = {"sensor_big_written": "rewrite_rows=0"}

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, dbt_profile_target):
        target = dict(dbt_profile_target)
        target["server_side_parameters"] = {**target["server_side_parameters"], "spark.sql.ansi.enabled": "false"}
        return target

    def check_all(self, workload):
        for name, sql in self.VIEWS.items():
            query = sql.replace(SENSORS, f"{workload.project.test_schema}.readings")
            workload.check(name, query, visible_columns(workload.project, name))

    def test_sums_that_overflow_and_come_back(self, project):
        workload = self.built(project, seed=6201, initial_rows=6)
        schema = project.test_schema
        for round_number in range(6):
            workload.alternating_round(round_number, operations=6)
            log = self.refreshed(workload)
            assert log.count("fast refresh:") == len(OVERFLOW_VIEWS), log
        # a group whose sum overflowed, then comes back into range
        workload.sql(f"delete from {schema}.readings")
        workload.masters["readings"].rows.clear()
        for key, big in ((101, BIG), (102, BIG), (103, 5)):
            workload.masters["readings"].rows[key] = (7, NANOS, big)
            workload.sql(f"insert into {schema}.readings values ({key}, 7, {NANOS}, {big})")
        self.refreshed(workload)
        for view in ("sensor_big", "sensor_big_written"):
            assert rows(project, f"select total from {schema}.{view} where sensor = 7") == [(None,)]
        del workload.masters["readings"].rows[101]
        workload.sql(f"delete from {schema}.readings where reading_id = 101")
        log = self.refreshed(workload)
        for view in ("sensor_big", "sensor_big_written"):
            assert rows(project, f"select cast(total as string) from {schema}.{view} where sensor = 7") == [(str(BIG + 5),)]
        # the overflowed group stopped the rewrite (sensor_big) and the INSERT without the recompute
        # (sensor_big_written), and their fallbacks with the recompute ran instead
        stopped = "a changed group needed its masters: the {} with the recompute of those groups ran instead"
        lines = {view: self.line(log, view) for view in ("sensor_big", "sensor_big_written")}
        assert "rewrite of the view" in lines["sensor_big"] and stopped.format("rewrite") in lines["sensor_big"], lines
        assert stopped.format("INSERT") in lines["sensor_big_written"], lines
        # a change no guard flags (sensor 7's 38 digits would be: a sum is added in 37): nothing stops
        workload.masters["readings"].rows[104] = (8, NANOS, 1)
        workload.sql(f"insert into {schema}.readings values (104, 8, {NANOS}, 1)")
        workload.masters["readings"].rows[105] = (8, NANOS, 2)
        workload.sql(f"insert into {schema}.readings values (105, 8, {NANOS}, 2)")
        for change in ("inserts", "a delete"):
            if change == "a delete":
                del workload.masters["readings"].rows[104]
                workload.sql(f"delete from {schema}.readings where reading_id = 104")
            log = self.refreshed(workload)
            assert "rewrite of the view" in self.line(log, "sensor_big") and "needed its masters" not in log, log
        for view in ("sensor_big", "sensor_big_written"):
            assert rows(project, f"select cast(total as string), n from {schema}.{view} where sensor = 8") == [("2", 1)]

    @staticmethod
    def line(log, view):
        return next(line for line in log.splitlines() if f"{view}: fast refresh:" in line)


LEDGER = [
    Master("ledger", "entry_id", key_pool=tuple(range(1, 9)), columns=[
        Column("account", "bigint", [1, 2, None]),
        Column("fine", "decimal(38,18)", [0.123456789012345678, 12345.000000000000000001, -3.333333333333333333, None]),
        Column("price", "decimal(24,4)", [1.2345, 99999.9999, -0.0001, None]),
        Column("rate", "decimal(29,8)", [0.12345678, 3.33333333, -7.5, None]),
    ]),
]
ENTRIES = "{{ source('shop', 'ledger') }}"
PRECISION_VIEWS = {
    # Spark adds two decimal(38, 8) sums as a decimal(38, 7) and divides a decimal(38, 18) sum by a count at
    # scale 18: a refresh adding a delta to a sum, or dividing it, drops no digit (exact_decimals.py); the
    # generated definitions found sum(credit * amount) off in its last digit
    "account_ledger": (
        "select l.account, sum(l.fine) as fine_total, avg(l.fine) as fine_mean, sum(l.rate * l.price) as weighted, "
        f"avg(l.price) as price_mean, avg(l.rate) as rate_mean, count(*) as n from {ENTRIES} l group by l.account"
    ),
}


class TestHighPrecisionDecimals(ShopViews):
    """Decimals of 38 digits and of scales above 6: the view as Spark computes its query, digit for digit."""

    VIEWS = PRECISION_VIEWS
    MASTERS = LEDGER

    def check_all(self, workload):
        for name, sql in self.VIEWS.items():
            query = sql.replace(ENTRIES, f"{workload.project.test_schema}.ledger")
            workload.check(name, query, visible_columns(workload.project, name))

    def test_sums_and_averages_to_the_last_digit(self, project):
        workload = self.built(project, seed=6202, initial_rows=8)
        for round_number in range(4):
            workload.alternating_round(round_number, operations=6)
            log = self.refreshed(workload)
            assert log.count("fast refresh:") == len(PRECISION_VIEWS), log
        workload.round(12, kinds=("insert",))
        self.refreshed(workload)
