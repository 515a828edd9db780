"""Session mode: what a statement read (see reads.py), from Spark's own records of it.

Every statement the cursor measures runs its Spark jobs under a job group of its own. Once it
ran, the SQL executions newer than the one before it whose jobs are in that group are read from
Spark's SQL status store (what the Spark UI shows, kept whether or not the UI runs):

- Iceberg's scan metrics of each ``BatchScan`` node of their plans (data files read and skipped,
  their bytes, rows returned): the final plan of adaptive queries, subqueries, and the plans of
  the executions a command runs inside (a ``CREATE TABLE AS``'s query, a ``CACHE TABLE``'s);
- the input bytes of those jobs' stages: what their tasks read from storage.

Only calls on objects the session already holds; anything unexpected (another Spark version, a
plan node of an unknown shape) makes the reads unknown, never the statement fail.
"""

from __future__ import annotations

import itertools
from typing import Any

from dbt_incremental_mv.reads import StatementReads, TableScan

_group_counter = itertools.count(1)
JOB_GROUP_PREFIX = "dbt-incremental-mv-statement-"
SCAN_NODE = "BatchScan "
DEFAULT_CATALOG = "spark_catalog."
# Iceberg's scan metrics, as the SQL status store names them
FILES, SKIPPED, BYTES, ROWS, DELETE_FILES = (
    "number of result data files", "number of skipped data files", "total data file size (bytes)",
    "number of output rows", "number of result delete files",
)
RECENT = 64  # executions looked at per round when finding those of one statement


def new_job_group() -> str:
    return f"{JOB_GROUP_PREFIX}{next(_group_counter)}"


def label(sql: str) -> str:
    """The statement's first words, without dbt's query comment."""
    text = sql.lstrip()
    while text.startswith("/*"):
        text = text.split("*/", 1)[-1].lstrip()
    return " ".join(text.split())[:120]


def _list(java_list: Any) -> list[Any]:
    out = []
    iterator = java_list.iterator()
    while iterator.hasNext():
        out.append(iterator.next())
    return out


def _number(text: Any) -> int:
    """A metric value as the status store formats it (``187,500``, ``1765704``)."""
    try:
        return int(str(text).replace(",", "").split()[0])
    except (ValueError, IndexError):
        return 0


def latest_execution(session: Any) -> int:
    """The id of the newest SQL execution recorded so far (-1: none)."""
    try:
        store = session._jsparkSession.sharedState().statusStore()
        count = int(store.executionsCount())
        if not count:
            return -1
        newest = _list(store.executionsList(count - 1, 1))
        return int(newest[0].executionId()) if newest else -1
    except Exception:  # noqa: BLE001
        return -1


def table_name(node_name: str) -> str:
    """``BatchScan spark_catalog.db.t`` -> ``db.t``."""
    name = node_name[len(SCAN_NODE):].strip() if node_name.startswith(SCAN_NODE) else node_name
    name = name.split(" ", 1)[0]
    return name[len(DEFAULT_CATALOG):] if name.startswith(DEFAULT_CATALOG) else name


def _scans(store: Any, execution_id: int) -> list[TableScan]:
    graph, values = store.planGraph(execution_id), store.executionMetrics(execution_id)
    scans = []
    for node in _list(graph.allNodes()):
        name = str(node.name())
        if not name.startswith(SCAN_NODE):
            continue
        metrics = {}
        for metric in _list(node.metrics()):
            value = values.get(metric.accumulatorId())
            if value.isDefined():
                metrics[str(metric.name())] = _number(value.get())
        if FILES not in metrics:
            continue  # not an Iceberg scan
        scans.append(TableScan(
            table=table_name(name), files=metrics[FILES], skipped_files=metrics.get(SKIPPED, 0),
            bytes=metrics.get(BYTES, 0), rows=metrics.get(ROWS, 0), delete_files=metrics.get(DELETE_FILES, 0),
        ))
    return scans


def statement_reads(session: Any, after_execution: int, job_group: str, sql: str) -> StatementReads | None:
    """What a statement read: the executions newer than ``after_execution`` whose jobs ran under
    ``job_group`` (None: not measurable)."""
    try:
        sc = session.sparkContext._jsc.sc()
        sc.listenerBus().waitUntilEmpty()
        jobs = {int(j) for j in sc.statusTracker().getJobIdsForGroup(job_group)}
        if not jobs:
            return StatementReads(label(sql), (), 0)
        store = session._jsparkSession.sharedState().statusStore()
        count = int(store.executionsCount())
        scans: list[TableScan] = []
        offset = count
        while offset > 0:
            start = max(0, offset - RECENT)
            executions = _list(store.executionsList(start, offset - start))
            for execution in executions:
                if int(execution.executionId()) <= after_execution:
                    continue
                ran = {int(j) for j in _list(execution.jobs().keys())}
                if ran & jobs:
                    scans += _scans(store, execution.executionId())
            if not executions or int(executions[0].executionId()) <= after_execution:
                break
            offset = start
        app = sc.statusStore()
        read = 0
        for job in jobs:
            info = sc.statusTracker().getJobInfo(job)
            if info.isEmpty():
                continue
            for stage in info.get().stageIds():
                try:
                    read += int(app.lastStageAttempt(stage).inputBytes())
                except Exception:  # noqa: BLE001 - a stage never submitted
                    continue
        return StatementReads(label(sql), tuple(scans), read)
    except Exception:  # noqa: BLE001 - the reads stay unknown, the statement is not affected
        return None
