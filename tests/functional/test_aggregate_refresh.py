"""Aggregate fast refresh: GROUP BY and global aggregates over one master and over inner joins,
by signed net deltas in one MERGE; MIN/MAX recomputing only groups whose extreme may be gone."""

from dataclasses import replace

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.differential import Column, Master, Workload, keys_read_from_logs, randomized_rounds
from tests.functional.util import data_files_of_last_commit, rows

MASTERS = [
    Master("customers", "customer_id", key_pool=tuple(range(1001, 1009)), columns=[
        Column("region_id", "bigint", [1, 2, 3, None]),
        Column("segment", "string", ["retail", "corporate", None]),
    ]),
    Master("orders", "order_id", [
        Column("customer_id", "bigint", [1001, 1002, 1003, 1004, 1005, None]),
        Column("amount", "decimal(10,2)", [1.5, 2.25, 10.0, -3.0, None]),
        Column("weight", "double", [0.1, 0.7, 2.5, None]),
        Column("quantity", "int", [1, 2, 3, None]),
        Column("status", "string", ["open", "shipped", "cancelled", None]),
    ]),
    Master("regions", "region_id", key_pool=(1, 2, 3, 4), columns=[Column("region", "string", ["north", "south", None])]),
]

SRC = {name: f"{{{{ source('shop', '{name}') }}}}" for name in ("customers", "orders", "regions")}

VIEWS = {
    # every aggregate kind over one master, NULL group keys, an expression, a filter
    "order_stats": (
        "select o.status, count(*) as n, count(o.amount) as n_amount, sum(o.amount) as total, "
        "sum(o.quantity * 2) as double_quantity, avg(o.amount) as avg_amount, avg(o.weight) as avg_weight, "
        "avg(o.quantity) as avg_quantity, min(o.amount) as min_amount, max(o.amount) as max_amount, "
        "min(o.weight) as min_weight, max(o.status) as max_status, "
        # FILTER: the aggregate of CASE WHEN (a COUNT(*), a SUM, a MAX with its reserve)
        "count(*) filter (where o.amount > 0) as n_positive, sum(o.quantity) filter (where o.weight > 0.5) as heavy_quantity, "
        "max(o.weight) filter (where o.amount is not null) as max_priced_weight "
        f"from {SRC['orders']} o where o.customer_id is null or o.customer_id <> 1005 group by o.status"
    ),
    # two group keys, one an expression
    "order_buckets": (
        "select o.customer_id, coalesce(o.quantity, 0) > 1 as bulk, count(*) as n, sum(o.weight) as weight "
        f"from {SRC['orders']} o group by o.customer_id, coalesce(o.quantity, 0) > 1"
    ),
    # a global aggregate: one row, even when no order is left
    "order_totals": (
        "select count(*) as n, sum(o.amount) as total, max(o.amount) as max_amount, avg(o.weight) as avg_weight "
        f"from {SRC['orders']} o where o.status <> 'cancelled'"
    ),
    # SELECT DISTINCT: a counted group (a row stays while any master row is behind it), over a join
    "customer_statuses": (
        "select distinct c.region_id, o.status, o.amount is null as no_amount "
        f"from {SRC['orders']} o join {SRC['customers']} c on o.customer_id = c.customer_id"
    ),
    # over a join: a customer's region update moves its orders to another group
    "region_sales": (
        "select c.region_id, count(*) as n, sum(o.amount) as total, min(o.amount) as min_amount, "
        "max(o.weight) as max_weight, count(c.segment) as n_segment "
        f"from {SRC['orders']} o join {SRC['customers']} c on o.customer_id = c.customer_id group by c.region_id"
    ),
    # three masters, grouped by a column of the last one
    "sales_by_region_name": (
        "select r.region, c.segment, count(*) as n, sum(o.quantity) as quantity, max(o.amount) as max_amount "
        f"from {SRC['orders']} o join {SRC['customers']} c on o.customer_id = c.customer_id "
        f"join {SRC['regions']} r on c.region_id = r.region_id where o.status <> 'cancelled' "
        "group by r.region, c.segment"
    ),
}


def defining_query(project, sql):
    for name in ("orders", "customers", "regions"):
        sql = sql.replace(SRC[name], f"{project.test_schema}.{name}")
    return sql


def visible_columns(project, view):
    return [name for name, *_ in rows(project, f"describe {project.test_schema}.{view}")
            if name and not name.startswith("_mv_") and not name.startswith("#")]


class ShopViews:
    """A randomized differential test of fast_refresh models over the shop masters (``VIEWS``:
    model name -> SQL, ``CONFIG``: their config arguments)."""

    VIEWS: dict[str, str] = {}
    MASTERS: list[Master] = MASTERS  # the masters the views read (their sources and random DML)
    CONFIG = "materialized='fast_refresh', refresh_method='fast'"
    VIEW_CONFIG: dict[str, str] = {}  # more config arguments of some views
    # the query a view's rows are compared with when it is not the view's own SQL: a query leaving
    # an order to Spark (an unsorted COLLECT_LIST) compared with the order the product sets
    EXPECTED: dict[str, str] = {}

    @pytest.fixture(scope="class")
    def models(self):
        files = {
            f"{name}.sql": f"{{{{ config({', '.join(filter(None, (self.CONFIG, self.VIEW_CONFIG.get(name))))}) }}}}\n" + sql
            for name, sql in self.VIEWS.items()
        }
        files["sources.yml"] = Workload.sources_yml(self.MASTERS)
        return files

    def check_all(self, workload):
        for name, sql in self.VIEWS.items():
            expected = self.EXPECTED.get(name, sql)
            workload.check(name, defining_query(workload.project, expected), visible_columns(workload.project, name))

    def refreshed(self, workload, from_logs: bool = False) -> str:
        """``dbt run``, every model successful, every view checked against its query; the log.
        ``from_logs``: the marked keys read from the logs (differential.keys_read_from_logs)."""
        with keys_read_from_logs(from_logs):
            results, log = run_dbt_and_capture(["run"])
        assert all(r.status == "success" for r in results), log
        self.check_all(workload)
        return log

    def refreshed_by_partitions(self, workload) -> None:
        """Randomized rounds (a batched one, then single statements: randomized_rounds), every view fast
        refreshed by the partitions its changes touch."""
        for round_number in range(randomized_rounds(2)):
            workload.alternating_round(round_number, operations=8)
            log = self.refreshed(workload)
            assert log.count("fast refresh:") == len(self.VIEWS) or "nothing marked" in log, log
            assert "DEL+INS partitions" in log, log

    def built(self, project, seed: int, initial_rows: int = 10) -> Workload:
        """The masters with ``initial_rows`` random rows each, the views built and checked."""
        workload = Workload(project, [replace(m, rows={}) for m in self.MASTERS], seed)
        workload.create(initial_rows=initial_rows)
        results = run_dbt(["run"])
        assert all(r.status == "success" for r in results)
        self.check_all(workload)
        return workload


class TestAggregateRefresh(ShopViews):
    VIEWS = VIEWS
    # small views are rewritten whole by one statement (rewrite_rows): these two by a DELETE and an INSERT
    VIEW_CONFIG = {"order_buckets": "rewrite_rows=0", "region_sales": "rewrite_rows=0"}

    @pytest.mark.parametrize("seed", [7])
    def test_randomized_workload(self, project, seed):
        workload = self.built(project, seed)

        rounds = randomized_rounds(2)
        for round_number in range(rounds):
            workload.alternating_round(round_number, operations=8)
            log = self.refreshed(workload, from_logs=round_number % 2 == 1 or rounds == 1)
            assert log.count("fast refresh:") == len(VIEWS), log

        # insert-only: MIN/MAX merge with greatest/least, no recompute (orders among the masters
        # inserted into: the MIN/MAX views aggregate them; at soak factor 6 the round's six random
        # inserts all hit the dimensions). region_sales is never rewritten whole (rewrite_rows=0)
        workload.round(6, kinds=("insert",))
        workload.round(2, masters=["orders"], kinds=("insert",))
        log = self.refreshed(workload)
        lines = {name: next(line for line in log.splitlines() if f"{name}: fast refresh" in line) for name in VIEWS}
        assert "MIN/MAX recompute (insert-only)" in lines["region_sales"].split("skipped: ", 1)[1], lines["region_sales"]
        assert "rewrite of the view" in lines["customer_statuses"]  # both write paths ran
        assert "rewrite of the view" not in lines["order_buckets"]

        # dimension updates only: rows move between groups of the join aggregates
        workload.round(5, masters=["customers", "regions"], kinds=("update", "update_key"))
        self.refreshed(workload)

        # every order goes: groups disappear, the global row stays with count 0
        workload.delete_every_row("orders")
        log = self.refreshed(workload)
        assert "delete-only" in log
        assert rows(project, f"select count(*) from {project.test_schema}.order_stats") == [(0,)]
        assert rows(project, f"select n, total from {project.test_schema}.order_totals") == [(0, None)]

        # and come back
        workload.round(8, masters=["orders"], kinds=("insert",))
        self.refreshed(workload)


MAX_VIEW = (  # (never rewritten whole: each refresh counts the groups it changes, refresh_stats)
    "{{ config(materialized='fast_refresh', refresh_method='fast', refresh_stats=true, rewrite_rows=0) }}\n"
    "select o.customer_id, count(*) as n, max(o.amount) as max_amount, min(o.amount) as min_amount "
    "from {{ source('shop', 'orders') }} o group by o.customer_id"
)


class TestMinMaxRecomputesOnlyWhatItMust:
    @pytest.fixture(scope="class")
    def models(self):
        # the same view rewritten whole by one statement (a small view: rewrite_rows), whose
        # exhausted reserve stops the rewrite and the rewrite recomputing that group runs instead
        rewritten = MAX_VIEW.replace(", refresh_stats=true, rewrite_rows=0", "")
        return {
            "max_by_customer.sql": MAX_VIEW,
            "max_by_customer_rewritten.sql": rewritten,
            "sources.yml": Workload.sources_yml(MASTERS[1:2]),
        }

    def test_a_removed_extreme_comes_from_the_reserve_and_only_an_exhausted_group_is_recomputed(self, project):
        schema = project.test_schema
        project.run_sql(MASTERS[1].ddl(schema))
        seven = ", ".join(f"({10 + v}, 40, {v}.00, 0.1, 1, 'open')" for v in range(1, 8))  # 7 values: more than a reserve
        project.run_sql(
            f"insert into {schema}.orders values "
            "(1, 10, 5.00, 0.1, 1, 'open'), (2, 10, 7.00, 0.1, 1, 'open'), (3, 10, 9.00, 0.1, 1, 'open'), "
            f"(4, 20, 1.00, 0.1, 1, 'open'), (5, 20, 3.00, 0.1, 1, 'open'), (6, 30, null, 0.1, 1, 'open'), {seven}"
        )
        run_dbt(["run"])
        view = f"{schema}.max_by_customer"
        query = f"select o.customer_id, count(*), max(o.amount), min(o.amount) from {schema}.orders o group by o.customer_id"

        def refreshed(recomputed: bool = False) -> str:
            _, log = run_dbt_and_capture(["run"])
            for name in (view, f"{view}_rewritten"):
                assert sorted(rows(project, f"select customer_id, n, max_amount, min_amount from {name}")) == sorted(
                    rows(project, query)
                ), name
            # (the rewritten view: one statement, or its fallback where a group needs its masters)
            assert ("a changed group needed its masters: the rewrite with the recompute" in log) == recomputed, log
            assert "rewrite of the view" in log, log
            return log

        # deleting rows that are neither the max nor the min of their group recomputes no group
        project.run_sql(f"delete from {schema}.orders where order_id = 2")
        project.run_sql(f"insert into {schema}.orders values (7, 20, 2.00, 0.1, 1, 'open')")
        log = refreshed()
        assert "groups updated: 2" in log and "groups recomputed: 0" in log, log

        # deleting the max of group 10 and the max and min of group 40: the next values are in
        # their reserves (group 40 keeps its 4 highest and 4 lowest values), nothing is recomputed
        project.run_sql(f"delete from {schema}.orders where order_id in (3, 17, 11)")
        project.run_sql(f"update {schema}.orders set amount = 2.50 where order_id = 7")
        log = refreshed()
        assert "groups recomputed: 0" in log and "MIN/MAX from the reserves" in log, log

        # a value reaching the reserve's floor joins it (group 40's max reserve: 6, 5, 4)
        project.run_sql(f"insert into {schema}.orders values (18, 40, 4.50, 0.1, 1, 'open')")
        log = refreshed()
        assert "groups recomputed: 0" in log, log
        # its max reserve runs out (6, 5, 4.5, 4 all gone) while 2 and 3 remain: recomputed
        project.run_sql(f"delete from {schema}.orders where order_id in (16, 15, 18, 14)")
        log = refreshed(recomputed=True)
        assert "groups recomputed: 1" in log, log
        # and its reserve is whole again: the next max deleted is answered from it
        project.run_sql(f"delete from {schema}.orders where order_id = 13")
        log = refreshed()
        assert "groups recomputed: 0" in log, log

        # the max of group 20 updated upwards, its min downwards: the new values win, no recompute
        project.run_sql(f"update {schema}.orders set amount = 3.50 where order_id = 5")
        project.run_sql(f"update {schema}.orders set amount = 0.50 where order_id = 4")
        log = refreshed()
        assert "groups updated: 1" in log and "groups recomputed: 0" in log, log

        # a group's last row goes and a NULL-only group gets a value: delete + update, no recompute
        project.run_sql(f"delete from {schema}.orders where order_id = 1")
        project.run_sql(f"insert into {schema}.orders values (8, 30, 4.00, 0.1, 1, 'open')")
        log = refreshed()
        assert "groups deleted: 1" in log and "groups recomputed: 0" in log, log

        # twelve new groups: the INSERT reads them from the cached delta, whose partitions are the
        # shuffle's that made it (4 here), and writes them rebalanced, as one data file
        project.run_sql(
            f"insert into {schema}.orders values "
            + ", ".join(f"({100 + g}, {100 + g}, {g}.00, 0.1, 1, 'open')" for g in range(12))
        )
        log = refreshed()
        assert "groups inserted: 12" in log, log
        added = data_files_of_last_commit(project, view)
        assert added == [("append", "1")], added


RECOMPUTED_VIEWS = {
    # aggregates no delta maintains, beside one that is: each touched group recomputed
    "customer_spread": (
        "select o.customer_id, count(distinct o.status) as statuses, sum(distinct o.quantity) as distinct_quantity, "
        "percentile(o.quantity, 0.5) as median_quantity, array_sort(collect_set(o.status)) as status_list, "
        "stddev_samp(o.quantity) as sd_quantity, count(*) as n, sum(o.amount) as total "
        f"from {SRC['orders']} o group by o.customer_id"
    ),
    # over a join, with HAVING on a DISTINCT count and an expression over one
    "region_buyers": (
        "select c.region_id, count(distinct o.customer_id) as buyers, count(distinct o.customer_id) * 2 as twice, "
        "max(o.amount) as max_amount, count(distinct o.customer_id) filter (where o.quantity > 1) as bulk_buyers "
        f"from {SRC['orders']} o join {SRC['customers']} c on o.customer_id = c.customer_id "
        "group by c.region_id having count(distinct o.status) > 1"
    ),
    # over a LEFT JOIN: a customer's group changes with its orders
    "customer_order_statuses": (
        "select c.customer_id, count(distinct o.status) as statuses, count(o.order_id) as orders "
        f"from {SRC['customers']} c left join {SRC['orders']} o on o.customer_id = c.customer_id group by c.customer_id"
    ),
    # a global aggregate: one row, recomputed over every row when any changes
    "buyers_total": f"select count(distinct o.customer_id) as buyers, avg(distinct o.quantity) as q from {SRC['orders']} o",
}


class TestRecomputedAggregates(ShopViews):
    """COUNT(DISTINCT), PERCENTILE, STDDEV, sorted COLLECT_SET, ...: the groups a change touches are
    recomputed from the masters, the others kept; exact after every refresh."""

    VIEWS = RECOMPUTED_VIEWS
    VIEW_CONFIG = {"customer_spread": "rewrite_rows=0"}

    @pytest.mark.parametrize("seed", [17])
    def test_randomized_workload(self, project, seed):
        workload = self.built(project, seed)
        for round_number in range(randomized_rounds(3)):
            workload.alternating_round(round_number, operations=8)
            log = self.refreshed(workload, from_logs=round_number % 2 == 1)
            assert log.count("fast refresh:") == len(RECOMPUTED_VIEWS), log
        workload.round(6, masters=["orders"], kinds=("insert",))
        self.refreshed(workload)
        workload.round(5, masters=["customers"], kinds=("update", "update_key"))
        self.refreshed(workload)
        workload.delete_every_row("orders")  # groups go; the global row stays, its counts 0
        self.refreshed(workload)
        assert rows(project, f"select buyers from {project.test_schema}.buyers_total") == [(0,)]
        workload.round(8, masters=["orders"], kinds=("insert",))
        self.refreshed(workload)
