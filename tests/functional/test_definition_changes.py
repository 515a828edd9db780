"""A view whose model or masters changed is rebuilt (or the run fails), never refreshed on top."""

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture, write_file

from tests.functional.util import capture_sources, rows

SOURCES = capture_sources({"orders": "order_id"})
VIEW = "{{ config(materialized='fast_refresh', refresh_method='fast') }}\nselect o.order_id, o.amount from {{ source('shop', 'orders') }} o"


class TestDefinitionChanges:
    @pytest.fixture(scope="class")
    def models(self):
        return {"big.sql": VIEW, "sources.yml": SOURCES}

    def test_edits_and_schema_changes(self, project):
        schema = project.test_schema
        project.run_sql(f"create table {schema}.orders (order_id bigint, amount decimal(10,2), channel string) using iceberg")
        project.run_sql(f"insert into {schema}.orders values (1, 5.00, 'web'), (2, 50.00, 'shop')")
        run_dbt(["run"])
        model = project.project_root.join("models", "big.sql")

        # a comment and whitespace: still the same view, refreshed fast
        write_file("-- orders\n" + VIEW.replace(" from ", "\n  from "), model)
        project.run_sql(f"insert into {schema}.orders values (3, 7.00, 'web')")
        _, log = run_dbt_and_capture(["run"])
        assert "big: fast refresh:" in log, log

        # an edit of the SQL: rebuilt, and the log says why
        edited = VIEW + " where o.amount > 6"
        write_file(edited, model)
        _, log = run_dbt_and_capture(["run"])
        assert "big: build (the model's SQL changed since the view was built" in log, log
        assert sorted(rows(project, f"select order_id, amount from {schema}.big")) == sorted(
            rows(project, f"select order_id, amount from {schema}.orders where amount > 6"))
        _, log = run_dbt_and_capture(["run"])
        assert "big: fast refresh:" in log  # and then refreshed fast again

        # on_configuration_change='fail': a further edit fails the run, the view is untouched
        failing = edited.replace("refresh_method='fast'", "refresh_method='fast', on_configuration_change='fail'")
        write_file(failing, model)
        run_dbt(["run"])  # the config itself is not part of the SQL: no change
        write_file(failing.replace("> 6", "> 1"), model)
        _, log = run_dbt_and_capture(["run"], expect_pass=False)
        assert "the model's SQL changed since the view was built, and on_configuration_change='fail'" in log
        assert len(rows(project, f"select * from {schema}.big")) == 2
        write_file(edited, model)

        # a new master column the view does not read: no rebuild
        project.run_sql(f"alter table {schema}.orders add column note string")
        _, log = run_dbt_and_capture(["run"])
        assert "big: fast refresh:" in log, log
        # a column it reads changes type: rebuilt, or under on_configuration_change='fail' the run
        # fails before anything changes; the capture-managed log follows the master's new type
        project.run_sql(f"alter table {schema}.orders alter column amount type decimal(12,2)")
        write_file(failing, model)
        _, log = run_dbt_and_capture(["run"], expect_pass=False)
        changed = "column amount of " + f"{schema}.orders".lower() + ", which the view reads, changed type from decimal(10,2) to decimal(12,2)"
        assert changed + ", and on_configuration_change='fail'" in log, log
        assert column_types(project, "mlog_orders")["amount"] == "decimal(10,2)"  # nothing changed
        write_file(edited, model)
        _, log = run_dbt_and_capture(["run"])
        assert f"big: build ({changed}" in log, log
        assert column_types(project, "big")["amount"] == "decimal(12,2)"
        assert column_types(project, "mlog_orders")["amount"] == "decimal(12,2)"
        # a value the old type could not hold is refreshed fast
        project.run_sql(f"insert into {schema}.orders values (4, 1234567890.12, 'web', 'too big before')")
        _, log = run_dbt_and_capture(["run"])
        assert "big: fast refresh:" in log, log
        assert sorted(rows(project, f"select order_id, amount from {schema}.big")) == sorted(
            rows(project, f"select order_id, amount from {schema}.orders where amount > 6"))

        # a logged column the view does not read is dropped: dropped from the log too, no rebuild
        project.run_sql(f"alter table {schema}.orders drop column channel")
        project.run_sql(f"insert into {schema}.orders values (5, 9.00, null)")
        project.run_sql(f"update {schema}.orders set amount = 70 where order_id = 2")
        _, log = run_dbt_and_capture(["run"])
        assert "big: fast refresh:" in log, log
        assert "channel" not in column_types(project, "mlog_orders")
        assert sorted(rows(project, f"select order_id, amount from {schema}.big")) == sorted(
            rows(project, f"select order_id, amount from {schema}.orders where amount > 6"))


def column_types(project, table):
    described = rows(project, f"describe table {project.test_schema}.{table}")
    return {name: data_type for name, data_type, *_ in described if name and not name.startswith("#")}
