"""The refresh history: one row per refreshed view, appended to an Iceberg table
(``<history_schema>.mv_refresh_history``; the schema is the model's unless its config names
another).

What a refresh did (method and why, the changes it marked per master, the steps it ran and
skipped, the rows it wrote, its statements, its seconds per phase, the view snapshot it left) is
known when the model finishes. Writing each row then would cost every refresh a Spark job, a
no-op refresh included; the rows are kept and written together at the end of the dbt command
instead (one statement per history table per command, see the adapter's cleanup_connections).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dbt_incremental_mv.layout import METADATA_CLEANUP
from dbt_incremental_mv.reads import Reads
from dbt_incremental_mv.refresh.phases.decide import RefreshAction
from dbt_incremental_mv.refresh.phases.publish import PUBLISHED_SNAPSHOT, StepKind, rows_written
from dbt_incremental_mv.sql_text import integer, relation, string

if TYPE_CHECKING:
    from dbt_incremental_mv.refresh.context import RefreshContext
    from dbt_incremental_mv.refresh.phases.propagate import Propagation
    from dbt_incremental_mv.refresh.phases.run import RefreshRun

HISTORY_TABLE = "mv_refresh_history"
PHASES = ("plan", "capture", "mark", "write", "publish", "purge", "compact", "expire")

COLUMNS = (
    ("refreshed_at", "timestamp", "when the model finished (UTC)"),
    ("invocation_id", "string", "the dbt command's invocation_id"),
    ("model", "string", "the dbt model"),
    ("view", "string", "the view's table (schema.table)"),
    ("method", "string", "build, complete, fast, or none (nothing to refresh)"),
    ("reason", "string", "why that method: the plan's reason, or force's estimate"),
    (
        "marked",
        "array<struct<master:string,kind:string,inserts:bigint,deletes:bigint>>",
        "per master, the log rows marked for this refresh by kind",
    ),
    ("steps_run", "array<string>", "the view class's steps run"),
    ("steps_skipped", "array<string>", "... and those the marked changes let it skip"),
    ("rows_inserted", "bigint", "rows the view commit added"),
    ("rows_deleted", "bigint", "rows the view commit removed"),
    (
        "rows_updated",
        "bigint",
        "rows updated in place (NULL: a refresh rewrites a changed row as a delete and an insert)",
    ),
    ("statements", "int", "SQL statements the refresh ran"),
    (
        "seconds",
        "map<string,double>",
        "seconds per phase: plan, capture, mark, write, publish, purge, compact, expire, total",
    ),
    ("view_snapshot", "bigint", "the view's snapshot after the refresh"),
    ("summary", "string", "the model's log line"),
    ("files_read", "bigint", "data files its statements scanned (Iceberg scan planning; NULL: not measured, over SQL)"),
    ("files_skipped", "bigint", "data files their filters let Iceberg skip"),
    ("bytes_read", "bigint", "the size of the data files scanned"),
    ("input_bytes", "bigint", "bytes its statements' tasks read from storage (columns read, row groups skipped)"),
    (
        "reads",
        "array<struct<table:string,files:bigint,skipped_files:bigint,bytes:bigint>>",
        "per table scanned: data files read and skipped, their bytes",
    ),
    (
        "clock",
        "string",
        "the time the view's current_date()/current_timestamp()/now() read as (the session's time zone; "
        "NULL: its query reads no clock)",
    ),
)
READS_TYPE = "array<struct<table:string,files:bigint,skipped_files:bigint,bytes:bigint>>"


@dataclass(frozen=True)
class MarkedCount:
    master: str
    kind: str
    inserts: int
    deletes: int


@dataclass(frozen=True)
class HistoryRow:
    refreshed_at: datetime.datetime
    invocation_id: str
    model: str
    view: str
    method: str
    reason: str
    marked: tuple[MarkedCount, ...] = ()
    steps_run: tuple[str, ...] = ()
    steps_skipped: tuple[str, ...] = ()
    rows_inserted: int | None = None
    rows_deleted: int | None = None
    statements: int = 0
    seconds: Mapping[str, float] = field(default_factory=dict)
    view_snapshot: int | None = None
    summary: str = ""
    reads: Reads | None = None  # what its statements read (None: not measured)
    clock: str | None = None  # the time the view's clock functions read as (None: it reads no clock)


def refresh_row(
    ctx: RefreshContext, run: RefreshRun, propagation: Propagation, line: str, invocation_id: str
) -> HistoryRow:
    """The row of one finished refresh, from what its phases kept (the run's decision, timings
    and cost choice; the marked logs; the published commit's summary)."""
    plan = run.plan
    idle = run.action == RefreshAction.FAST and not propagation.steps
    reason = run.cost_choice if run.action == RefreshAction.FAST and run.cost_choice else run.reason
    inserted, deleted = rows_written(run.published_summary) if run.published_summary else (None, None)
    snapshot: str | int | None = run.published_summary.get(PUBLISHED_SNAPSHOT) if run.published_summary else None
    if snapshot is None:
        snapshot = plan.view_read_at if idle else ctx.metadata.main(plan.view_relation)
    if inserted is None and any(step.kind is StepKind.CREATE for step in propagation.steps):  # built anew: its size
        ctx.metadata.forget(plan.view_relation)
        view = ctx.metadata.table(plan.view_relation)
        if view is not None and view.current is not None and "total-records" in view.current.summary:
            inserted, deleted = view.current.count("total-records"), 0
    return HistoryRow(
        refreshed_at=datetime.datetime.now(datetime.UTC),
        invocation_id=invocation_id,
        model=plan.model_name,
        view=plan.view_relation,
        method="none" if idle else run.action,
        reason="nothing to refresh" if idle else reason,
        marked=tuple(
            MarkedCount(m.spec.master_name, m.kind, m.inserts, m.deletes) for _, m in sorted(propagation.marked.items())
        ),
        steps_run=propagation.steps_run,
        steps_skipped=propagation.steps_skipped,
        rows_inserted=inserted,
        rows_deleted=deleted,
        statements=ctx.statements + _step_statements(propagation, over_sql=not ctx.metadata.in_jvm),
        seconds=seconds(run.timings),
        view_snapshot=int(snapshot) if snapshot is not None else None,
        summary=line,
        reads=run.reads,
        clock=plan.now.timestamp if plan.now is not None else None,
    )


def history_relation(schema: str) -> str:
    return f"{schema}.{HISTORY_TABLE}".lower()


def create_sql(table: str) -> str:
    columns = ",\n".join(f"  {name} {kind} comment {string(doc)}" for name, kind, doc in COLUMNS)
    return (
        f"create table if not exists {relation(table)} (\n{columns}\n) using iceberg\n"
        "partitioned by (days(refreshed_at))\n"
        f"comment {string('dbt-incremental-mv: one row per refresh of a fast_refresh model')}\n"
        # a commit per refresh: its old metadata files deleted as Iceberg writes new ones
        f"tblproperties ({string(METADATA_CLEANUP)} = 'true')"
    )


def insert_sql(table: str, rows: Sequence[HistoryRow]) -> str:
    """One INSERT of ``rows`` (every value a quoted literal)."""
    names = ", ".join(name for name, _, _ in COLUMNS)
    return f"insert into {relation(table)} ({names}) values\n" + ",\n".join(f"({_values(r)})" for r in rows)


def _optional(value: int | None, kind: str = "bigint") -> str:
    return integer(value) if value is not None else f"cast(null as {kind})"


def _double(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"not a finite number of seconds: {value!r}")
    return f"cast({string(f'{value:.3f}')} as double)"


def _strings(values: Sequence[str]) -> str:
    return f"array({', '.join(string(v) for v in values)})" if values else "cast(array() as array<string>)"


def _values(row: HistoryRow) -> str:
    marked = (
        "array("
        + ", ".join(
            f"named_struct('master', {string(m.master)}, 'kind', {string(m.kind)}, "
            f"'inserts', {integer(m.inserts)}, 'deletes', {integer(m.deletes)})"
            for m in row.marked
        )
        + ")"
        if row.marked
        else "cast(array() as array<struct<master:string,kind:string,inserts:bigint,deletes:bigint>>)"
    )
    seconds = (
        "map(" + ", ".join(f"{string(k)}, {_double(v)}" for k, v in row.seconds.items()) + ")"
        if row.seconds
        else "cast(map() as map<string,double>)"
    )
    at = row.refreshed_at.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return ", ".join(
        [
            f"cast({string(at)} as timestamp)",
            string(row.invocation_id),
            string(row.model),
            string(row.view),
            string(row.method),
            string(row.reason),
            marked,
            _strings(row.steps_run),
            _strings(row.steps_skipped),
            _optional(row.rows_inserted),
            _optional(row.rows_deleted),
            "cast(null as bigint)",
            f"cast({integer(row.statements)} as int)",
            seconds,
            _optional(row.view_snapshot),
            string(row.summary),
            *_reads(row.reads),
            string(row.clock) if row.clock is not None else "cast(null as string)",
        ]
    )


def _reads(reads: Reads | None) -> list[str]:
    """files_read, files_skipped, bytes_read, input_bytes and reads of a row."""
    if reads is None:
        return ["cast(null as bigint)"] * 4 + [f"cast(null as {READS_TYPE})"]
    tables = reads.by_table()
    per_table = (
        "array("
        + ", ".join(
            f"named_struct('table', {string(t.table)}, 'files', {integer(t.files)}, "
            f"'skipped_files', {integer(t.skipped_files)}, 'bytes', {integer(t.bytes)})"
            for t in tables
        )
        + ")"
        if tables
        else f"cast(array() as {READS_TYPE})"
    )
    return [
        integer(reads.files),
        integer(reads.skipped_files),
        integer(reads.bytes),
        _optional(reads.input_bytes),
        per_table,
    ]


def missing_columns_sql(table: str, existing: Sequence[str]) -> list[str]:
    """ALTER TABLE statements adding the columns a history table made by an earlier version lacks."""
    have = {c.lower() for c in existing}
    return [
        f"alter table {relation(table)} add columns ({name} {kind} comment {string(doc)})"
        for name, kind, doc in COLUMNS
        if name not in have
    ]


def _step_statements(propagation: Propagation, over_sql: bool) -> int:
    """The SQL statements the propagate steps ran through the adapter (the context counts its
    own: the own log's write among them): each statement, and over SQL each setting's SET/RESET
    and cached view's DROP VIEW (in session mode the session makes them)."""
    counted = (StepKind.SQL, StepKind.CREATE) + ((StepKind.SETTINGS, StepKind.UNCACHE) if over_sql else ())
    return sum(len(step.statements) for step in propagation.steps if step.kind in counted)


def seconds(timings: Mapping[str, float]) -> dict[str, float]:
    """Seconds per phase, in the pipeline's order, and their total."""
    found = {phase: round(timings[phase], 3) for phase in PHASES if phase in timings}
    found["total"] = round(sum(found.values()), 3)
    return found


def last_refresh_sql(table: str, views: Sequence[str]) -> str:
    """The newest row of each of ``views`` (mv_status)."""
    names = ", ".join(string(v) for v in sorted(set(views)))
    return (
        "select view, method, reason, refreshed_at, seconds['total'], rows_inserted, rows_deleted from (\n"
        "  select *, row_number() over (partition by view order by refreshed_at desc) as newest\n"
        f"  from {relation(table)} where view in ({names})\n) where newest = 1"
    )


def last_refresh_line(
    method: str, reason: str, refreshed_at: object, total: float | None, inserted: int | None, deleted: int | None
) -> str:
    at = (
        refreshed_at.strftime("%Y-%m-%d %H:%M:%S") if isinstance(refreshed_at, datetime.datetime) else str(refreshed_at)
    )
    parts = [f"last refresh {at}: {method}"]
    if total is not None:
        parts.append(f"{float(total):.1f} s")
    if inserted is not None or deleted is not None:
        parts.append(f"rows +{inserted or 0} -{deleted or 0}")
    line = ", ".join(parts)
    return f"{line} ({reason})" if reason and method not in ("fast", "none") else line
