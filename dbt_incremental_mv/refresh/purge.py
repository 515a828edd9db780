"""Purge: delete the log rows every view of the log has consumed (and superseded watermarks).

Only the view whose refresh moved its position can raise the floor of what every view consumed,
so a refresh purges the logs it consumed from, using the counts its mark already read. In
session mode the purge's commit is recorded in the log's properties, so the staleness check of
the other views does not count their unconsumed rows across it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dbt_incremental_mv.bookkeeping import ViewState
from dbt_incremental_mv.conflicts import lost_race
from dbt_incremental_mv.logs import properties as log_properties
from dbt_incremental_mv.logs import sql as log_sql
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh.context import RefreshContext, StatsRequest
from dbt_incremental_mv.refresh.graph import view_consumers
from dbt_incremental_mv.refresh.view_state import view_state

# Superseded capture watermarks are purged with consumed changes, or once this many pile up.
WATERMARKS_BEFORE_PURGE = 16


def purge_log(
    ctx: RefreshContext, spec: LogSpec, state: ViewState, view_relation: str, graph: Mapping[str, Any],
    existing: Callable[[str], bool], log_snapshot: int | None = None,
) -> list[str]:
    """Purge what every view on the log consumed. ``log_snapshot``: the log snapshot this refresh
    read (its counts decide; rows appended since are newer than anything a view consumed)."""
    meta = ctx.metadata
    own = state.logs[spec.log_relation]
    positions = [(own.sequence, own.commits)]
    for consumer in view_consumers(graph, spec.master_relation):
        if consumer == view_relation or not existing(consumer):
            continue
        other = view_state(meta, consumer)
        position = other.logs.get(spec.log_relation) if other else None
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
    try:
        ctx.execute(log_sql.purge(spec, positions, stats["watermark_sequence"]))
    except Exception as exc:  # noqa: BLE001 - a concurrent write won; the next refresh purges
        reason = str(getattr(exc, "msg", exc)).strip().splitlines()[0][:160]
        return [f"{spec.log_relation} left for the next refresh (concurrent commit: {reason})"]
    finally:
        meta.forget(spec.log_relation)
    if not any(commits for _, commits in positions):  # rows consumed on commit may go past the floor: not recorded
        _record_purge(ctx, spec, before, floor)
    return [f"{spec.log_relation} through sequence {floor}"]


def _record_purge(ctx: RefreshContext, spec: LogSpec, before: int | None, floor: int) -> None:
    """Record the purge's commit in the log's properties (session mode: a metadata commit; a
    purge left unrecorded only makes the next staleness check count rows)."""
    meta = ctx.metadata
    if not meta.in_jvm:
        return
    log = meta.table(spec.log_relation)
    purge = log.current if log is not None else None
    if purge is None or purge.parent_id != before or purge.operation == log_properties.APPEND:
        return  # another commit came in between: leave it unrecorded
    try:
        meta.fast_forward(spec.log_relation, purge.snapshot_id, to_snapshot=purge.snapshot_id,
                          properties=log_properties.purges_property(log.properties, purge.snapshot_id, floor))
    except Exception as exc:  # noqa: BLE001
        if not lost_race(exc):
            raise
