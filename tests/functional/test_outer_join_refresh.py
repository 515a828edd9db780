"""Outer-join fast refresh: LEFT, RIGHT, chains mixing inner and outer joins, NULL join keys,
unique and non-unique inner join columns, slices emptied and first matches, rows moving between
slices; every refresh compared with the defining query."""

from dataclasses import replace

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.differential import Column, Master, Workload, keys_read_from_logs, randomized_rounds, soak_factor

MASTERS = [
    Master("customers", "customer_id", key_pool=tuple(range(1001, 1009)), columns=[
        Column("name", "string", ["ada", "alan", "grace", None]),
        Column("region_id", "bigint", [1, 2, 3, None]),
    ]),
    Master("orders", "order_id", [
        Column("customer_id", "bigint", [1001, 1002, 1003, 1004, 1005, 1006, None]),
        Column("amount", "decimal(10,2)", [1.5, 2.25, 10.0, None]),
        Column("status", "string", ["open", "shipped", "cancelled"]),
    ]),
    Master("regions", "region_id", key_pool=(1, 2, 3, 4), columns=[Column("region", "string", ["north", "south", None])]),
]
S = {name: f"{{{{ source('shop', '{name}') }}}}" for name in ("customers", "orders", "regions")}

VIEWS = {
    # the inner side joined on its key: one row per order, updated in place
    "orders_with_customer": (
        f"select o.order_id, o.amount, c.customer_id, c.name from {S['orders']} o "
        f"left join {S['customers']} c on o.customer_id = c.customer_id where o.status <> 'cancelled'",
        ["order_id", "amount", "customer_id", "name"],
    ),
    # non-unique inner side: every customer once per order, or once null-extended
    "customers_with_orders": (
        f"select c.customer_id, c.name, o.order_id, o.amount from {S['customers']} c "
        f"left join {S['orders']} o on o.customer_id = c.customer_id",
        ["customer_id", "name", "order_id", "amount"],
    ),
    # RIGHT join: the same, written the other way round
    "customers_right_orders": (
        f"select c.customer_id, o.order_id, o.status from {S['orders']} o "
        f"right join {S['customers']} c on o.customer_id = c.customer_id",
        ["customer_id", "order_id", "status"],
    ),
    # a LEFT chain over three masters, each joined on its key
    "order_regions": (
        f"select o.order_id, c.name, r.region from {S['orders']} o "
        f"left join {S['customers']} c on o.customer_id = c.customer_id "
        f"left join {S['regions']} r on c.region_id = r.region_id",
        ["order_id", "name", "region"],
    ),
    # inner then RIGHT: regions preserved, the (order, customer) pairs null-supplying
    "regions_right_pairs": (
        f"select r.region_id, r.region, o.order_id, c.name from {S['orders']} o "
        f"join {S['customers']} c on o.customer_id = c.customer_id "
        f"right join {S['regions']} r on c.region_id = r.region_id",
        ["region_id", "region", "order_id", "name"],
    ),
    # non-unique LEFT then LEFT on a key, anchored on customers
    "customer_orders_regions": (
        f"select c.customer_id, o.order_id, r.region from {S['customers']} c "
        f"left join {S['orders']} o on o.customer_id = c.customer_id "
        f"left join {S['regions']} r on r.region_id = c.region_id",
        ["customer_id", "order_id", "region"],
    ),
    # ON conditions on both sides beside the equality (issue 65): a range, as to a validity
    # interval, and an OR; changes of either side recompute the slices they touch
    "orders_in_range": (
        f"select c.customer_id, c.name, o.order_id, o.amount from {S['customers']} c "
        f"left join {S['orders']} o on o.customer_id = c.customer_id "
        "and o.amount between c.region_id and c.region_id * 4 and (o.status <> 'cancelled' or c.name = 'ada')",
        ["customer_id", "name", "order_id", "amount"],
    ),
}


def defining_query(project, sql):
    for name in ("orders", "customers", "regions"):
        sql = sql.replace(S[name], f"{project.test_schema}.{name}")
    return sql


class TestOuterJoinRefresh:
    @pytest.fixture(scope="class")
    def models(self):
        files = {f"{name}.sql": "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n" + sql
                 for name, (sql, _) in VIEWS.items()}
        files["sources.yml"] = Workload.sources_yml(MASTERS)
        return files

    def check_all(self, workload):
        for name, (sql, columns) in VIEWS.items():
            workload.check(name, defining_query(workload.project, sql), columns)

    @pytest.mark.parametrize("seed", [13])
    def test_randomized_workload(self, project, seed):
        workload = Workload(project, [replace(m, rows={}) for m in MASTERS], seed)
        workload.create(initial_rows=8)
        run_dbt(["run"])
        self.check_all(workload)

        logs = ""
        for round_number in range(randomized_rounds(4)):
            workload.alternating_round(round_number)
            with keys_read_from_logs(round_number % 2 == 1):  # and literal keys in the others
                results, log = run_dbt_and_capture(["run"])
            assert all(r.status == "success" for r in results), log
            assert log.count("fast refresh:") == len(VIEWS), log
            self.check_all(workload)
            logs += log
        assert "DEL+INS slices" in logs
        # Oracle's rule: changed orders applied row by row, changed customers by whole slices
        assert "steps run: ROWS o, SLICES c, DEL+INS rows" in logs, logs
        assert "steps run: ROWS c" in logs, logs  # regions_right_pairs: customers by row under regions

        # only inner-side changes: slices lose their last match, gain a first one, rows move
        workload.round(8, masters=["customers", "regions"])
        run_dbt(["run"])
        self.check_all(workload)
        # every inner row goes: every preserved row remains once, null-extended
        for master in ("customers", "regions"):
            workload.delete_every_row(master)
        run_dbt(["run"])
        self.check_all(workload)
        # and come back (first matches)
        workload.round(10, masters=["customers", "regions"], kinds=("insert",))
        run_dbt(["run"])
        self.check_all(workload)
        # anchor-only changes skip the slice search: INSERT, then DELETE
        workload.round(4, masters=["orders"], kinds=("insert",))
        _, log = run_dbt_and_capture(["run", "--select", "orders_with_customer"])
        assert "steps run: INS o" in log, log
        workload.round(3, masters=["orders"], kinds=("delete",))
        _, log = run_dbt_and_capture(["run", "--select", "orders_with_customer"])
        assert "steps run: DEL o" in log, log
        run_dbt(["run"])
        self.check_all(workload)
