"""The one loop that runs a refresh's steps (refresh/phases/execute.py)."""

import pytest

from dbt_incremental_mv.refresh.phases.execute import Listing, PhaseClock, Ran, chosen_sql, execute_steps, run_sql_step
from dbt_incremental_mv.refresh.phases.publish import Step, StepKind
from dbt_incremental_mv.refresh.views.statement import WRITE_STOPPED, Fallback, LeanForm, stop_when

STEPS = [
    Step("main", "select 1", kind=StepKind.CREATE),
    Step("stage", kind=StepKind.SETTINGS, settings=(("spark.wap.id", "w1"),)),
    Step("insert", "insert into t select 1"),
    Step("uncache", kind=StepKind.UNCACHE, temp_view="t_delta"),
    Step("log", kind=StepKind.LOG, wap_id="w1"),
    Step("publish", kind=StepKind.PUBLISH, wap_id="w1"),
]


class Recording:
    def __init__(self):
        self.done = []

    def sql(self, step):
        self.done.append(("sql", step.name))

    def create(self, step):
        self.done.append(("create", step.name))

    def settings(self, step):
        self.done.append(("settings", step.settings))

    def uncache(self, step):
        self.done.append(("uncache", step.temp_view))

    def publish(self, step):
        self.done.append(("publish", step.wap_id))

    def own_log(self, step):
        self.done.append(("own_log", step.wap_id))


def test_each_step_is_run_in_order_by_its_kind_and_timed_under_its_phase():
    runner, clock = Recording(), PhaseClock({"plan": 1.0})
    execute_steps(STEPS, runner, clock)
    assert runner.done == [("create", "main"), ("settings", (("spark.wap.id", "w1"),)), ("sql", "insert"), ("uncache", "t_delta"), ("own_log", "w1"), ("publish", "w1")]
    assert set(clock.seconds) == {"plan", "write", "publish"} and clock.seconds["plan"] == 1.0


def test_a_failing_step_stops_the_run_and_its_time_is_still_counted():
    class Failing(Recording):
        def sql(self, step):
            raise RuntimeError("lost the race")

    clock = PhaseClock()
    runner = Failing()
    try:
        execute_steps(STEPS, runner, clock)
    except RuntimeError:
        pass
    assert runner.done == [("create", "main"), ("settings", (("spark.wap.id", "w1"),))] and "write" in clock.seconds and "publish" not in clock.seconds


def test_explain_lists_the_statements_a_refresh_runs():
    listing = Listing()
    execute_steps(STEPS, listing)
    assert listing.statements == ["select 1", "set spark.wap.id=w1", "insert into t select 1", "drop view if exists `t_delta`"]


def test_settings_are_listed_as_the_statements_they_stand_for():
    listing = Listing()
    step = Step("cache", kind=StepKind.SETTINGS, settings=(("spark.sql.adaptive.enabled", "false"), ("spark.wap.id", None)))
    execute_steps([step], listing)
    assert listing.statements == ["set spark.sql.adaptive.enabled=false", "reset spark.wap.id"]


def test_a_step_with_a_lean_form_runs_it_only_when_its_count_is_zero():
    step = Step("main", "insert full", lean=LeanForm("insert lean", "select count(*) from flagged", "its extra part"))
    asked = []

    def count(n):
        return lambda sql: asked.append(sql) or [(n,)]

    assert chosen_sql(step, count(0)) == ("insert lean", 0)
    assert chosen_sql(step, count(2)) == ("insert full", 2)
    assert chosen_sql(step, lambda sql: [(None,)]) == ("insert lean", 0)  # (no row counted)
    assert asked == ["select count(*) from flagged"] * 2
    plain = Step("main", "insert only")
    assert chosen_sql(plain, lambda sql: 1 / 0) == ("insert only", None)  # nothing asked
    listing = Listing()
    execute_steps([step], listing)
    assert listing.statements[0] == "select count(*) from flagged" and listing.statements[-1] == "insert full"
    assert listing.statements[1].startswith("-- ") and listing.statements[1].endswith("without its extra part")


def test_a_write_that_stops_runs_its_fallback_and_any_other_failure_is_raised():
    fallback = Fallback("insert overwrite t select recomputed", "the recompute")
    step = Step("main", "insert overwrite t select " + stop_when("guarded", "x"), fallback=fallback)
    ran = []

    def stopping(sql):  # as Spark reports raise_error, through any connection
        ran.append(sql)
        if "raise_error" in sql:
            raise RuntimeError(f"[USER_RAISED_EXCEPTION] {WRITE_STOPPED} SQLSTATE: P0001")

    assert run_sql_step(step, lambda sql: [[0]], stopping) == Ran(None, fell_back=True)
    assert ran == [step.sql, fallback.sql]
    ran.clear()
    assert run_sql_step(Step("main", "insert overwrite t select 1", fallback=fallback), None, ran.append) == Ran()
    assert ran == ["insert overwrite t select 1"]

    def failing(sql):
        raise RuntimeError("lost the race")

    with pytest.raises(RuntimeError, match="lost the race"):  # not a stop: the fallback does not run
        run_sql_step(step, None, failing)
    with pytest.raises(RuntimeError, match="USER_RAISED"):  # a stop without a fallback is a failure
        run_sql_step(Step("main", step.sql), None, stopping)


def test_explain_lists_a_fallback_after_its_write():
    listing = Listing()
    listing.sql(Step("main", "insert overwrite t select 1", fallback=Fallback("insert overwrite t select 2", "the recompute")))
    assert listing.statements == [
        "insert overwrite t select 1",
        "-- the statement below runs instead of the one above when that one stops at a row that needs it: the recompute",
        "insert overwrite t select 2",
    ]
