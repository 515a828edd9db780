import pytest
from dbt_common.exceptions import DbtRuntimeError

from dbt_incremental_mv.adapter import Plugin
from dbt_incremental_mv.adapter.connections import SparkMVCredentials, summarize_spark_error


def credentials(**overrides):
    fields = {"method": "session", "schema": "shop", **overrides}
    return SparkMVCredentials.from_dict(fields)


def test_session_profile_needs_no_host():
    creds = credentials()
    assert creds.host == "localhost"
    assert creds.type == "spark_mv"
    assert creds.iceberg_jars == "auto"
    assert creds.jit == "auto"
    assert "jit" in creds._connection_keys()


def test_bad_jit_mode_is_refused():
    with pytest.raises(DbtRuntimeError, match="jit='fast'.*'auto', 'quick', 'peak'"):
        credentials(jit="fast")


def test_bad_iceberg_jars_mode_is_refused():
    with pytest.raises(DbtRuntimeError, match="iceberg_jars='maven'.*'auto'"):
        credentials(iceberg_jars="maven")


def test_thrift_profile_keeps_dbt_spark_rules():
    creds = credentials(method="thrift", host="127.0.0.1", port=10000)
    assert creds.host == "127.0.0.1"
    with pytest.raises(DbtRuntimeError, match="host"):
        credentials(method="thrift")


def test_ansi_mode_is_off_unless_the_profile_names_it():
    # dbt-spark 1.11 turns ANSI off on every connection; a profile that sets it keeps its value
    assert credentials().server_side_parameters["spark.sql.ansi.enabled"] == "false"
    on = credentials(server_side_parameters={"spark.sql.ansi.enabled": True})
    assert on.server_side_parameters["spark.sql.ansi.enabled"] == "true"
    off = credentials(server_side_parameters={"spark.sql.ansi.enabled": "FALSE"})
    assert off.server_side_parameters["spark.sql.ansi.enabled"] == "false"


def test_ansi_mode_reaches_the_thrift_server_prefixed():
    creds = credentials(method="thrift", host="h", port=1, server_side_parameters={"spark.sql.ansi.enabled": "true"})
    assert creds.server_side_parameters == {"set:hiveconf:spark.sql.ansi.enabled": "true"}
    prefixed = credentials(method="thrift", host="h", port=1,
                           server_side_parameters={"set:hiveconf:spark.sql.ansi.enabled": "true"})
    assert prefixed.server_side_parameters == {"set:hiveconf:spark.sql.ansi.enabled": "true"}


def test_a_bad_ansi_mode_is_refused():
    with pytest.raises(DbtRuntimeError, match="spark.sql.ansi.enabled='yes'.*'true', 'false'"):
        credentials(server_side_parameters={"spark.sql.ansi.enabled": "yes"})


def test_plugin_is_a_spark_subclass():
    assert Plugin.dependencies == ["spark"]
    assert Plugin.adapter.type() == "spark_mv"
    assert Plugin.project_name == "dbt_spark_mv"


class FakeJavaException:
    def toString(self):
        return "org.apache.iceberg.exceptions.CommitFailedException: Cannot commit: stale metadata"


class FakePy4JError(Exception):
    java_exception = FakeJavaException()

    def __str__(self):
        return "An error occurred while calling o1.sql.\n: org.apache...\n\tat org.apache.iceberg.X(X.java:1)"


def test_java_errors_are_summarized_on_one_line():
    assert summarize_spark_error(FakePy4JError()) == FakeJavaException().toString()


def test_pyspark_errors_lose_their_jvm_stacktrace():
    error = Exception("[DIVIDE_BY_ZERO] Division by zero.\nJVM stacktrace:\norg.apache.spark...\n\tat x")
    assert summarize_spark_error(error) == "[DIVIDE_BY_ZERO] Division by zero."


def test_other_errors_are_left_alone():
    assert summarize_spark_error(ValueError("plain")) is None
    assert summarize_spark_error(None) is None


def test_fault_injection_counts_state_changes_only(monkeypatch):
    import pytest
    from dbt_common.exceptions import DbtRuntimeError

    from tests.faults import FaultInjection
    from dbt_incremental_mv.metadata import setting_statements
    from dbt_incremental_mv.refresh.phases.publish import cache_planning

    monkeypatch.setenv("DBT_INCREMENTAL_MV_FAULT_AFTER", "2")
    monkeypatch.setenv("DBT_INCREMENTAL_MV_FAULT_RUN", "unit-fault-1")
    for read in ("select 1", "describe table t", "show tables in s", "set spark.sql.catalog.spark_catalog"):
        FaultInjection.after(read)  # reads: not counted
    for setting in setting_statements(sum(cache_planning(), ())):
        FaultInjection.after(f"/* dbt */ {setting}\n")  # how a cache is planned: not counted either
    FaultInjection.after("set spark.wap.id=abc")  # the first state change
    with pytest.raises(DbtRuntimeError, match="injected fault after statement 2"):
        FaultInjection.after("call spark_catalog.system.fast_forward('s.t', 'main', 'b') [metadata commit]")


def test_a_running_statement_is_polled_soon_then_every_poll_interval():
    from itertools import islice

    from dbt_incremental_mv.adapter.connections import poll_waits

    assert list(islice(poll_waits(5), 10)) == [0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5, 5]
    assert list(islice(poll_waits(0), 2)) == [0, 0]


class FakeCursor:
    """A PyHive cursor whose statement is running for ``polls`` polls, then ends in ``final``."""

    def __init__(self, polls, final, error=None):
        self.polls, self.final, self.error, self.executed = polls, final, error, []

    def execute(self, sql, bindings, async_):
        assert async_
        self.executed.append(sql)

    def poll(self):
        from types import SimpleNamespace

        from dbt_incremental_mv.adapter.connections import ThriftState

        self.polls -= 1
        running = self.polls >= 0
        return SimpleNamespace(operationState=ThriftState.RUNNING_STATE if running else self.final,
                               errorMessage=None if running else self.error)


def thrift_wrapper(cursor, poll_interval=5):
    from dbt_incremental_mv.adapter.connections import ThriftConnectionWrapper

    wrapper = ThriftConnectionWrapper(handle=None, poll_interval=poll_interval)
    wrapper._cursor = cursor
    return wrapper


def test_the_thrift_wrapper_sees_a_finished_statement_within_doubling_waits(monkeypatch):
    from dbt_incremental_mv.adapter import connections

    slept = []
    monkeypatch.setattr(connections.time, "sleep", slept.append)
    cursor = FakeCursor(polls=4, final=connections.ThriftState.FINISHED_STATE)
    thrift_wrapper(cursor).execute("insert into t values (1);")
    assert cursor.executed == ["insert into t values (1)"]
    assert slept == [0.02, 0.04, 0.08, 0.16]  # dbt-spark's own: 5, 5, 5, 5


def test_the_thrift_wrapper_reports_a_failed_or_cancelled_statement(monkeypatch):
    from dbt_common.exceptions import DbtDatabaseError

    from dbt_incremental_mv.adapter import connections

    monkeypatch.setattr(connections.time, "sleep", lambda seconds: None)
    failed = FakeCursor(polls=1, final=connections.ThriftState.ERROR_STATE, error="Table not found: t")
    with pytest.raises(DbtDatabaseError, match="Table not found: t"):
        thrift_wrapper(failed).execute("select * from t")
    cancelled = FakeCursor(polls=0, final=connections.ThriftState.CANCELED_STATE)
    with pytest.raises(DbtDatabaseError, match="CANCELED_STATE"):
        thrift_wrapper(cancelled).execute("select 1")
