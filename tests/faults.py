"""The tests' fault injection: a refresh failed, killed or paused right after one of its
statements, through the adapter's statement listeners (SparkMVConnectionManager.statement_ran:
every statement the connection runs, every commit through Iceberg's Java API). ``install()``
registers it (tests/conftest.py does, for the tests' own process; a dbt subprocess is started
through ``python -m tests.dbt_with_faults``). Production code reads none of these variables."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from dbt_common.exceptions import DbtRuntimeError

from dbt_incremental_mv.adapter.connections import SparkMVConnectionManager
from dbt_incremental_mv.metadata import setting_statements
from dbt_incremental_mv.refresh.phases.publish import cache_planning

CACHE_PLANNING_STATEMENTS = frozenset(setting_statements(sum(cache_planning(), ())))


class FaultInjection:
    """ fail a run right after its n-th state-changing statement.

    Set ``DBT_INCREMENTAL_MV_FAULT_AFTER=<n>`` (and a fresh ``DBT_INCREMENTAL_MV_FAULT_RUN``
    token per run) to raise after the n-th statement that is not a plain read (SELECT,
    DESCRIBE, SHOW, ``SET key``, the settings a CACHE TABLE is planned under), or ``DBT_INCREMENTAL_MV_FAULT_AT=<text>`` to raise after the first
    statement containing ``text``. ``on_fault`` may be set to a callable run at that point instead of
    raising (e.g. a concurrent writer); with ``DBT_INCREMENTAL_MV_FAULT_KILL=1`` the process exits
    at once instead (status 137, as if killed); with ``DBT_INCREMENTAL_MV_FAULT_PAUSE=<file>`` it
    creates ``<file>.reached``, waits there until ``<file>`` exists (another process refreshes
    meanwhile; at most 10 minutes) and goes on. Off unless the variable is set.
    """

    on_fault: Any = None
    _count = 0
    _done = False
    _token: str | None = None
    _lock = threading.Lock()

    @classmethod
    def after(cls, sql: str) -> None:
        limit = os.environ.get("DBT_INCREMENTAL_MV_FAULT_AFTER")
        prefix = os.environ.get("DBT_INCREMENTAL_MV_FAULT_AT")
        if not limit and not prefix:
            return
        statement = sql.lstrip()
        while statement.startswith("/*"):  # dbt's query comment
            statement = statement.split("*/", 1)[-1].lstrip()
        if statement[:8].lower().startswith(("select", "describe", "show", "with")):
            return
        if statement[:4].lower() == "set " and "=" not in statement:  # reading a setting
            return
        if statement.rstrip() in CACHE_PLANNING_STATEMENTS:  # how a cache is planned: no state
            return
        with cls._lock:
            token = os.environ.get("DBT_INCREMENTAL_MV_FAULT_RUN")
            if token != cls._token:
                cls._token, cls._count, cls._done = token, 0, False
            cls._count += 1
            if prefix:
                hit = not cls._done and prefix.lower() in statement.lower()
            else:
                assert limit is not None  # the early return above: one of the two variables is set
                hit = cls._count == int(limit)
            cls._done = cls._done or hit
        if hit:
            if os.environ.get("DBT_INCREMENTAL_MV_FAULT_KILL"):
                os._exit(137)  # die like a killed process: no cleanup, no exception handlers
            if os.environ.get("DBT_INCREMENTAL_MV_FAULT_PAUSE"):
                resume = os.environ["DBT_INCREMENTAL_MV_FAULT_PAUSE"]
                open(f"{resume}.reached", "w").close()
                deadline = time.monotonic() + 600
                while not os.path.exists(resume) and time.monotonic() < deadline:
                    time.sleep(0.2)
                return
            if cls.on_fault is not None:
                cls.on_fault()
            else:
                raise DbtRuntimeError(f"injected fault after statement {limit}: {statement[:80]}")


def install() -> None:
    """Listen to every statement of this process (idempotent)."""
    if FaultInjection.after not in SparkMVConnectionManager.statement_listeners:
        SparkMVConnectionManager.statement_listeners.append(FaultInjection.after)
