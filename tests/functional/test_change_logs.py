"""Change logs (issue 3): shared logs and purge, crash safety, point-in-time marks."""

import json
import os
import re
import subprocess
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.faults import FaultInjection
from dbt_incremental_mv.refresh.state.bookkeeping import ViewState
from tests.functional.catalogs import catalog_kind
from tests.depth import fault_points, full
from tests.functional.differential import Column, Master, Workload
from tests.functional.util import DBT_WITH_FAULTS, LOST_RACE, dbt_with_faults_env, rows

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
    env = {"DBT_INCREMENTAL_MV_FAULT_RUN": uuid.uuid4().hex}
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


def interrupted_runs_recover(workload, view: str, query: str, faults, columns: list[str]) -> int:
    """For each fault point of ``faults``: a round of changes, a run of ``view`` interrupted after
    that statement, then a run that must leave ``view`` equal to ``query`` (nothing lost, nothing
    doubled); until a run has fewer statements than the point. Returns the points interrupted."""
    points = 0
    for number, fault_after in enumerate(faults):
        workload.alternating_round(200 + number, operations=6)
        results, log = run("--select", view, fault_after=fault_after, expect_pass=None)
        if results[0].status == "success":
            break  # fewer statements than fault_after: every point was covered
        assert "injected fault after statement" in log, log
        points += 1
        run("--select", view)
        workload.check(view, query, columns)
    return points


class ChangeLogTests:
    CONFIGS: dict[str, str] = {}  # a view's configs beside materialized and refresh_method (", key=value")

    @pytest.fixture(scope="class")
    def models(self):
        files = {f"{name}.sql": "{{ config(materialized='fast_refresh', refresh_method='fast'"
                 + self.CONFIGS.get(name, "") + ") }}\n" + sql
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
        # every state-changing statement in turn at full depth, every third at the CI's (from an
        # offset the run's seed draws: tests/depth.py; DBT_MV_CRASH_STRIDE=k: every k-th)
        faults = fault_points(40, 3, "change logs")
        for number, fault_after in enumerate(faults):
            # one commit per operation, or one MERGE, alternately (whatever the stride)
            workload.round(4, batched=number % 2 == 0)
            results, log = run("--select", "order_countries", fault_after=fault_after, expect_pass=None)
            if results[0].status == "success":
                break  # fewer state-changing statements than fault_after: every point was covered
            assert "injected fault after statement" in log
            points += 1
            run("--select", "order_countries")  # the rerun completes the refresh
            self.check(workload, "order_countries")
        assert points >= 6 // faults.step, points
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


class TestRefreshersInSeparateProcesses(ChangeLogTests):
    """Two dbt processes (two JVMs) refresh the views of one shared log on one catalog while this
    process writes to the masters: one compare-and-swap winner, the other fails cleanly naming the
    refresh that won and its rerun applies what is left, nothing lost or applied twice, and the
    shared log purged only of what both views consumed. On every test catalog: each one's commits
    are atomic across processes (the embedded Hadoop catalog's through the plugin's file system)."""

    def pause_points(self) -> list[tuple[str, str | None]]:
        """The statements A pauses after (the first containing each text), each with the table whose
        compare-and-swap A must then lose to B (None: A must publish): A's write on the view's write
        branch, which B's publish leaves behind."""
        return [("delete from", "order_countries")]

    def dbt(self, project, profiles_root, *args, pause=None, pause_at=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith("DBT_INCREMENTAL_MV_FAULT")}
        if pause is not None:
            env.update(DBT_INCREMENTAL_MV_FAULT_AT=pause_at, DBT_INCREMENTAL_MV_FAULT_PAUSE=str(pause))
        return subprocess.Popen(
            [*DBT_WITH_FAULTS, "run", *args, "--project-dir", str(project.project_root), "--profiles-dir",
             str(profiles_root)],
            env=dbt_with_faults_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )

    @staticmethod
    def quiet(output: str) -> str:
        """A refresher's output, asserted free of Java stack traces and Python tracebacks."""
        assert "\tat org.apache" not in output and "Traceback" not in output, output[-4000:]
        return output

    @classmethod
    def finish(cls, process) -> tuple[int, str]:
        output, _ = process.communicate(timeout=900)
        return process.returncode, cls.quiet(output)

    def refresh_elsewhere(self, project, profiles_root) -> tuple[int, str]:
        """A refresh of both views by another process than A: at full depth a dbt process of its
        own; at the CI's this test process (its JVM is not A's either: the compare-and-swap is still
        across processes), two JVM starts fewer per catalog."""
        if full():
            return self.finish(self.dbt(project, profiles_root))
        results, output = run_dbt_and_capture(["run"], expect_pass=None)
        return (0 if all(r.status == "success" for r in results) else 1), self.quiet(output)

    def test_one_winner_publishes_the_other_fails_cleanly_and_reruns(self, project, profiles_root, tmp_path):
        workload = self.workload(project, seed=43)
        # (1) A pauses after a statement of its refresh of order_countries (its capture into the
        # shared log, its first write on the view's write branch); B refreshes both views meanwhile
        # and publishes; the writer commits; A resumes and loses the compare-and-swap cleanly
        # (DBT_MV_PAUSE_POINTS: which of them; by default the view write only, the JDBC catalog job both)
        given = os.environ.get("DBT_MV_PAUSE_POINTS")
        points = [(text, "order_countries") for text in given.split(",")] if given else self.pause_points()
        for point, (pause_at, loser) in enumerate(points):
            workload.round(8, batched=pause_at == "delete from")
            resume = tmp_path / f"resume{point}"
            a = self.dbt(project, profiles_root, "--select", "order_countries", pause=resume, pause_at=pause_at)
            while not Path(f"{resume}.reached").exists():
                assert a.poll() is None, self.finish(a)[1][-4000:]
                time.sleep(0.5)
            b_status, b_output = self.refresh_elsewhere(project, profiles_root)
            assert b_status == 0, b_output[-4000:]
            self.check(workload)  # B refreshed both views while A held its refresh open
            workload.round(4)
            resume.touch()
            a_status, a_output = self.finish(a)
            if loser is not None:
                assert a_status == 1 and f"{project.test_schema}.{loser} {LOST_RACE}" in a_output, a_output[-4000:]
                assert len(re.findall(r"ERROR creating sql fast_refresh model", a_output)) == 1, a_output[-4000:]
            else:
                assert a_status == 0, a_output[-4000:]
            self.finish_and_check(project, profiles_root, workload)
        # (2) both at once, unpaused, the writer committing until they end: each publishes or loses cleanly
        outcomes = Counter()
        for _ in range(int(os.environ.get("DBT_MV_SEPARATE_PROCESS_ROUNDS", "1"))):
            workload.round(8)
            both = [self.dbt(project, profiles_root), self.dbt(project, profiles_root, "--select", "order_countries")]
            while any(p.poll() is None for p in both):
                workload.round(2)
            for status, output in map(self.finish, both):
                outcomes["published" if status == 0 else "lost"] += 1
                assert status == 0 or LOST_RACE in output, output[-4000:]
            self.finish_and_check(project, profiles_root, workload)
        print(f"separate processes, unpaused: {dict(outcomes)}")

    def finish_and_check(self, project, profiles_root, workload):
        """One more refresh (by another process than A) applies what is left: the views are exact and
        the shared logs hold no change (both views consumed every one; superseded watermarks may wait)."""
        status, output = self.refresh_elsewhere(project, profiles_root)
        assert status == 0, output[-4000:]
        self.check(workload)
        for master in ("orders", "customers"):
            assert set(log_rows(project, master)) == {("W",)}, (master, log_rows(project, master))


class TestTheCatalog(ChangeLogTests):
    def test_the_tables_live_in_the_catalog_asked_for(self, project):
        """The suite runs on the catalog DBT_MV_TEST_CATALOG names (the profile alone chose it)."""
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
        self.workload(project, seed=3)
        assert spark.conf.get("spark.sql.catalog.spark_catalog.type") == catalog_kind()
        if catalog_kind() == "jdbc":
            uri = spark.conf.get("spark.sql.catalog.spark_catalog.uri")
            tables = spark.read.jdbc(uri, "iceberg_tables", properties={"user": "mv", "password": "", "driver": "org.postgresql.Driver"})
            names = {(r.table_namespace, r.table_name) for r in tables.collect()}
        if catalog_kind() == "rest":
            uri = spark.conf.get("spark.sql.catalog.spark_catalog.uri")
            with urllib.request.urlopen(f"{uri}/v1/namespaces/{project.test_schema}/tables") as response:
                names = {(".".join(t["namespace"]), t["name"]) for t in json.load(response)["identifiers"]}
        if catalog_kind() == "hive":  # asked of the metastore service through Hive's own client
            jvm = spark.sparkContext._jvm
            conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
            conf.set("hive.metastore.uris", spark.conf.get("spark.sql.catalog.spark_catalog.uri"))
            client = jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(conf)
            try:
                names = {(project.test_schema, name) for name in client.getAllTables(project.test_schema)
                         if client.getTable(project.test_schema, name).getParameters().get("table_type") == "ICEBERG"}
            finally:
                client.close()
        if catalog_kind() != "hadoop":
            schema = project.test_schema
            assert {(schema, "order_countries"), (schema, "big_orders"), (schema, "mlog_orders")} <= names, names
