"""Robustness of refreshes that must not apply a change twice: aggregate views (a change applied
twice is a wrong sum, not a duplicate row that a key would absorb) interrupted after every
statement, killed processes, and a capture that loses the race to a concurrent one."""

import os
import subprocess
from dataclasses import replace

import pytest
from dbt.tests.util import run_dbt

from tests.faults import FaultInjection
from tests.depth import fault_points, sample
from tests.functional.differential import Column, Master, Workload
from tests.functional.test_change_logs import run
from tests.functional.util import DBT_WITH_FAULTS, dbt_with_faults_env, rows


MASTERS = [
    Master("customers", "customer_id", key_pool=tuple(range(1001, 1007)), columns=[
        Column("country", "string", ["UK", "US", None]),
    ]),
    Master("orders", "order_id", [
        Column("customer_id", "bigint", [1001, 1002, 1003, 1004, None]),
        Column("amount", "decimal(10,2)", [1.5, 10.0, 4.0, None]),
    ]),
]
SRC = {name: f"{{{{ source('shop', '{name}') }}}}" for name in ("customers", "orders")}
VIEWS = {
    "country_totals": (
        "select c.country, count(*) as n, sum(o.amount) as total, max(o.amount) as max_amount "
        f"from {SRC['orders']} o join {SRC['customers']} c on o.customer_id = c.customer_id group by c.country"
    ),
    "customer_totals": (
        "select o.customer_id, count(*) as n, sum(o.amount) as total, min(o.amount) as min_amount "
        f"from {SRC['orders']} o group by o.customer_id"
    ),
}
OVERWRITE = ("--vars", "{rewrite_rows: 100000}")  # the small views rewritten whole (see RobustnessTests.models)
COLUMNS = {"country_totals": ["country", "n", "total", "max_amount"], "customer_totals": ["customer_id", "n", "total", "min_amount"]}


class RobustnessTests:
    @pytest.fixture(scope="class")
    def models(self):
        # refreshed by a DELETE and an INSERT on the write branch, unless a test passes OVERWRITE:
        # these small views are then rewritten whole by one overwrite (rewrite_rows)
        config = "materialized='fast_refresh', refresh_method='fast', rewrite_rows=var('rewrite_rows', 0)"
        files = {f"{name}.sql": "{{ config(" + config + ") }}\n" + sql for name, sql in VIEWS.items()}
        files["sources.yml"] = Workload.sources_yml(MASTERS)
        return files

    def workload(self, project, seed):
        workload = Workload(project, [replace(m, rows={}) for m in MASTERS], seed)
        workload.create(initial_rows=8)
        run_dbt(["run"])
        return workload

    def check(self, workload, *names):
        for name in names or VIEWS:
            sql = VIEWS[name]
            for master in ("orders", "customers"):
                sql = sql.replace(SRC[master], f"{workload.project.test_schema}.{master}")
            workload.check(name, sql, COLUMNS[name])


class TestInterruptedAggregateRefresh(RobustnessTests):
    def test_every_fault_point_recovers_without_double_counting(self, project):
        workload = self.workload(project, seed=21)
        points = 0
        faults = fault_points(60, 6, "aggregate")  # every one at full depth, every sixth in CI (tests/depth.py)
        for number, fault_after in enumerate(faults):
            workload.round(6, batched=number % 2 == 0)
            results, log = run("--select", "country_totals", fault_after=fault_after, expect_pass=None)
            if results[0].status == "success":
                break  # fewer state-changing statements than fault_after: every point was covered
            assert "injected fault after statement" in log
            points += 1
            run("--select", "country_totals")  # the rerun completes the refresh
            self.check(workload, "country_totals")
        assert points >= 8 // faults.step, points
        run()
        self.check(workload)


class TestCaptureLosingARace(RobustnessTests):
    def test_a_concurrent_log_commit_makes_the_capture_retry_not_duplicate(self, project):
        workload = self.workload(project, seed=23)
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
        log = f"{project.test_schema}.mlog_orders"

        def concurrent_capture():
            """Another process captures the same master commits first: it appends exactly the
            rows this capture just wrote to its branch (same images, same watermark)."""
            branch = spark.sql(f"select name from {log}.refs where name like 'mv_capture_%'").collect()[0][0]
            spark.sql(
                f"insert into {log} select * from {log} version as of '{branch}' except all select * from {log}"
            ).collect()

        for _ in range(3):
            workload.round(8, masters=["orders"], batched=True)
            FaultInjection.on_fault = concurrent_capture
            try:
                _, output = run("--select", "customer_totals", fault_at="insert into")  # the capture's write
            finally:
                FaultInjection.on_fault = None
            # every image is in the log once: the losing capture decided again and found nothing new
            images = rows(project, f"select order_id, _mv_commit, _mv_op, count(*) from {log} "
                                   "where _mv_op in ('I', 'D') group by 1, 2, 3 having count(*) > 1")
            assert not images, images
            self.check(workload, "customer_totals")
        run()
        self.check(workload)


class TestKilledRefresh(RobustnessTests):
    # the capture's branch written; the view's first write on its write branch; published, before the purge (a JVM
    # start each: the in-process fault test above covers every other statement)
    # (an insert-only change of the small aggregate view: rewritten whole by one overwrite)
    KILL_POINTS = ("insert into", "delete from", "'main', 'mv_publish_", "insert overwrite")

    @pytest.mark.parametrize("point", sample(KILL_POINTS, 2, "killed refresh"))  # (two in CI: tests/depth.py)
    def test_a_killed_refresh_is_rerun_to_the_same_view(self, project, profiles_root, point):
        workload = getattr(type(self), "_workload", None)
        if workload is None:
            workload = type(self)._workload = self.workload(project, seed=29)
        if point == "insert overwrite":
            workload.round(6, masters=["orders"], kinds=("insert",))
        else:
            workload.round(10, batched=True)
        env = {**os.environ, "DBT_INCREMENTAL_MV_FAULT_AT": point, "DBT_INCREMENTAL_MV_FAULT_KILL": "1"}
        env.pop("DBT_INCREMENTAL_MV_FAULT_AFTER", None)
        rewritten = OVERWRITE if point == "insert overwrite" else ()
        done = subprocess.run(
            [*DBT_WITH_FAULTS, "run", "--select", "customer_totals", *rewritten, "--project-dir", str(project.project_root),
             "--profiles-dir", str(profiles_root)],
            env=dbt_with_faults_env(env), capture_output=True, text=True, timeout=600,
        )
        assert done.returncode == 137, done.stdout[-3000:] + done.stderr[-3000:]
        run("--select", "customer_totals")  # the rerun completes what the killed run began
        self.check(workload, "customer_totals")
        run()  # the other view of the same log: its changes were neither lost nor doubled
        self.check(workload)
        assert not rows(project, f"select _mv_op from {project.test_schema}.mlog_orders where _mv_op in ('I', 'D')")


class TestTwoRefreshesOfOneView(RobustnessTests):
    def test_the_refresh_that_publishes_second_fails_cleanly(self, project):
        workload = self.workload(project, seed=31)
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
        view = f"{project.test_schema}.customer_totals"
        # another commit lands on the view while this refresh writes on its write branch (a compaction
        # here: it moves main as a competing refresh would, and keeps the bookkeeping readable)
        competitor = f"call spark_catalog.system.rewrite_data_files(table => '{view}', options => map('rewrite-all', 'true'))"
        for batched in (True, False):
            workload.round(8, masters=["orders"], batched=batched)
            FaultInjection.on_fault = lambda: spark.sql(competitor).collect()
            try:
                results, log = run("--select", "customer_totals", fault_at="delete from", expect_pass=False)
            finally:
                FaultInjection.on_fault = None
            assert "another refresh of" in log and "committed while this one ran" in log, log
            run("--select", "customer_totals")  # the rerun applies the changes, once
            self.check(workload, "customer_totals")
        workload.round(6, masters=["orders"], kinds=("insert",))  # insert-only: an append, the case
        FaultInjection.on_fault = lambda: spark.sql(competitor).collect()  # cherry-picking got wrong
        try:  # (the small view rewritten whole: one overwrite, staged, published as a compare-and-swap)
            results, log = run("--select", "customer_totals", *OVERWRITE, fault_at="insert overwrite", expect_pass=False)
            assert "another refresh of" in log and "committed while this one ran" in log, log
        finally:
            FaultInjection.on_fault = None
        run()
        self.check(workload)
