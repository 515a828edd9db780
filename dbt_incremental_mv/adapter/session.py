"""One Spark session per dbt connection in embedded (``method: session``) mode.

dbt-spark's session method runs every dbt thread on the process's single SparkSession, so
a ``SET`` in one thread (the refresh sets ``spark.wap.id`` to stage its commit) would leak
into statements of other threads. Here each dbt connection gets its own
``SparkSession.newSession()``: same JVM, SparkContext and catalogs, separate SQL
configuration and temporary views.
"""

from __future__ import annotations

from typing import Any

from dbt.adapters.spark.session import Cursor
from dbt_common.exceptions import DbtRuntimeError


class IsolatedCursor(Cursor):
    def __init__(self, session: Any) -> None:
        super().__init__()
        self._session = session

    def execute(self, sql: str, *parameters: Any) -> None:
        from pyspark.sql.utils import AnalysisException

        if parameters:
            sql = sql % parameters
        try:
            self._df = self._session.sql(sql)
        except AnalysisException as exc:
            raise DbtRuntimeError(str(exc)) from exc


class IsolatedSessionConnection:
    """The handle behind dbt-spark's SessionConnectionWrapper, bound to one Spark session."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def cursor(self) -> IsolatedCursor:
        return IsolatedCursor(self.session)
