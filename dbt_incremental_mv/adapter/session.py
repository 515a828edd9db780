"""One Spark session per dbt connection in embedded (``method: session``) mode.

dbt-spark's session method runs every dbt thread on the process's single SparkSession, so
a ``SET`` in one thread (the refresh sets ``spark.wap.id`` to stage its commit) would leak
into statements of other threads. Here each dbt connection gets its own
``SparkSession.newSession()``: same JVM, SparkContext and catalogs, separate SQL
configuration and temporary views.

dbt closes a connection after every model and opens another for the next, so the sessions are
pooled (``SessionPool``): a closed connection's session, its settings, temporary views and
current namespace put back as they were, serves the next connection. A new session per model
cost the catalogs' setup every time and was never freed: a Spark thread started while a session
was active (the broadcast-exchange pool keeps up to 128) holds it as its inherited active session,
so a long-lived process (a test suite, an orchestrator calling dbt) accumulated sessions.

While a refresh records its reads (``IsolatedSessionConnection.recording``), each statement runs
under a job group of its own and, once executed, what it read is appended (scan_metrics.py).
"""

from __future__ import annotations

import datetime
import decimal
import math
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from dbt.adapters.spark.session import Cursor, SessionConnectionWrapper
from dbt_common.exceptions import DbtRuntimeError

from dbt_incremental_mv.reads import StatementReads
from dbt_incremental_mv.runtime.jvm_calls import to_python
from dbt_incremental_mv.sql_text import string


class IsolatedCursor(Cursor):
    def __init__(self, session: Any, connection: IsolatedSessionConnection | None = None) -> None:
        super().__init__()
        self._session = session
        self._connection = connection
        # (job group, newest SQL execution before it, sql) of a statement to measure once it ran
        self._pending: tuple[str, int, str] | None = None

    def execute(self, sql: str, *parameters: Any) -> None:
        from pyspark.sql.utils import AnalysisException

        if parameters:
            sql = sql % parameters
        self._pending = None
        group = self._job_group(sql)
        before = self._latest_execution() if group is not None else -1
        try:
            with self._jobs_in(group):
                self._df = self._session.sql(sql)
        except AnalysisException as exc:
            raise DbtRuntimeError(str(exc)) from exc
        if group is not None:
            self._pending = (group, before, sql)
            if self._is_command():  # run as it was submitted: measure it now
                self._measure()

    def fetchall(self):  # noqa: ANN201 - dbt-spark's signature
        with self._jobs_in(self._pending[0] if self._pending else None):
            rows = super().fetchall()
        self._measure()
        return rows

    def fetchone(self):  # noqa: ANN201
        with self._jobs_in(self._pending[0] if self._pending else None):
            row = super().fetchone()
        self._measure()
        return row

    def _job_group(self, sql: str) -> str | None:
        """A job group of its own for a statement whose reads are recorded, else None."""
        if self._connection is None or self._connection.recording is None:
            return None
        from dbt_incremental_mv.adapter import scan_metrics

        return scan_metrics.new_job_group()

    @contextmanager
    def _jobs_in(self, group: str | None) -> Iterator[None]:
        """Run the Spark jobs started meanwhile under ``group`` (their input bytes are counted)."""
        if group is None:
            yield
            return
        context = self._session.sparkContext
        context.setJobGroup(group, group, False)
        try:
            yield
        finally:
            context._jsc.clearJobGroup()

    def _latest_execution(self) -> int:
        from dbt_incremental_mv.adapter import scan_metrics

        return scan_metrics.latest_execution(self._session)

    def _is_command(self) -> bool:
        if self._df is None:  # no statement ran
            return False
        try:
            return self._df._jdf.logicalPlan().getClass().getSimpleName() == "CommandResult"
        except Exception:  # noqa: BLE001 - unknown: measured when fetched
            return False

    def _measure(self) -> None:
        """Record what the pending statement read (a command runs when submitted, a query when
        fetched; one never fetched read nothing)."""
        pending, self._pending = self._pending, None
        connection = self._connection
        if pending is None or self._df is None or connection is None or connection.recording is None:
            return
        from dbt_incremental_mv.adapter import scan_metrics

        group, before, sql = pending
        reads = scan_metrics.statement_reads(self._session, before, group, sql)
        if reads is not None:
            connection.recording.append(reads)


class IsolatedSessionConnection:
    """The handle behind dbt-spark's SessionConnectionWrapper, bound to one Spark session."""

    def __init__(
        self,
        session: Any,
        initial_namespace: tuple[str, str] = ("spark_catalog", "default"),
        initial_settings: Mapping[str, str] | None = None,
    ) -> None:
        self.session = session
        self.initial_namespace = initial_namespace  # (catalog, namespace) the session started in
        # the settings the session started with (what RESET restores); None: not known, RESET
        self.initial_settings = initial_settings
        # the reads of the statements run while a refresh records them (None: not recording)
        self.recording: list[StatementReads] | None = None

    def cursor(self) -> IsolatedCursor:
        return IsolatedCursor(self.session, self)

    def start_recording(self) -> None:
        self.recording = []

    def stop_recording(self) -> list[StatementReads]:
        recorded, self.recording = self.recording or [], None
        return recorded


class SessionPool:
    """Isolated sessions of one root session, one per connection open at a time: ``acquire``
    hands out a free one (or a new one), ``give_back`` restores it and keeps it for the next."""

    def __init__(self) -> None:
        # (session, its initial catalog and namespace, its initial settings)
        self._free: list[tuple[Any, tuple[str, str], Mapping[str, str] | None]] = []
        self._lock = threading.Lock()
        self.created = 0

    def acquire(self, root: Any, settings: Mapping[str, str] | None = None) -> IsolatedSessionConnection:
        """A session of ``root`` with the profile's runtime SQL ``settings`` (its ``spark.sql.*``
        keys Spark lets a session change, ANSI mode among them): the JVM keeps the settings it
        started with, so a later profile in the same process (dbt invoked again, a test suite)
        would otherwise run on the first one's."""
        connection = self._free_or_new(root)
        for key, value in (settings or {}).items():
            if key.startswith("spark.sql.") and connection.session.conf.isModifiable(key):
                connection.session.conf.set(key, value)
        return connection

    def _free_or_new(self, root: Any) -> IsolatedSessionConnection:
        with self._lock:
            while self._free:
                session, namespace, settings = self._free.pop()
                if session.sparkContext is root.sparkContext:  # else: from a stopped context
                    return IsolatedSessionConnection(session, namespace, settings)
            self.created += 1
        session = root.newSession()
        return IsolatedSessionConnection(
            session, (session.catalog.currentCatalog(), session.catalog.currentDatabase()), settings_of(session)
        )

    def give_back(self, connection: IsolatedSessionConnection) -> None:
        """Take back ``connection``'s session (once) with what a model may have changed undone:
        the runtime settings (as the session started: what ``RESET`` does, by setting back only
        those that differ), temporary views, the current catalog and namespace. A session that
        cannot be restored is dropped."""
        session, connection.session = connection.session, None
        if session is None:
            return
        try:
            restore_settings(session, connection.initial_settings)
            session._jsparkSession.sessionState().catalog().clearTempTables()
            catalog, namespace = connection.initial_namespace
            if session.catalog.currentCatalog() != catalog:
                session.catalog.setCurrentCatalog(catalog)
            if session.catalog.currentDatabase() != namespace:
                session.catalog.setCurrentDatabase(namespace)
        except Exception:  # noqa: BLE001 - not reusable: the next connection gets a new session
            return
        with self._lock:
            self._free.append((session, connection.initial_namespace, connection.initial_settings))


def settings_of(session: Any) -> dict[str, str] | None:
    """The settings ``session`` holds (its SQL configuration's explicit entries: the Spark
    configuration it started from, then every ``SET``), read in one JVM call; None if unreadable."""
    try:
        return {
            str(k): str(v)
            for k, v in to_python(session, session._jsparkSession.sessionState().conf().getAllConfs()).items()
        }
    except Exception:  # noqa: BLE001 - restored by RESET instead
        return None


def restore_settings(session: Any, initial: Mapping[str, str] | None) -> None:
    """Put ``session``'s settings back to ``initial``: the keys whose values differ are set back
    or unset, as ``RESET`` would leave them (a ``RESET`` statement costs ~30 ms of parsing and
    running a command on every connection dbt closes; reading the settings ~2 ms). Without the
    initial settings, or if they cannot be read now: ``RESET``."""
    current = settings_of(session) if initial is not None else None
    if initial is None or current is None:
        session.sql("RESET").collect()
        return
    for key in sorted(set(current) | set(initial)):
        if current.get(key) == initial.get(key):
            continue
        if key in initial:
            session.conf.set(key, initial[key])
        else:
            session.conf.unset(key)


SESSIONS = SessionPool()


class BoundSessionConnectionWrapper(SessionConnectionWrapper):
    """dbt-spark's session wrapper with its bound values (``dbt seed``'s rows) rendered as Spark
    literals: dbt-spark 1.11 renders a NULL as the string ``'None'`` (a cast of it fails with ANSI
    on), numbers through a float (a bigint above 2**53 loses digits) and strings unescaped (a quote
    breaks the statement)."""

    @classmethod
    def _fix_binding(cls, value: Any) -> str:  # dbt-spark's name
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, decimal.Decimal) and value.is_finite():
            return format(value, "f")  # a decimal literal: cast to the column's type as dbt-spark's float was
        if isinstance(value, float) and math.isfinite(value):
            return repr(value)
        if isinstance(value, (float, decimal.Decimal)):
            return string(str(float(value)))  # 'nan', 'inf': cast to a floating type as Spark spells them
        if isinstance(value, datetime.datetime):
            return string(value.isoformat(sep=" "))
        if isinstance(value, datetime.date):
            return string(value.isoformat())
        return string(str(value))
