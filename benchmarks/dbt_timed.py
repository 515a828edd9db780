"""Run dbt with the plugin's refresh phases and SQL statements timed.

    BENCH_PHASE_LOG=phases.jsonl python benchmarks/dbt_timed.py run --project-dir ...

Same as the ``dbt`` command, but first wraps, with timers, the plugin entry points the
``fast_refresh`` materialization calls (``adapter.fast_refresh_plan``, ``_mark``, ``_publish``,
``_finish``), the capture and purge steps inside them, and every SQL statement the adapter runs
(the plugin's reads and writes, and the materialization's statements). Each call appends one JSON
line to ``BENCH_PHASE_LOG``: ``{"kind": "phase"|"sql", "name", "start", "end", "thread"}``
(epoch seconds; ``thread`` is dbt's worker thread, which its JSON log names per model).

Why not the JSON log alone: in session mode the plugin reads and moves Iceberg metadata through
Iceberg's Java API (no SQL, so nothing in dbt's log), and a SELECT is lazy (dbt logs its status
before the rows are fetched). Timers around the calls see both.

A hook whose target does not exist (the plugin changed) is skipped; ``dbt_runs.py`` then falls
back to the statements of the JSON log for the phases it cannot see.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
import threading
import time

# (module, attribute path, phase or "sql")
HOOKS = (
    ("dbt_incremental_mv.adapter.impl", "SparkMVAdapter.fast_refresh_plan", "plan"),
    ("dbt_incremental_mv.adapter.impl", "SparkMVAdapter.fast_refresh_mark", "mark"),  # holds capture
    ("dbt_incremental_mv.refresh.phases.capture", "capture", "capture"),
    ("dbt_incremental_mv.adapter.impl", "SparkMVAdapter.fast_refresh_publish", "publish"),
    ("dbt_incremental_mv.adapter.impl", "SparkMVAdapter.fast_refresh_finish", "finish"),  # holds purge
    ("dbt_incremental_mv.refresh.engine", "FastRefreshEngine.purge", "purge"),
    ("dbt_incremental_mv.adapter.impl", "SparkMVAdapter._query", "sql"),
    ("dbt_incremental_mv.adapter.impl", "SparkMVAdapter._run", "sql"),
    ("dbt_incremental_mv.adapter.impl", "SparkMVAdapter.execute", "sql"),
)


class EventLog:
    def __init__(self, path: str) -> None:
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - open for the process's life
        self._lock = threading.Lock()

    def write(self, event: dict) -> None:
        line = json.dumps(event)
        with self._lock:
            self._file.write(line + "\n")


def _timed(function, kind: str, log: EventLog):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        start = time.time()
        try:
            return function(*args, **kwargs)
        finally:
            event = {"kind": "sql" if kind == "sql" else "phase", "name": kind, "start": start, "end": time.time(),
                     "thread": threading.current_thread().name}
            if kind == "sql":
                sql = kwargs.get("sql", args[1] if len(args) > 1 else "")
                event["sql"] = str(sql)
            log.write(event)

    return wrapper


def _reads_reported(function, log: EventLog):
    """Wrap ``fast_refresh_finish``: after it, log what the refresh's statements read
    (``plan.reads``, session mode): one ``reads`` event per model."""
    @functools.wraps(function)
    def wrapper(self, refresh, *args, **kwargs):
        try:
            return function(self, refresh, *args, **kwargs)
        finally:
            run = refresh.run  # the adapter's ModelRefresh: the engine's run holds what was read
            reads = getattr(run, "reads", None)
            if reads is not None:
                log.write({
                    "kind": "reads", "name": "reads", "start": time.time(), "end": time.time(),
                    "thread": threading.current_thread().name, "view": run.plan.view_relation,
                    "statements": [
                        {"statement": s.statement, "input_bytes": s.input_bytes,
                         "scans": [{"table": t.table, "files": t.files, "skipped_files": t.skipped_files,
                                    "bytes": t.bytes, "rows": t.rows} for t in s.scans]}
                        for s in reads.statements
                    ],
                })

    return wrapper


def install(log: EventLog) -> list[str]:
    """Wrap every hook that exists; returns the ones that do not."""
    missing = []
    try:  # first, so that the timer wraps it
        from dbt_incremental_mv.adapter import impl

        impl.SparkMVAdapter.fast_refresh_finish = _reads_reported(impl.SparkMVAdapter.fast_refresh_finish, log)
    except (ImportError, AttributeError):
        missing.append("dbt_incremental_mv.adapter.impl.SparkMVAdapter.fast_refresh_finish (reads)")
    for module_name, path, kind in HOOKS:
        try:
            owner = importlib.import_module(module_name)
            *parents, attribute = path.split(".")
            for parent in parents:
                owner = getattr(owner, parent)
            setattr(owner, attribute, _timed(getattr(owner, attribute), kind, log))
        except (ImportError, AttributeError):
            missing.append(f"{module_name}.{path}")
    return missing


def main() -> None:
    log = EventLog(os.environ["BENCH_PHASE_LOG"])
    for hook in install(log):
        log.write({"kind": "missing", "name": hook})
    from dbt.cli.main import cli

    sys.argv = ["dbt", *sys.argv[1:]]
    cli()


if __name__ == "__main__":
    main()
