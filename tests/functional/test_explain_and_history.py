"""explain_fast_refresh (read-only, all reasons, every phase's statements, works unbuilt) and the
refresh history (one row per refresh, written when the command ends; mv_status shows the newest)."""

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.util import capture_sources, relation_exists, rows

SOURCES = capture_sources({"orders": "order_id"})
TOTALS = ("{{ config(materialized='fast_refresh') }}\n"
          "select o.customer_id, count(*) as n, sum(o.amount) as total from {{ source('shop', 'orders') }} o "
          "group by o.customer_id")
BAD = ("{{ config(materialized='fast_refresh') }}\n"
       "select o.order_id, row_number() over (order by o.amount) as rn from {{ source('shop', 'orders') }} o limit 5")


def explain(model):
    _, log = run_dbt_and_capture(["run-operation", "explain_fast_refresh", "--args", f"{{model: {model}}}"])
    return log


def snapshots(project, *tables):
    return {t: rows(project, f"select snapshot_id from {project.test_schema}.{t}.`refs` where name = 'main'") for t in tables}


class TestExplainAndHistory:
    @pytest.fixture(scope="class")
    def models(self):
        return {"totals.sql": TOTALS, "bad.sql": BAD, "sources.yml": SOURCES}

    def test_explain_then_history(self, project):
        schema = project.test_schema
        project.run_sql(f"create table {schema}.orders (customer_id bigint, order_id bigint, amount decimal(10,2)) using iceberg")
        project.run_sql(f"insert into {schema}.orders values (1, 1, 5.00), (1, 2, 50.00), (2, 3, 7.00)")

        # not built yet: the build, then the fast refresh that follows; nothing is created
        log = explain("totals")
        assert f"-- explain_fast_refresh: totals ({schema}.totals, not built yet)" in log, log
        assert "view class: aggregate" in log and "fast refreshable: yes" in log
        assert "next dbt run: build (first run: building the view in full)" in log
        for phase in ("mark", "write", "publish", "purge"):
            assert f"-- once built, a fast refresh runs: {phase}" in log, phase
        assert not relation_exists(project, "totals") and not relation_exists(project, "mlog_orders")

        # every reason, numbered, each with what to change
        log = explain("bad")
        assert "fast refreshable: no (2 reasons)" in log, log
        assert "1. LIMIT 5: LIMIT keeps an arbitrary subset of rows" in log
        assert "2. ROW_NUMBER() OVER (ORDER BY o.amount): a window without PARTITION BY reads every row" in log

        run_dbt(["run"])
        project.run_sql(f"insert into {schema}.orders values (3, 4, 1.00)")
        before = snapshots(project, "totals", "mlog_orders", "orders")
        log = explain("totals")
        assert "next dbt run: " in log and "-- fast refresh: capture" in log, log
        assert "call spark_catalog.system.create_changelog_view(" in log or "mv_files_added_<id>" in log
        assert "cost: fast ~" in log and "refresh_method='force' runs" in log
        assert snapshots(project, "totals", "mlog_orders", "orders") == before  # explain changed nothing

        _, refreshed = run_dbt_and_capture(["run", "--select", "totals"])
        run_dbt(["run", "--select", "totals"])  # nothing to refresh
        history = rows(project, f"select model, method, statements, view_snapshot, seconds['total'] >= 0, "
                                f"size(marked) from {schema}.mv_refresh_history where model = 'totals' order by refreshed_at")
        methods = [h[1] for h in history]
        assert methods[0] == "build" and methods[-1] == "none" and methods[1] in ("fast", "complete"), history
        assert history[-1][2] == 0, "a refresh with nothing to do ran no statement"
        current = rows(project, f"select snapshot_id from {schema}.totals.`refs` where name = 'main'")[0][0]
        assert history[-1][3] == current and all(h[4] for h in history)
        assert ("bad", "build") in {(m, x) for m, x, *_ in rows(project, f"select model, method from {schema}.mv_refresh_history")}

        _, log = run_dbt_and_capture(["run-operation", "mv_status", "--args", "{models: [totals]}"])
        assert "totals: fresh; last refresh " in log and ": none" in log, log


FORCED = ("{{ config(materialized='fast_refresh', refresh_method=var('method', 'force')) }}\n"
          "select o.customer_id, count(*) as n, sum(o.amount) as total from {{ source('shop', 'orders') }} o "
          "group by o.customer_id")
QUERY = "select customer_id, count(*) as n, sum(amount) as total from {s}.orders group by customer_id"


class TestCostBasedForce:
    """On a table this small a complete refresh is cheaper: force recomputes without capturing;
    a later fast refresh resumes where the recomputed view stands (the capture reads none of the
    changes before it), and the view stays equal to its query throughout."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"v.sql": FORCED, "sources.yml": SOURCES}

    def test_recompute_without_capture_then_resume_fast(self, project):
        from tests.functional.util import assert_view_matches_query

        schema = project.test_schema
        project.run_sql(f"create table {schema}.orders (customer_id bigint, order_id bigint, amount decimal(10,2)) using iceberg")
        project.run_sql(f"insert into {schema}.orders values (1, 1, 5.00), (1, 2, 50.00), (2, 3, 7.00)")
        run_dbt(["run"])
        log_before = snapshots(project, "mlog_orders")

        project.run_sql(f"insert into {schema}.orders values (3, 4, 1.00)")
        project.run_sql(f"update {schema}.orders set amount = 6.00 where order_id = 1")
        _, log = run_dbt_and_capture(["run"])
        assert "v: complete (estimated " in log and "capture of shop.orders" in log and "not needed" in log, log
        assert snapshots(project, "mlog_orders") == log_before, "the capture was skipped"
        assert_view_matches_query(project, f"{schema}.v", QUERY.format(s=schema), columns="customer_id, n, total")

        project.run_sql(f"delete from {schema}.orders where order_id = 3")
        project.run_sql(f"insert into {schema}.orders values (2, 5, 2.00)")
        _, log = run_dbt_and_capture(["run", "--vars", "{method: fast}"])
        assert "v: fast refresh:" in log and "skip (every view reading the log reflects master snapshot" in log, log
        assert_view_matches_query(project, f"{schema}.v", QUERY.format(s=schema), columns="customer_id, n, total")
        _, log = run_dbt_and_capture(["run-operation", "mv_status"])
        assert "v: fresh" in log, log


class TestForceRandomized:
    """Randomized inserts, updates, key changes and deletes (NULLs, duplicates) on three masters;
    every round refreshed by force (on tables this small: recomputed, the captures skipped) or
    fast (resuming where the recomputed views stand), in a random order: every view equals its
    query after every run."""

    @pytest.fixture(scope="class")
    def models(self):
        from tests.functional.differential import Workload
        from tests.functional.test_join_refresh import MASTERS, VIEWS

        config = "{{ config(materialized='fast_refresh', refresh_method=var('method', 'force')) }}\n"
        files = {f"{name}.sql": config + sql for name, (sql, _) in VIEWS.items() if name != "referrals"}
        files["sources.yml"] = Workload.sources_yml(MASTERS)
        return files

    def test_randomized_force_and_fast(self, project):
        import random
        from dataclasses import replace

        from tests.functional.differential import OPERATIONS, Workload
        from tests.functional.test_join_refresh import MASTERS, VIEWS, defining_query

        workload = Workload(project, [replace(m, rows={}) for m in MASTERS], seed=23)
        workload.create(initial_rows=10)
        run_dbt(["run"])
        methods = random.Random(23).choices(["force", "fast"], k=6)
        methods[:2] = ["force", "fast"]  # at least one skip and one resume
        seen = set()
        for round_number, method in enumerate(methods):
            workload.alternating_round(round_number)
            _, log = run_dbt_and_capture(["run", "--vars", f"{{method: {method}}}"])
            seen |= {what for what in ("not needed", "skip (every view", "fast refresh:") if what in log}
            for name, (sql, columns) in VIEWS.items():
                if name != "referrals":
                    workload.check(name, defining_query(project, sql), columns)
        assert seen == {"not needed", "skip (every view", "fast refresh:"}, seen
        assert sum(OPERATIONS.values()) > 0
