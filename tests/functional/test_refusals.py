"""The refusal catalogue end to end: every view definition the analysis refuses fails its dbt
model with the construct named, before anything is created or changed (refresh_method='fast'),
and with the default 'force' the same view is built by a complete refresh instead."""

import re

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt_incremental_mv.analysis.clock import sql_reads_clock
from dbt_incremental_mv.analysis.states import split_into_states
from tests.functional.util import capture_sources, rows
from tests.unit.analysis.conftest import MASTERS as ANALYSIS_MASTERS
from tests.unit.analysis.test_analysis_refusals import REFUSALS

MASTERS = ("orders", "customers")
SOURCES = capture_sources({"orders": "order_id", "customers": "customer_id"})
_SHOP_TABLE = re.compile(r"\bshop\.(\w+)")


def _model_name(case_id):
    return "refused_" + re.sub(r"[^a-z0-9]+", "_", case_id.lower()).strip("_")


def _as_model(sql):
    """The catalogue's SQL over dbt sources (only cases whose tables all exist here), else None."""
    tables = set(_SHOP_TABLE.findall(sql))
    if not tables <= set(MASTERS) or "{" in sql:
        return None
    return _SHOP_TABLE.sub(lambda m: f"{{{{ source('shop', '{m.group(1)}') }}}}", sql)


# (a run fixes the clock: the catalogue's clock cases are refused only by an analysis without one;
# a case that splits into internal states is maintained in steps: test_in_steps_refresh.py)
CASES = {
    _model_name(i): (_as_model(sql), construct)
    for i, sql, construct in REFUSALS
    if _as_model(sql) and not sql_reads_clock(sql) and split_into_states(sql, ANALYSIS_MASTERS) is None
}


class TestRefusalCatalogue:
    @pytest.fixture(scope="class")
    def models(self):
        files = {f"{name}.sql": "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n" + sql
                 for name, (sql, _) in CASES.items()}
        files["sources.yml"] = SOURCES
        return files

    @pytest.fixture(scope="class", autouse=True)
    def masters(self, project):
        """The masters, made once for the class's tests, whichever of them runs first or alone."""
        schema = project.test_schema
        project.run_sql(f"create table {schema}.orders (order_id bigint, customer_id bigint, order_date date, "
                        "status string, amount decimal(10,2)) using iceberg")
        project.run_sql(f"create table {schema}.customers (customer_id bigint, name string, country string, "
                        "segment string) using iceberg")
        project.run_sql(f"insert into {schema}.orders values (1, 1, date'2026-01-01', 'open', 2.50)")

    def test_every_refusal_fails_naming_the_construct_and_creates_nothing(self, project):
        schema = project.test_schema
        assert len(CASES) >= 60
        before = sorted(name for _, name, *_ in rows(project, f"show tables in {schema}"))

        results = run_dbt(["run"], expect_pass=False)
        by_name = {r.node.name: r for r in results}
        assert set(by_name) == set(CASES)
        for name, (_, construct) in CASES.items():
            result = by_name[name]
            message = str(result.message or "")
            assert result.status == "error", (name, result.status)
            assert "cannot fast refresh:" in message and construct.lower() in message.lower(), (name, message)
        after = sorted(name for _, name, *_ in rows(project, f"show tables in {schema}"))
        assert after == before  # no view, no log, nothing created
        assert rows(project, f"select count(*) from {schema}.orders") == [(1,)]

    def test_with_force_a_refused_view_is_refreshed_completely_saying_why(self, project):
        name = _model_name("rand")
        model = project.project_root.join("models", f"{name}.sql")
        model.write(model.read().replace("refresh_method='fast'", "refresh_method='force'"))
        _, log = run_dbt_and_capture(["run", "--select", name])
        assert f"{name}: build (first run" in log
        _, log = run_dbt_and_capture(["run", "--select", name])
        assert f"{name}: complete (fast refresh impossible: cannot fast refresh: rand()" in log.lower(), log
        # a dbt warning, so that --warn-error fails the run on it
        warning = f"model '{name}' was recomputed in full: it cannot be fast refreshed (cannot fast refresh: rand()"
        assert warning in log.lower(), log
        results = run_dbt(["--warn-error", "run", "--select", name], expect_pass=False)
        assert results[0].status == "error" and warning in str(results[0].message).lower(), results[0].message
