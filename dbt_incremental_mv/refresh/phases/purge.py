"""Purge: delete the log rows every view of the log has consumed (and superseded watermarks).

Only the view whose refresh moved its position can raise the floor of what every view consumed,
so a refresh purges the logs it consumed from, using the counts its mark already read. In
session mode the purge drops whole files (a metadata-only delete through Iceberg's Java API:
no row is read or rewritten) and its commit is recorded in the log's properties, so the
staleness check of the other views does not count their unconsumed rows across it. Over SQL,
and for logs consumed on commit (whose rows are consumed by commit id), it is a MERGE that
deletes the consumed rows by row id."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dbt_incremental_mv.conflicts import lost_race
from dbt_incremental_mv.logs import properties as log_properties
from dbt_incremental_mv.logs import sql as log_sql
from dbt_incremental_mv.logs.contract import OP_COLUMN, RESET, WATERMARK, LogSpec
from dbt_incremental_mv.metadata import DataFile
from dbt_incremental_mv.refresh.context import RefreshContext, StatsRequest
from dbt_incremental_mv.refresh.graph import view_consumers
from dbt_incremental_mv.refresh.state.bookkeeping import ViewState
from dbt_incremental_mv.refresh.state.view_state import consumer_states

# Superseded capture watermarks are purged with consumed changes, or once this many pile up.
WATERMARKS_BEFORE_PURGE = 16
# The Spark line from which the row-level purge is a DELETE (logs/sql.py ``purge``: a MERGE before).
DELETE_READS_METADATA_COLUMNS = (4, 1)


def purge_log(
    ctx: RefreshContext,
    spec: LogSpec,
    state: ViewState,
    view_relation: str,
    graph: Mapping[str, Any],
    existing: Callable[[str], bool],
    log_snapshot: int | None = None,
) -> list[str]:
    """Purge what every view on the log consumed. ``log_snapshot``: the log snapshot this refresh
    read (its counts decide; rows appended since are newer than anything a view consumed)."""
    meta = ctx.metadata
    own = state.logs[spec.log_relation]
    positions = [(own.sequence, own.commits)]
    for consumer in view_consumers(graph, spec.master_relation):
        if consumer == view_relation or not existing(consumer):
            continue
        for other in consumer_states(meta, consumer):
            position = other.logs.get(spec.log_relation)
            if position is not None:
                positions.append((position.sequence, position.commits))
    floor = min(sequence for sequence, _ in positions)
    snapshot = log_snapshot or meta.main(spec.log_relation)  # 0: the log had no snapshot when marked
    if snapshot is None:
        return []  # an empty log (an ingestion-written log before its first commit)
    stats = ctx.stats_at(spec.log_relation, snapshot)
    if stats is None:
        stats = ctx.stats(StatsRequest(spec, snapshot, floor))[0]
    consumed_rows = stats["oldest_change"] is not None and stats["oldest_change"] <= floor
    consumed_on_commit = all(commits for _, commits in positions)
    if not (consumed_rows or consumed_on_commit or stats["watermarks"] > WATERMARKS_BEFORE_PURGE):
        return []
    before = meta.main(spec.log_relation)
    if meta.in_jvm and not any(commits for _, commits in positions):
        files = meta.data_files(spec.log_relation, OP_COLUMN)
        if not _rewritten_files(meta, spec, snapshot, floor, files):
            return _purge_files(ctx, spec, files, floor, stats["watermark_sequence"], before)
    as_delete = meta.spark() >= DELETE_READS_METADATA_COLUMNS
    try:
        ctx.execute(log_sql.purge(spec, positions, stats["watermark_sequence"], as_delete=as_delete))
    except Exception as exc:  # noqa: BLE001 - a concurrent write won (or it failed: said); the next refresh purges
        return [_left_for_next_refresh(spec, exc)]
    finally:
        meta.forget(spec.log_relation)
    if not any(commits for _, commits in positions):  # rows consumed on commit may go past the floor: not recorded
        _record_purge(ctx, spec, before, floor)
    return [f"{spec.log_relation} through sequence {floor}"]


def _left_for_next_refresh(spec: LogSpec, exc: Exception) -> str:
    """What a purge that did not commit says: the view is published either way, and the rows
    stay for the next refresh's purge. A purge that fails for another reason than a concurrent
    commit says so: it would fail again, and the log would only grow."""
    reason = str(getattr(exc, "msg", exc)).strip().splitlines()[0][:160]
    cause = "concurrent commit" if lost_race(exc) else "the purge failed"
    return f"{spec.log_relation} left for the next refresh ({cause}: {reason})"


def consumed_files(files: Sequence[DataFile], floor: int, watermark_sequence: int | None) -> list[str]:
    """The log files every row of which the purge may delete: written at or before ``floor``
    (row lineage: a row's sequence number is at most its file's), and holding no watermark
    that is still the newest (its file's upper bound of the op column is below the markers)."""
    doomed = []
    for data_file in files:
        if data_file.sequence is None or data_file.sequence > floor:
            continue
        superseded = watermark_sequence is None or data_file.sequence < watermark_sequence
        no_markers = data_file.upper_bound is not None and data_file.upper_bound < min(WATERMARK, RESET)
        if superseded or no_markers:
            doomed.append(data_file.path)
    return doomed


def _rewritten_files(meta, spec: LogSpec, snapshot: int, floor: int, files: Sequence[DataFile]) -> bool:
    """Whether the log read has files newer than what every view consumed: rewritten files (an
    earlier row-level purge, a compaction: their rows are older than the file) or captures a
    lagging view has not consumed. Their consumed rows cannot go whole: the row-level purge runs."""
    log = meta.table(spec.log_relation)
    read = log.snapshots.get(snapshot) if log is not None else None
    if read is None or read.sequence_number is None:
        return True
    return any(f.sequence is not None and floor < f.sequence <= read.sequence_number for f in files)


def _purge_files(
    ctx: RefreshContext,
    spec: LogSpec,
    files: Sequence[DataFile],
    floor: int,
    watermark_sequence: int | None,
    before: int | None,
) -> list[str]:
    """Purge by whole files: one metadata commit, no row read or rewritten. A capture appends a
    commit's changes and its watermark as files of their own, so the files of consumed commits go
    whole (the newest watermark's file stays; a file holding both goes with the next capture)."""
    meta = ctx.metadata
    doomed = consumed_files(files, floor, watermark_sequence)
    if not doomed:
        return []
    try:
        meta.delete_data_files(spec.log_relation, doomed)
    except Exception as exc:  # noqa: BLE001 - a concurrent commit won; the next refresh purges
        return [_left_for_next_refresh(spec, exc)]
    _record_purge(ctx, spec, before, floor)
    return [f"{spec.log_relation} through sequence {floor} ({len(doomed)} whole file{'s' if len(doomed) > 1 else ''})"]


def _record_purge(ctx: RefreshContext, spec: LogSpec, before: int | None, floor: int) -> None:
    """Record the purge's commit in the log's properties (session mode: a metadata commit; a
    purge left unrecorded only makes the next staleness check count rows)."""
    meta = ctx.metadata
    if not meta.in_jvm:
        return
    log = meta.table(spec.log_relation)
    purge = log.current if log is not None else None
    if log is None or purge is None or purge.parent_id != before or purge.operation == log_properties.APPEND:
        return  # another commit came in between: leave it unrecorded
    try:
        meta.fast_forward(
            spec.log_relation,
            purge.snapshot_id,
            to_snapshot=purge.snapshot_id,
            properties=log_properties.purges_property(log.properties, purge.snapshot_id, floor),
        )
    except Exception as exc:  # noqa: BLE001
        if not lost_race(exc):
            raise
