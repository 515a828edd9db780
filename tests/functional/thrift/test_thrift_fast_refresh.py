"""fast_refresh through a real Spark Thrift Server (dbt-spark ``method: thrift``, PyHive).

The example project's views (inner join, outer join, aggregate, aggregate over a join) are
built, refreshed after changes to every master table, and rebuilt with --full-refresh; after
each run every view must equal its defining query recomputed on the server. Every view class
is fast refreshed there as in the embedded mode, and that equality is
the contract.
"""

import re

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.util import (
    assert_views_match_queries,
    example_project_files,
    relation_exists,
    rows,
)

pytestmark = pytest.mark.thrift

SEEDS, MODELS, MACROS = (example_project_files(kind) for kind in ("seeds", "models", "macros"))
# The demo's `run-operation shop_changes` is not used here: run_query() of DML fails over
# thrift (see TestRunQueryOverThrift); the same kind of changes are applied directly instead.
VIEWS = sorted(name[:-4] for name in MODELS if name.endswith(".sql"))

# Changes to every master between runs: inserts, deletes, updates of join keys, group keys,
# measures and NULLs (a customer appearing for a dangling order, a product vanishing from
# under an outer join, a group emptied, a new NULL group member). The masters' keys declared
# in the example's change logs stay unique.
FIRST_CHANGES = [
    "insert into {s}.orders values (112, 6, date'2026-03-15', 'shipped'), (113, null, date'2026-03-16', 'shipped')",
    "update {s}.orders set status = 'shipped' where order_id = 104",
    "update {s}.orders set customer_id = 2 where order_id = 109",
    "delete from {s}.orders where order_id = 100",
    "update {s}.customers set country = 'FR' where customer_id = 4",
    "insert into {s}.customers values (9, 'Frances Allen', 'US', 'corporate')",
    "delete from {s}.customers where customer_id = 7",
    "insert into {s}.order_lines values (112, 1, 12, 2, 199.00), (112, 2, null, 1, 3.00), (113, 1, 99, 1, null)",
    "update {s}.order_lines set quantity = 5 where order_id = 110 and line_no = 2",
    "delete from {s}.order_lines where order_id = 101",
    "update {s}.products set category = 'peripherals' where product_id = 11",
    "delete from {s}.products where product_id = 16",
    "insert into {s}.products values (99, 'Sticker', 'merch', 5.00)",
]
SECOND_CHANGES = [
    "delete from {s}.order_lines where product_id = 10",
    "update {s}.order_lines set unit_price = unit_price * 2 where product_id = 13",
    "update {s}.orders set status = 'cancelled' where order_id = 105",
    "update {s}.customers set country = null where customer_id = 3",
    "delete from {s}.products where product_id = 99",
]

THIRD_CHANGES = [
    "insert into {s}.orders values (114, 1, date'2026-03-20', 'shipped')",
    "insert into {s}.order_lines values (114, 1, 10, 1, 49.90)",
    "update {s}.customers set name = 'Ada King' where customer_id = 1",
]


def apply(project, statements):
    for statement in statements:
        project.run_sql(statement.format(s=project.test_schema))


class ExampleProject:
    """The example project's seeds, views and macros as dbt test fixtures."""

    @pytest.fixture(scope="class")
    def seeds(self):
        return SEEDS

    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    @pytest.fixture(scope="class")
    def macros(self):
        return MACROS

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+materialized": "fast_refresh", "+refresh_method": "fast"}}  # as the example project


class TestExampleProjectOverThrift(ExampleProject):

    def refresh(self, *args):
        results, log = run_dbt_and_capture(["run", *args])
        assert sorted(r.node.name for r in results if r.status == "success") == VIEWS, log
        return log

    def test_build_refresh_and_full_refresh(self, project):
        results, log = run_dbt_and_capture(["build"])
        assert all(r.status in ("success", "pass") for r in results), log
        assert len([r for r in results if r.node.resource_type == "model"]) == len(VIEWS) == 7
        for view in VIEWS:
            assert re.search(rf"{view}: build \(first run", log), f"no build line for {view}"
            describe = rows(project, f"describe extended {project.test_schema}.{view}")
            assert ("Provider", "iceberg", "") in describe, describe
        assert_views_match_queries(project, MODELS)

        apply(project, FIRST_CHANGES)
        log = self.refresh()
        for view in VIEWS:  # every view class is fast refreshed over thrift too
            assert re.search(rf"{view}: fast refresh: .*steps run: ", log), f"{view} was not fast refreshed:\n{log}"
        assert_views_match_queries(project, MODELS)
        results = run_dbt(["test"])  # the example project's data tests still hold
        assert results and all(r.status == "pass" for r in results)

        self.refresh()  # nothing changed
        assert_views_match_queries(project, MODELS)

        apply(project, SECOND_CHANGES)
        log = self.refresh("--full-refresh")
        for view in VIEWS:
            assert re.search(rf"{view}: build \(--full-refresh", log), f"no full-refresh line for {view}"
        assert_views_match_queries(project, MODELS)

        apply(project, THIRD_CHANGES)  # after a full refresh, refreshes go on from there
        self.refresh()
        assert_views_match_queries(project, MODELS)


class TestBadConfigOverThrift:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"order_lines.csv": SEEDS["order_lines.csv"]}

    @pytest.fixture(scope="class")
    def models(self):
        hook = "pre_hook=\"create table {{ this.schema }}.hook_ran (x int)\""
        return {
            "sometimes_view.sql": "{{ config(materialized='fast_refresh', refresh_method='sometimes', " + hook + ") }}"
            "select order_id, quantity from {{ ref('order_lines') }}",
            "parquet_view.sql": "{{ config(materialized='fast_refresh', file_format='parquet') }}"
            "select order_id from {{ ref('order_lines') }}",
        }

    def test_refused_before_anything_runs(self, project):
        run_dbt(["seed"])
        results, log = run_dbt_and_capture(["run"], expect_pass=False)
        assert {r.node.name: r.status for r in results} == {"sometimes_view": "error", "parquet_view": "error"}
        assert "refresh_method='sometimes' is not supported" in log
        assert "'force', 'fast', 'complete'" in log
        assert "file_format='parquet' is not supported" in log
        for name in ("sometimes_view", "parquet_view", "hook_ran"):  # hook_ran: failed before the pre-hook
            assert not relation_exists(project, name)


class TestDropSchemaOverThrift:
    """dbt's cleanup drops test schemas: on Iceberg's Hadoop catalog `drop schema ... cascade`
    refuses a non-empty namespace, so the adapter empties it first."""

    def test_drop_non_empty_schema(self, project):
        schema = f"{project.test_schema}_extra"
        project.create_test_schema(schema)
        project.run_sql(f"create table {schema}.t (x int) using iceberg")
        project.run_sql(f"insert into {schema}.t values (1)")
        adapter = project.adapter
        with adapter.connection_named("__test_drop"):
            adapter.drop_schema(adapter.Relation.create(schema=schema))
        project.created_schemas.remove(schema)
        assert schema not in [name for (name,) in rows(project, "show databases")]


class TestRunQueryOverThrift:
    """PyHive 0.7.0 cannot fetch the (empty) result of a statement without a result set from
    Spark 3.5 (``FetchResults`` returns ``results.columns = None``; PyHive fails with
    ``TypeError: 'NoneType' object is not iterable``, apache/kyuubi#7106), which broke dbt's
    ``run_query`` of DDL/DML (fetch=True), e.g. the demo's ``run-operation shop_changes``. The
    adapter's thrift connection fetches such a result as no rows."""

    @pytest.fixture(scope="class")
    def macros(self):
        return {
            "ddl.sql": "{% macro ddl() %}{% do run_query('create table ' ~ target.schema ~ '.rq (x int) using iceberg') %}"
            "{% do run_query('insert into ' ~ target.schema ~ '.rq values (1)') %}{% endmacro %}"
        }

    def test_run_query_of_ddl_and_dml(self, project):
        run_dbt(["run-operation", "ddl"])
        assert rows(project, f"select x from {project.test_schema}.rq") == [(1,)]


class TestServerSideParametersOverThrift:
    """dbt-spark hands ``server_side_parameters`` to PyHive as the session configuration; the
    Spark Thrift Server applies only keys prefixed ``set:hiveconf:`` (or ``set:hivevar:``), so the
    adapter prefixes the keys that are not."""

    @pytest.fixture(scope="class")
    def dbt_profile_target(self, dbt_profile_target):
        return {
            **dbt_profile_target,
            "server_side_parameters": {
                "set:hiveconf:spark.sql.shuffle.partitions": "3",
                "spark.sql.session.timeZone": "Asia/Tokyo",
            },
        }

    def test_prefixed_parameters_apply(self, project):
        assert rows(project, "set spark.sql.shuffle.partitions") == [("spark.sql.shuffle.partitions", "3")]

    def test_unprefixed_parameters_apply(self, project):
        assert rows(project, "set spark.sql.session.timeZone") == [("spark.sql.session.timeZone", "Asia/Tokyo")]


class TestLoggedIncrementalOverThrift:
    """The logged_merge incremental strategy and a view over it, over SQL: the model's merge and
    its log rows go through branches and CALL fast_forward (no Java API), the view reads the log
    the model wrote (no capture of the model's history)."""

    @pytest.fixture(scope="class")
    def models(self):
        columns = ("order_id", "status", "amount")
        changed = " and ".join(f"t.{c} <=> r.{c}" for c in columns)
        return {
            "stg_orders.sql": (
                "{{ config(materialized='incremental', incremental_strategy='logged_merge', unique_key='order_id', "
                "file_format='iceberg') }}\nselect r.order_id, r.status, r.amount from {{ source('raw', 'orders') }} r\n"
                "{% if is_incremental() %}where not exists (select 1 from {{ this }} t where " + changed + "){% endif %}"
            ),
            "orders_by_status.sql": (
                "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n"
                "select status, count(*) as n, sum(amount) as total from {{ ref('stg_orders') }} group by status"
            ),
            "sources.yml": (
                "version: 2\nsources:\n  - name: raw\n    schema: \"{{ target.schema }}\"\n    tables:\n      - name: orders\n"
                "  - name: model_logs\n    schema: \"{{ target.schema }}\"\n    tables:\n      - name: mlog_stg_orders\n"
                "        meta: {mv_log: {master: stg_orders, key: [order_id]}}\n"
            ),
        }

    def test_the_merge_logs_its_changes_and_the_view_reads_them(self, project):
        s = project.test_schema
        project.run_sql(f"create table {s}.orders (order_id bigint, status string, amount int) using iceberg")
        project.run_sql(f"insert into {s}.orders values (1, 'open', 10), (2, 'open', 20), (3, 'paid', null)")
        run_dbt(["run"])
        query = {"orders_by_status": f"select status, count(*) as n, sum(amount) as total from {s}.stg_orders group by status"}
        project.run_sql(f"insert into {s}.orders values (4, 'paid', 5)")
        project.run_sql(f"update {s}.orders set status = 'paid', amount = 11 where order_id = 1")
        run_dbt(["run"])  # (the log was created by the first build of orders_by_status)
        project.run_sql(f"update {s}.orders set amount = 99 where order_id = 2")
        project.run_sql(f"insert into {s}.orders values (5, null, 1)")
        results, log = run_dbt_and_capture(["run"])
        assert all(r.status == "success" for r in results), log
        assert re.search(rf"stg_orders: merged into {s}.stg_orders; logged 3 image\(s\) to {s}.mlog_stg_orders", log), log
        line = next(line for line in log.splitlines() if "orders_by_status: fast refresh:" in line)
        assert "mixed (+2/-1)" in line and "captured" not in line, line
        for view, sql in query.items():
            expected = sorted(rows(project, sql), key=str)
            assert sorted(rows(project, f"select status, n, total from {s}.{view}"), key=str) == expected
        results, log = run_dbt_and_capture(["run"])
        assert "stg_orders: no new rows: nothing merged or logged" in log, log
