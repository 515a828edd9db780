"""Session mode: what a statement read (see reads.py), from Spark's own records of it.

Every statement the cursor measures runs its Spark jobs under a job group of its own. Once it
ran, the SQL executions newer than the one before it whose jobs are in that group are read from
Spark's SQL status store (what the Spark UI shows, kept whether or not the UI runs):

- Iceberg's scan metrics of each ``BatchScan`` node of their plans (data files read and skipped,
  their bytes, rows returned): the final plan of adaptive queries, subqueries, and the plans of
  the executions a command runs inside (a ``CREATE TABLE AS``'s query, a ``CACHE TABLE``'s);
- the input bytes of those jobs' stages: what their tasks read from storage.

Only calls on objects the session already holds, and Spark's own Jackson to read a plan and its
metrics in one call each; anything unexpected (another Spark version, a plan node of an unknown
shape) makes the reads unknown, never the statement fail.
"""

from __future__ import annotations

import itertools
from typing import Any

from dbt_incremental_mv.reads import StatementReads, TableScan
from dbt_incremental_mv.runtime.jvm_calls import to_python

_group_counter = itertools.count(1)
JOB_GROUP_PREFIX = "dbt-incremental-mv-statement-"
SCAN_NODE = "BatchScan "
DEFAULT_CATALOG = "spark_catalog."
# Iceberg's scan metrics, as the SQL status store names them
FILES, SKIPPED, BYTES, ROWS, DELETE_FILES = (
    "number of result data files",
    "number of skipped data files",
    "total data file size (bytes)",
    "number of output rows",
    "number of result delete files",
)


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
    name = node_name[len(SCAN_NODE) :].strip() if node_name.startswith(SCAN_NODE) else node_name
    name = name.split(" ", 1)[0]
    return name[len(DEFAULT_CATALOG) :] if name.startswith(DEFAULT_CATALOG) else name


def scans_of(plan_nodes: list[dict[str, Any]], metric_values: dict[str, str]) -> list[TableScan]:
    """The Iceberg scans of one execution: its plan's nodes (``SparkPlanGraph.allNodes``: a
    whole-stage-codegen cluster's nodes are listed beside it too) with their metrics, and the
    metrics' values by accumulator id, as ``runtime.jvm_calls`` renders them. A scan under a
    cached relation read twice (``CACHE LAZY TABLE``, computed by the statement reading it) is
    listed under each reading node, with the same metrics: counted once."""
    scans = []
    seen: set[str] = set()  # the accumulators of the scans' data-file counts
    for node in plan_nodes:
        name = str(node.get("name", ""))
        if not name.startswith(SCAN_NODE):
            continue
        counted = next((str(m.get("accumulatorId")) for m in node.get("metrics", ()) if m.get("name") == FILES), None)
        if counted in seen:
            continue
        if counted is not None:
            seen.add(counted)
        metrics = {
            str(metric["name"]): _number(metric_values[str(metric["accumulatorId"])])
            for metric in node.get("metrics", ())
            if str(metric.get("accumulatorId")) in metric_values
        }
        if FILES not in metrics:
            continue  # not an Iceberg scan
        scans.append(
            TableScan(
                table=table_name(name),
                files=metrics[FILES],
                skipped_files=metrics.get(SKIPPED, 0),
                bytes=metrics.get(BYTES, 0),
                rows=metrics.get(ROWS, 0),
                delete_files=metrics.get(DELETE_FILES, 0),
            )
        )
    return scans


def executions_after(store: Any, after_execution: int) -> list[Any]:
    """The executions the status store holds with an id above ``after_execution``, oldest first.

    Execution ids come from one counter and the store lists executions by id, so the newer ones
    are among the last ``newest id - after_execution`` of the list: only those are fetched (every
    element fetched is a round trip to the JVM)."""
    count = int(store.executionsCount())
    newest = _list(store.executionsList(count - 1, 1)) if count else []
    if not newest:
        return []
    window = min(count, int(newest[0].executionId()) - after_execution)
    if window <= 1:
        return newest if window == 1 else []
    return [e for e in _list(store.executionsList(count - window, window)) if int(e.executionId()) > after_execution]


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
        scans: list[TableScan] = []
        for execution in executions_after(store, after_execution):
            if {int(j) for j in to_python(session, execution.jobs())} & jobs:
                execution_id = execution.executionId()
                scans += scans_of(
                    to_python(session, store.planGraph(execution_id).allNodes()),
                    to_python(session, store.executionMetrics(execution_id)),
                )
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
