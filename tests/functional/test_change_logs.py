"""Change logs (issue 3): shared logs and purge, crash safety, point-in-time marks."""

import itertools
import os

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt_incremental_mv.adapter.connections import FaultInjection
from dbt_incremental_mv.refresh.state.bookkeeping import ViewState
from tests.functional.differential import Column, Master, Workload
from tests.functional.util import rows

MASTERS = [
    Master("customers", "customer_id", [
        Column("name", "string", ["ada", "alan", None]),
        Column("country", "string", ["UK", "US", None]),
    ]),
    Master("orders", "order_id", [
        Column("customer_id", "bigint", [1001, 1002, 1003, 1004, None]),
        Column("amount", "decimal(10,2)", [1.5, 10.0, None]),
    ]),
]

VIEWS = {
    "big_orders": ("select o.order_id, o.amount from {{ source('shop', 'orders') }} o where o.amount > 2",
                   ["order_id", "amount"]),
    "order_countries": (
        "select o.order_id, o.amount, c.country from {{ source('shop', 'orders') }} o "
        "join {{ source('shop', 'customers') }} c on o.customer_id = c.customer_id",
        ["order_id", "amount", "country"],
    ),
}
_runs = itertools.count()


def query(project, name, as_of=None):
    sql = VIEWS[name][0]
    for master in ("orders", "customers"):
        table = f"{project.test_schema}.{master}"
        if as_of is not None:
            table += f" version as of {as_of[master]}"
        sql = sql.replace(f"{{{{ source('shop', '{master}') }}}}", table)
    return sql


def log_rows(project, master):
    return rows(project, f"select _mv_op from {project.test_schema}.mlog_{master}")


def run(*args, fault_after=None, fault_at=None, expect_pass=True):
    env = {"DBT_INCREMENTAL_MV_FAULT_RUN": str(next(_runs))}
    if fault_after is not None:
        env["DBT_INCREMENTAL_MV_FAULT_AFTER"] = str(fault_after)
    if fault_at is not None:
        env["DBT_INCREMENTAL_MV_FAULT_AT"] = fault_at
    os.environ.update(env)
    try:
        return run_dbt_and_capture(["run", *args], expect_pass=expect_pass)
    finally:
        for key in env:
            os.environ.pop(key, None)


class ChangeLogTests:
    @pytest.fixture(scope="class")
    def models(self):
        files = {f"{name}.sql": "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n" + sql
                 for name, (sql, _) in VIEWS.items()}
        files["sources.yml"] = Workload.sources_yml(MASTERS)
        return files

    def workload(self, project, seed):
        workload = Workload(project, [Master(m.name, m.key, m.columns) for m in MASTERS], seed)
        workload.create(initial_rows=8)
        run_dbt(["run"])
        return workload

    def check(self, workload, *names):
        for name in names or VIEWS:
            workload.check(name, query(workload.project, name), VIEWS[name][1])


class TestTwoViewsOnOneLog(ChangeLogTests):
    def test_alternate_refreshes_lose_nothing_and_purge_everything(self, project):
        workload = self.workload(project, seed=5)
        for _ in range(3):
            workload.round(5)
            run("--select", "big_orders")
            self.check(workload, "big_orders")
            # order_countries has not consumed them yet: they must still be in the log
            assert any(op in (("I",), ("D",)) for op in log_rows(project, "orders"))
            workload.round(5)
            run("--select", "order_countries")
            self.check(workload, "order_countries")
        run()
        self.check(workload)
        assert log_rows(project, "orders") == [("W",)]
        assert log_rows(project, "customers") == [("W",)]


class TestInterruptedRefresh(ChangeLogTests):
    def test_every_fault_point_recovers(self, project):
        workload = self.workload(project, seed=7)
        points = 0
        for fault_after in range(1, 40):
            workload.round(4, batched=fault_after % 2 == 0)  # one commit per operation, or one MERGE
            results, log = run("--select", "order_countries", fault_after=fault_after, expect_pass=None)
            if results[0].status == "success":
                break  # fewer state-changing statements than fault_after: every point was covered
            assert "injected fault after statement" in log
            points += 1
            run("--select", "order_countries")  # the rerun completes the refresh
            self.check(workload, "order_countries")
        assert points >= 6, points
        run()
        self.check(workload)


class TestWritesDuringRefresh(ChangeLogTests):
    def test_a_concurrent_write_waits_for_the_next_refresh(self, project):
        workload = self.workload(project, seed=9)
        workload.round(4)
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
        late = f"insert into {project.test_schema}.orders values (99999, 1001, 50.0)"
        FaultInjection.on_fault = lambda: spark.sql(late).collect()
        try:
            run("--select", "order_countries", fault_at="set spark.wap.id=")  # after mark, before the write
        finally:
            FaultInjection.on_fault = None
        workload.history.append(late)
        wap_id = rows(project, f"select summary['wap.id'] from {project.test_schema}.order_countries.snapshots "
                               f"where snapshot_id = (select snapshot_id from {project.test_schema}.order_countries.refs)")[0][0]
        state = ViewState.decode(wap_id)
        as_of = {m: state.logs[f"{project.test_schema}.mlog_{m}"].master_snapshot for m in ("orders", "customers")}
        # the view is the defining query at the marked master snapshots: the late row is not half-applied
        workload.check("order_countries", query(project, "order_countries", as_of), VIEWS["order_countries"][1])
        assert (99999,) not in rows(project, f"select order_id from {project.test_schema}.order_countries")
        run("--select", "order_countries")
        self.check(workload, "order_countries")
