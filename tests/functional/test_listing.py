"""dbt's relation listing (adapter/listing.py) on the embedded Iceberg catalog: one ``show tables``
per schema instead of dbt-spark's ``show tables`` plus one ``describe extended`` per table, with the
relations typed as before (Iceberg tables), so the materializations behave as before."""

import re
import time

import pytest
from dbt.adapters.spark.impl import SparkAdapter
from dbt.tests.util import get_connection, run_dbt_and_capture

from tests.functional.util import assert_view_matches_query, capture_sources

TABLES = 50
SOURCES = capture_sources({"orders": "order_id"})
FAST = "{{ config(materialized='fast_refresh', refresh_method='fast') }}\nselect o.order_id, o.amount from {{ source('shop', 'orders') }} o"
TABLE = "{{ config(materialized='table', file_format='iceberg') }}\nselect 1 as id"


def statements(log, prefix):
    """The statements dbt ran (its debug log's ``On <connection>: <sql>`` records, query comment
    dropped) that start with ``prefix``."""
    records = re.split(r"\n(?=(?:\x1b\[0m)?\d\d:\d\d:\d\d)", log)
    found = []
    for record in records:
        match = re.search(r"\bOn [\w.-]+: (?:/\*.*?\*/\s*)?(.*)", record, re.DOTALL)
        if match and match.group(1).lstrip().lower().startswith(prefix):
            found.append(match.group(1).strip())
    return found


def timed(list_relations, adapter, schema):
    started = time.perf_counter()
    relations = list_relations(adapter.Relation.create(schema=schema))
    return relations, time.perf_counter() - started


def described(relations):
    return sorted((r.schema, r.identifier, str(r.type), bool(r.is_iceberg), bool(r.is_delta)) for r in relations)


class TestListingInOneStatement:
    @pytest.fixture(scope="class")
    def models(self):
        return {"fast_view.sql": FAST, "plain_table.sql": TABLE, "sources.yml": SOURCES}

    def test_a_schema_of_many_tables_is_listed_with_one_show_tables(self, project):
        schema = project.test_schema
        project.run_sql(f"create table {schema}.orders (order_id bigint, amount decimal(10,2)) using iceberg")
        project.run_sql(f"insert into {schema}.orders values (1, 5.00), (2, 50.00)")
        for i in range(TABLES):
            project.run_sql(f"create table {schema}.filler_{i:02d} (id int) using iceberg")

        results, log = run_dbt_and_capture(["--debug", "run"])
        assert [r.status for r in results] == ["success", "success"]
        assert "fast_view: build (first run" in log
        assert len(statements(log, f"show tables in `{schema}`")) == 1, log
        assert len(statements(log, f"show views in `{schema}`")) == 1
        assert not statements(log, "show table extended")
        assert not statements(log, "describe extended"), "a describe per table: dbt-spark's listing ran"

        # the relations are the ones dbt-spark's describes found: Iceberg tables
        adapter = project.adapter
        with get_connection(adapter):
            listed, ours = timed(adapter.list_relations_without_caching, adapter, schema)
            theirs, dbt_spark = timed(lambda r: SparkAdapter.list_relations_without_caching(adapter, r), adapter, schema)
        print(f"\nlisting {len(listed)} tables: {ours:.2f} s, dbt-spark's listing {dbt_spark:.2f} s")
        assert {r.identifier for r in listed} == {"orders", "mlog_orders", "fast_view", "plain_table", "mv_refresh_history"} | {
            f"filler_{i:02d}" for i in range(TABLES)
        }
        assert all(r.type == "table" and r.is_iceberg and "Provider: iceberg" in r.information for r in listed)
        assert described(listed) == described(theirs)

        # second run: the existing relations are recognised (fast refresh, Iceberg's create or replace)
        project.run_sql(f"insert into {schema}.orders values (3, 7.00)")
        project.run_sql(f"update {schema}.orders set amount = 6.00 where order_id = 1")
        results, log = run_dbt_and_capture(["--debug", "run"])
        assert [r.status for r in results] == ["success", "success"]
        assert "fast_view: fast refresh:" in log, log
        assert statements(log, "create or replace table"), "plain_table: dbt-spark saw no Iceberg table"
        assert not statements(log, f"drop table if exists {schema}.plain_table")
        assert len(statements(log, f"show tables in `{schema}`")) == 1
        assert_view_matches_query(project, f"{schema}.fast_view", f"select order_id, amount from {schema}.orders",
                                  columns="order_id, amount")

    def test_a_missing_schema_lists_nothing(self, project):
        with get_connection(project.adapter):
            missing = project.adapter.Relation.create(schema=f"{project.test_schema}_missing")
            assert project.adapter.list_relations_without_caching(missing) == []

    def test_dropping_the_schema_drops_its_tables(self, project):
        # drop_schema lists the schema's relations to drop them first (Hadoop catalog)
        with get_connection(project.adapter):
            relation = project.adapter.Relation.create(schema=project.test_schema)
            project.adapter.drop_schema(relation)
            assert project.adapter.list_relations_without_caching(relation) == []
