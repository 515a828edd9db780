"""Logs written at refresh time: a table that keeps its own change log (a ``fast_refresh`` model
with ``mv_log=true``, an incremental model merged by the ``logged_merge`` strategy) appends the
rows each of its commits deleted and inserted to that log itself. It knows which rows it touched,
so the log costs a read of those rows, not a capture of the table's history.

Iceberg commits one table at a time, so the two commits are ordered so that a crash at any point
never loses nor duplicates a logged change:

1. the table's write is staged (a staged snapshot or a write branch: not on ``main``);
2. the log rows are written to a branch of the log made at the log snapshot whose capture
   watermark is the table's snapshot the write began at (``main``: nobody reads the branch);
3. the table's ``main`` moves to its write (a compare-and-swap, see publish.py);
4. the log's ``main`` moves to its branch, with the capture property saying the log is captured
   through the new table snapshot (a compare-and-swap: refused when anything else committed to
   the log meanwhile).

A crash before 3 leaves both tables as they were (the branches are never read). A crash between
3 and 4, or a log that was not in step with the table (a complete refresh, a log created later,
a lost race), leaves the log's watermark behind the table: the log is capture-managed, so the
next capture of it (by any reader's refresh, or ``capture_mv_log``) appends the missing commits
from the table's Iceberg history, exactly once (capture's own compare-and-swap).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass

from dbt_incremental_mv.conflicts import lost_race
from dbt_incremental_mv.logs import properties as log_properties
from dbt_incremental_mv.logs import sql as log_sql
from dbt_incremental_mv.logs.capture_plan import CaptureMethod
from dbt_incremental_mv.logs.contract import CONTRACT_COLUMNS, LogSpec, normalize_type
from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.phases import capture as capture_phase
from dbt_incremental_mv.sql_text import ident, idents, integer, relation

BRANCH_PREFIX = "mv_capture_"  # the same as capture's: a killed process's branch is dropped the same way


@dataclass(frozen=True)
class PendingLog:
    """Log rows written to a branch of the log, waiting for the table's write to be published."""

    spec: LogSpec
    log_snapshot: int  # the log's main the branch was made at (the compare-and-swap's expected main)
    branch: str
    commit: int  # the table snapshot the rows belong to (the staged write)
    images: int  # log rows written (before and after images)


@dataclass(frozen=True)
class ChangedRows:
    """Which rows of its table one commit changed, as the writer knows them (alias ``_mv_v``)."""

    touched: str  # every row the commit deleted or inserted meets it, at the snapshot it is in
    known: bool = False  # ``deleted`` and ``inserted`` describe the commit's writes exactly
    deleted: str | None = None  # the DELETE's own condition: exactly the rows deleted (None: no DELETE)
    inserted: bool = (
        False  # the last write is an INSERT: the new data files of its commit hold exactly the rows inserted
    )
    # exactly the rows deleted, as a query of the table's columns over other tables (the masters as
    # the table reflected them: RefreshStatement.deleted_rows), read instead of the table at its
    # previous snapshot (None: read back by ``deleted``)
    deleted_rows: str | None = None


def logged_columns(ctx: RefreshContext, spec: LogSpec, table_relation: str) -> list[str] | str:
    """The columns a log written at refresh time holds: every column of its table, with the
    table's types; or why it cannot be written now (its readers' capture then catches up)."""
    meta = ctx.metadata
    log_columns = dict(meta.columns(spec.log_relation))
    if not log_columns:
        return "it does not exist yet"
    logged = {c: normalize_type(t) for c, t in log_columns.items() if c not in CONTRACT_COLUMNS}
    table = {c: normalize_type(t) for c, t in meta.columns(table_relation)}
    if logged != table:
        return "its columns differ from the table's (the next capture evolves it)"
    return list(logged)


def write(
    ctx: RefreshContext,
    spec: LogSpec,
    table_relation: str,
    before: int,
    after: int,
    rows: ChangedRows,
) -> PendingLog | str:
    """Write the changes of the table's commit ``before`` -> ``after`` (staged, not yet on main)
    to a branch of the log. Returns what to publish after the table's write, or why nothing was
    written (the log is not in step with the table).

    What is read: when the writes are known (``rows.known``), the rows the DELETE deleted (its
    condition, at ``before``, or ``rows.deleted_rows``: the masters' rows that made them) and, in
    session mode, the data files the INSERT's commit added (nothing else of the table); otherwise
    the rows meeting ``rows.touched`` at both snapshots."""
    meta = ctx.metadata
    meta.forget(spec.log_relation)
    columns = logged_columns(ctx, spec, table_relation)
    if isinstance(columns, str):
        return columns
    log_snapshot = meta.main(spec.log_relation)
    if log_snapshot is None:
        return "it has no snapshot yet"
    capture = capture_phase.capture_plan(ctx, spec, {spec.log_relation: log_snapshot, spec.master_relation: before})
    # (commits that changed no row since, a compaction's: this write's watermark goes past them)
    if capture.method not in (CaptureMethod.NONE, CaptureMethod.REWRITTEN) or capture.end != before:
        return f"it is captured through table snapshot {capture.start}, not {before} (the next capture catches up)"
    branch = f"{BRANCH_PREFIX}{uuid.uuid4().hex[:16]}"
    meta.create_branch(spec.log_relation, branch, log_snapshot)
    try:
        with meta.appended_files(table_relation, after) if rows.known and rows.inserted else nullcontext() as appended:
            if rows.known and (not rows.inserted or appended is not None):
                if rows.deleted is None:
                    deleted = None
                elif rows.deleted_rows is not None:
                    deleted = f"select {idents(columns)} from (\n{rows.deleted_rows}\n) as `_mv_d`"
                else:
                    deleted = (
                        f"select {idents(columns)} from {relation(table_relation)} version as of {integer(before)} as `_mv_v`\n"
                        f"where {rows.deleted}"
                    )
                inserted = (
                    f"select {idents(columns)} from {ident(appended.added_view)}"
                    if appended is not None and appended.added_view
                    else None
                )
                ctx.execute(log_sql.log_changes(spec, columns, deleted, inserted, after, branch))
            else:
                ctx.execute(log_sql.log_commit(spec, columns, table_relation, before, after, rows.touched, branch))
    except Exception:
        meta.drop_branch(spec.log_relation, branch)
        raise
    meta.forget(spec.log_relation)
    log = meta.table(spec.log_relation)
    head = meta.branch_head(spec.log_relation, branch)
    written = log.snapshots.get(head) if log is not None and head is not None else None
    images = max(written.count("added-records") - 1, 0) if written is not None else 0  # (less the watermark)
    return PendingLog(spec, log_snapshot, branch, after, images)


def publish(ctx: RefreshContext, pending: PendingLog) -> str:
    """Move the log's main to the rows written for a commit now published on the table (a
    compare-and-swap); returns what the log line says."""
    meta = ctx.metadata
    properties = None
    if meta.in_jvm:
        head = meta.branch_head(pending.spec.log_relation, pending.branch)
        if head is not None:
            properties = log_properties.capture_property(pending.commit, head)
    try:
        meta.fast_forward(pending.spec.log_relation, pending.log_snapshot, branch=pending.branch, properties=properties)
    except Exception as exc:
        meta.drop_branch(pending.spec.log_relation, pending.branch)
        if not lost_race(exc):
            raise
        return (
            f"{pending.spec.log_relation} not written (another commit to it came first): its next capture "
            "appends this change"
        )
    finally:
        meta.forget(pending.spec.log_relation)
    return f"logged {pending.images} image(s) to {pending.spec.log_relation}"


def abandon(ctx: RefreshContext, pending: Sequence[PendingLog]) -> None:
    """Drop the branches of log rows whose table write was not published."""
    for log in pending:
        ctx.metadata.drop_branch(log.spec.log_relation, log.branch)
        ctx.metadata.forget(log.spec.log_relation)


def ensure_exists(ctx: RefreshContext, spec: LogSpec) -> str | None:
    """Create a log its table keeps that does not exist yet (watermark at the table's current
    snapshot: its changes are logged from there on); returns what was done, if anything."""
    if ctx.metadata.columns(spec.log_relation):
        return None
    return capture_phase.capture(ctx, spec, None).reason
