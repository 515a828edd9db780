"""Credentials and connection manager of the ``spark_mv`` profile type.

dbt-spark's connection methods pass through unchanged; ``session`` and ``thrift`` are the ones the
test suite runs (TESTED_METHODS). For ``method: session`` the plugin first starts the embedded
Spark session with Iceberg (see :mod:`dbt_incremental_mv.runtime.embedded`), then dbt-spark's
session wrapper uses it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

from dbt.adapters.contracts.connection import Connection, ConnectionState
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.exceptions import FailedToConnectError
from dbt.adapters.spark.connections import (
    PyhiveConnectionWrapper,
    SparkConnectionManager,
    SparkConnectionMethod,
    SparkCredentials,
    ThriftState,
)
from dbt_common.exceptions import DbtDatabaseError, DbtRuntimeError

from dbt_incremental_mv.config import ConfigKey
from dbt_incremental_mv.conflicts import concurrent_commit_error
from dbt_incremental_mv.process_state import PROCESS
from dbt_incremental_mv.runtime.embedded import ICEBERG_JARS_MODES, JIT_MODES, start_session
from dbt_incremental_mv.runtime.iceberg_runtime import IcebergRuntimeError

logger = AdapterLogger("spark_mv")


ANSI_MODE = "spark.sql.ansi.enabled"

TESTED_METHODS = ("session", "thrift")
"""The connection methods the test suite runs; dbt-spark's others (http, odbc) are passed through
untested."""

PROFILE_KEYS = (
    ConfigKey(
        "type",
        "`spark_mv`",
        "required",
        "The plugin's profile type: dbt-spark's `spark` with the `fast_refresh` materialization added.",
    ),
    ConfigKey(
        "method",
        "`session`, `thrift` (dbt-spark's `http`, `odbc` pass through, untested)",
        "required",
        "`session`: an embedded Spark session in the dbt process, with a local Iceberg warehouse; `thrift`: a "
        "Spark Thrift Server (`host`, `port`, as in dbt-spark).",
    ),
    ConfigKey(
        "warehouse",
        "a directory",
        "`warehouse` (relative to where dbt runs)",
        "`method: session`: the local Iceberg warehouse of `spark_catalog`.",
    ),
    ConfigKey(
        "iceberg_jars",
        ", ".join(f"`{mode}`" for mode in ICEBERG_JARS_MODES),
        "`auto`",
        "`method: session`: how Spark gets the Iceberg runtime. `auto`: the one `spark.jars` or "
        "`spark.jars.packages` names, else the installed Spark's (bundled offline on Spark 3.5, downloaded "
        "once on Spark 4); `bundled`: always the offline one (Spark 3.5); `packages`: Spark's resolver "
        "downloads it; `none`: your Spark ships it.",
    ),
    ConfigKey(
        "jit",
        ", ".join(f"`{mode}`" for mode in JIT_MODES),
        "`auto`",
        "`method: session`: how the JVM compiles. `quick`: the C1 compiler only (short commands on small "
        "tables finish sooner); `peak`: the JVM's default (fastest on large tables once warm); `auto`: "
        "`quick` for a dbt command on a small local warehouse, else `peak`.",
    ),
    ConfigKey(
        "server_side_parameters",
        "a map of Spark settings",
        "the plugin's defaults",
        "Any Spark setting (a catalog, driver memory, `spark.sql.ansi.enabled`); yours win over the plugin's defaults.",
    ),
)
"""The profile keys this plugin adds or gives a meaning (dbt-spark's others, e.g. ``host``, ``port``,
``schema``, ``threads``, are dbt-spark's); docs/reference.md is generated from this."""


def _explicit_ansi_mode(parameters: Mapping[str, Any]) -> str | None:
    """The profile's own ANSI setting ("true"/"false"), or None when it sets none. dbt-spark 1.11
    turns ANSI off on every connection; a profile that names the setting keeps what it says."""
    value = next((v for k, v in parameters.items() if str(k).removeprefix("set:hiveconf:") == ANSI_MODE), None)
    if value is None:
        return None
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise DbtRuntimeError(
            f"Profile: server_side_parameters {ANSI_MODE}={value!r} is not supported. Allowed: 'true', 'false'."
        )
    return text


@dataclass
class SparkMVCredentials(SparkCredentials):
    # Embedded session only (method: session): the local Iceberg warehouse directory
    # (relative paths are relative to the directory dbt runs in), how Spark gets Iceberg, and
    # how its JVM compiles (auto / quick / peak: see embedded.JIT_MODES).
    warehouse: str | None = None
    iceberg_jars: str = "auto"
    jit: str = "auto"

    @property
    def type(self) -> str:
        return "spark_mv"

    def __post_init__(self) -> None:
        if self.method == SparkConnectionMethod.SESSION and self.host is None:
            self.host = "localhost"  # dbt-spark requires a host even for an in-process session
        if self.iceberg_jars not in ICEBERG_JARS_MODES:
            allowed = ", ".join(f"'{m}'" for m in ICEBERG_JARS_MODES)
            raise DbtRuntimeError(f"Profile: iceberg_jars={self.iceberg_jars!r} is not supported. Allowed: {allowed}.")
        if self.jit not in JIT_MODES:
            allowed = ", ".join(f"'{m}'" for m in JIT_MODES)
            raise DbtRuntimeError(f"Profile: jit={self.jit!r} is not supported. Allowed: {allowed}.")
        ansi = _explicit_ansi_mode(self.server_side_parameters)
        super().__post_init__()  # sets spark.sql.ansi.enabled=false whatever the profile says
        if ansi is not None:  # the profile's own setting wins: Spark 4's default is ANSI on
            self.server_side_parameters[ANSI_MODE] = ansi
        if self.method in (SparkConnectionMethod.THRIFT, SparkConnectionMethod.HTTP):
            # The Spark Thrift Server applies a session configuration entry only when its key is
            # prefixed ``set:hiveconf:``; unprefixed keys (dbt-spark's own ``spark.sql.ansi.enabled``
            # included) would be silently ignored.
            self.server_side_parameters = {
                (key if key.startswith("set:") else f"set:hiveconf:{key}"): value
                for key, value in self.server_side_parameters.items()
            }

    def _connection_keys(self) -> tuple[str, ...]:
        keys = super()._connection_keys()
        if self.method == SparkConnectionMethod.SESSION:
            keys += ("warehouse", "iceberg_jars", "jit")
        return keys


def summarize_spark_error(exc: BaseException | None) -> str | None:
    """One readable line for a JVM error instead of its stack trace (None: keep the message)."""
    java_exception = getattr(exc, "java_exception", None)
    if java_exception is not None:  # py4j.protocol.Py4JJavaError: not converted by PySpark
        try:
            return str(java_exception.toString())
        except Exception:  # the JVM may be gone
            return None
    text = str(exc) if exc is not None else ""
    if "\nJVM stacktrace:" in text:
        return text.split("\nJVM stacktrace:", 1)[0]
    return None


FIRST_POLL_WAIT = 0.02
"""Seconds slept after the first poll that finds a statement still running; each later sleep
doubles, up to the profile's ``poll_interval``."""


def poll_waits(poll_interval: float) -> Iterator[float]:
    """The waits between polls of a running statement: 0.02 s, 0.04 s, ... doubling up to
    ``poll_interval``, then ``poll_interval`` on."""
    wait = min(FIRST_POLL_WAIT, poll_interval)
    while True:
        yield wait
        wait = min(wait * 2, poll_interval)


class ThriftConnectionWrapper(PyhiveConnectionWrapper):
    """dbt-spark's PyHive wrapper, fixed for statements that return no rows, and polling a
    running statement soon.

    Over the Spark Thrift Server a DDL or DML statement reports a one-column result set
    (``Result``) whose fetch carries no columns at all, and PyHive 0.7 then fails in
    ``_fetch_more`` with ``'NoneType' object is not iterable`` (apache/kyuubi#7106): dbt's
    ``run_query`` of any DDL/DML broke. Such a statement has no rows: return none.

    dbt-spark runs each statement asynchronously and polls it, sleeping ``poll_interval`` seconds
    (default 5) between polls. The Spark Thrift Server holds a poll until the statement ends or 5 s
    pass (HiveServer2's long polling, ``hive.server2.long.polling.timeout``): a statement under 5 s
    is seen when it ends (the thrift tests: 1,691 statements, not one sleep), a longer one up to
    ``poll_interval`` after it ended. Here the sleeps are 0.02 s, 0.04 s, ... doubling up to
    ``poll_interval``: a statement under half a minute is seen within about a second of its end (a
    longer one, as before, within ``poll_interval``). Measured on a local Thrift Server, a 7 s
    statement with ``poll_interval`` 5: 10.1 s through dbt-spark's wrapper, 7.1 s through this one.
    """

    # dbt-spark 1.11's ``_execute_with_polling`` (pinned ~=1.11.0), but for the sleeps: it has no
    # hook for them. Compare with it when dbt-spark is upgraded.

    def _execute_with_polling(self, sql: str, bindings: list[Any] | None) -> None:
        if sql.strip().endswith(";"):
            sql = sql.strip()[:-1]
        if bindings is not None:
            bindings = [self._fix_binding(binding) for binding in bindings]
        assert self._cursor, "Cursor not available"
        pending = (ThriftState.INITIALIZED_STATE, ThriftState.RUNNING_STATE, ThriftState.PENDING_STATE)
        self._cursor.execute(sql, bindings, async_=True)
        poll_state = self._cursor.poll()
        started, waits = time.time(), poll_waits(self.poll_interval)
        while poll_state.operationState in pending:
            if self.query_timeout is not None and time.time() - started > self.query_timeout:
                raise DbtRuntimeError(f"Query exceeded timeout of {self.query_timeout} seconds")
            time.sleep(next(waits))
            poll_state = self._cursor.poll()  # a lost connection is retried by execute()
        if poll_state.errorMessage:
            logger.debug(f"Poll response: {poll_state}")
            raise DbtDatabaseError(poll_state.errorMessage)
        if poll_state.operationState != ThriftState.FINISHED_STATE:
            status = ThriftState._VALUES_TO_NAMES.get(
                poll_state.operationState, f"Unknown<{poll_state.operationState!r}>"
            )
            raise DbtDatabaseError(f"Query failed with status: {status}")

    def fetchall(self) -> list[Any]:
        assert self._cursor, "Cursor not available"
        try:
            return self._cursor.fetchall()
        except TypeError as exc:
            if "'NoneType' object is not iterable" not in str(exc) or getattr(self._cursor, "_data", None):
                raise
            return []


class SparkMVConnectionManager(SparkConnectionManager):
    TYPE = "spark_mv"

    # told of each statement this process ran, once it ran (its SQL), and of each change made
    # without one (the metadata seam's on_change: a commit through Iceberg's Java API, a setting
    # made through the session, as the SET it stands for): none unless one is registered (the
    # tests' fault injection is)
    statement_listeners: ClassVar[list[Callable[[str], None]]] = []

    @classmethod
    def statement_ran(cls, sql: str) -> None:
        for listener in tuple(cls.statement_listeners):
            listener(sql)

    def add_query(self, sql: str, *args: Any, **kwargs: Any):
        result = super().add_query(sql, *args, **kwargs)
        self.statement_ran(sql)
        return result

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        creds = connection.credentials
        if connection.state == ConnectionState.OPEN:
            return connection
        if creds.method != SparkConnectionMethod.SESSION:
            connection = super().open(connection)
            if type(connection.handle) is PyhiveConnectionWrapper:
                connection.handle.__class__ = ThriftConnectionWrapper
            return connection
        with PROCESS.session_start:  # dbt threads open connections concurrently; one JVM per process
            try:
                root = start_session(
                    warehouse=creds.warehouse,
                    iceberg_jars=creds.iceberg_jars,
                    user_params=creds.server_side_parameters,
                    jit=creds.jit,
                )
            except IcebergRuntimeError as exc:
                raise FailedToConnectError(f"Cannot start the embedded Spark session: {exc}") from exc
        from dbt_incremental_mv.adapter.session import SESSIONS, BoundSessionConnectionWrapper  # imports pyspark

        isolated = SESSIONS.acquire(root, creds.server_side_parameters)
        connection.handle = BoundSessionConnectionWrapper(isolated)  # type: ignore[arg-type]  # duck-types dbt-spark's Connection
        connection.state = ConnectionState.OPEN
        return connection

    @classmethod
    def close(cls, connection: Connection) -> Connection:
        """dbt closes a connection after each model: its embedded session goes back to the pool."""
        handle = connection.handle
        closed = super().close(connection)
        isolated = getattr(handle, "handle", None)
        if (
            connection.credentials.method == SparkConnectionMethod.SESSION
            and isolated is not None
            and hasattr(isolated, "initial_namespace")
        ):
            from dbt_incremental_mv.adapter.session import SESSIONS

            SESSIONS.give_back(isolated)
        return closed

    @contextmanager
    def exception_handler(self, sql: str) -> Iterator[None]:
        try:
            with super().exception_handler(sql):
                yield
        except DbtRuntimeError as exc:
            short = summarize_spark_error(exc.__context__)
            conflict = concurrent_commit_error(short or str(exc))
            if conflict is not None:  # a concurrent commit won: say so in one line, whatever the method
                raise DbtRuntimeError(conflict) from exc.__context__
            if short is None:
                raise
            raise DbtRuntimeError(short) from exc.__context__
