"""One build, change, refresh and check of every view class in one dbt project: the smoke test the
Spark 4 job and the Thrift smoke run (scripts/test_spark4.sh, tests/functional/thrift/
test_thrift_smoke.py; the randomized tests of each class run in the Spark 3.5 suite, at full depth
in scripts/test_matrix.sh).

After the build and after each refresh (a batched change, one of single statements, key updates and
deletes), every view equals its defining query recomputed on the masters, and every refresh is fast."""

import os
from dataclasses import replace

import pyspark
import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.differential import Workload
from tests.functional.test_aggregate_refresh import MASTERS, SRC, visible_columns

O, C, R = SRC["orders"], SRC["customers"], SRC["regions"]
VIEWS = {
    # inner joins of three masters, an expression and a filter
    "smoke_join": (
        "select o.order_id, o.amount * 2 as doubled, c.segment, r.region from " + O + " o "
        f"join {C} c on o.customer_id = c.customer_id join {R} r on c.region_id = r.region_id where o.status <> 'cancelled'"
    ),
    # a LEFT JOIN chain
    "smoke_outer_join": (
        f"select c.customer_id, c.segment, o.order_id, o.amount from {C} c "
        f"left join {O} o on o.customer_id = c.customer_id"
    ),
    # an aggregate of every kind over a join
    "smoke_aggregate": (
        "select c.region_id, count(*) as n, count(o.amount) as n_amount, sum(o.amount) as total, "
        "avg(o.quantity) as avg_quantity, min(o.amount) as low, max(o.weight) as high "
        f"from {O} o join {C} c on o.customer_id = c.customer_id group by c.region_id"
    ),
    # an aggregate over an outer join, with HAVING
    "smoke_outer_aggregate": (
        f"select c.segment, count(o.order_id) as orders, sum(o.quantity) as quantity from {C} c "
        f"left join {O} o on o.customer_id = c.customer_id group by c.segment having count(*) > 1"
    ),
    # a global aggregate labelled by a constant, and a SELECT DISTINCT
    "smoke_global": f"select 'all' as scope, count(*) as n, avg(o.amount) as mean from {O} o",
    "smoke_distinct": f"select distinct o.status, o.customer_id is null as anonymous from {O} o",
    # UNION ALL of a join branch and an aggregate branch of another type (widened to double)
    "smoke_union": (
        f"select o.status as label, o.amount as value from {O} o where o.status = 'open' "
        f"union all select c.segment, avg(o.weight) from {O} o join {C} c on o.customer_id = c.customer_id "
        "group by c.segment"
    ),
    # the latest row per key (a ranking window filtered on)
    "smoke_latest": (
        "select * from (select o.order_id, o.customer_id, o.amount, row_number() over (partition by o.customer_id "
        f"order by o.amount desc nulls last, o.order_id) as rn from {O} o) as latest where rn = 1"
    ),
    # windows over a common partition (a view of rows carrying them)
    "smoke_windowed": (
        "select o.order_id, o.customer_id, lag(o.amount) over (partition by o.customer_id order by o.order_id) "
        f"as previous_amount, sum(o.quantity) over (partition by o.customer_id) as customer_quantity from {O} o"
    ),
    # a view over a view (smoke_join keeps its own change log: mv_log=true)
    "smoke_over_view": "select v.region, count(*) as n, sum(v.doubled) as doubled from {{ ref('smoke_join') }} v group by v.region",
}
if int(pyspark.__version__.split(".")[0]) >= 4:
    # LISTAGG ... WITHIN GROUP (Spark 4): the groups a change touches recomputed; FILTER as CASE WHEN
    VIEWS["smoke_listagg"] = (
        "select o.customer_id, listagg(o.status, ',') within group (order by o.status) as statuses, "
        "listagg(distinct o.status) within group (order by o.status) as kinds, "
        f"count(*) filter (where o.amount > 0) as n_positive from {O} o group by o.customer_id"
    )
LOGS = """
  - name: model_logs
    schema: "{{ target.schema }}"
    tables:
      - name: mlog_smoke_join
        meta: {mv_log: {master: smoke_join, key: [order_id]}}
"""


class TestEveryViewClass:
    VIEWS: dict[str, str] = VIEWS  # (a subclass may run some of them)
    # the changes refreshed in turn: a MERGE per master, single statements, key updates and deletes
    # (DBT_MV_SMOKE_ROUNDS: a comma-separated choice of them)
    ROUNDS: tuple[str, ...] = tuple(os.environ.get("DBT_MV_SMOKE_ROUNDS", "batched,single,keys").split(","))

    @pytest.fixture(scope="class")
    def models(self):
        config = "materialized='fast_refresh', refresh_method='fast'"
        files = {
            f"{name}.sql": f"{{{{ config({config}{', mv_log=true' if name == 'smoke_join' else ''}) }}}}\n{sql}"
            for name, sql in self.VIEWS.items()
        }
        files["sources.yml"] = Workload.sources_yml(MASTERS) + LOGS
        return files

    def check_all(self, workload):
        schema = workload.project.test_schema
        for name, sql in self.VIEWS.items():
            for master in ("orders", "customers", "regions"):
                sql = sql.replace(SRC[master], f"{schema}.{master}")
            sql = sql.replace("{{ ref('smoke_join') }}", f"{schema}.smoke_join")
            workload.check(name, sql, visible_columns(workload.project, name))

    def refreshed(self, workload) -> str:
        results, log = run_dbt_and_capture(["run"])
        assert all(r.status == "success" for r in results), log
        assert log.count("fast refresh:") == len(self.VIEWS), log
        self.check_all(workload)
        return log

    def test_built_changed_refreshed_and_equal_to_the_queries(self, project):
        workload = Workload(project, [replace(m, rows={}) for m in MASTERS], seed=71)
        workload.create(initial_rows=10)
        results = run_dbt(["run"])
        assert all(r.status == "success" for r in results)
        self.check_all(workload)
        for kind in self.ROUNDS:
            if kind == "batched":
                workload.round(40, batched=True)  # one MERGE per master
            elif kind == "single":
                workload.round(6)  # one commit per statement
            else:
                workload.round(6, kinds=("update_key", "delete"))
            self.refreshed(workload)
        # every view compacted (Iceberg's procedures on this Spark and catalog): no row changes, and
        # each refresh reads its state through the compaction's commit: nothing to refresh
        _, log = run_dbt_and_capture(["run-operation", "mv_compact", "--args", "{every: true}"])
        assert log.count("compacted in") == len(self.VIEWS), log
        log = self.refreshed(workload)  # nothing changed
        assert log.count("nothing marked") == len(self.VIEWS), log
