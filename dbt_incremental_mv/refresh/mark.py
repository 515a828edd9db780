"""Mark: fix what this refresh consumes from each log (the rows after the view's position, up to
the newest sequence in the log snapshot read) and which master snapshot it reflects.

A log that provably gained no row since the view's position (no commit since but compactions
and the plugin's purges) is not read; the others are counted in one statement. In session mode
the range of the marked keys comes with them, from the statistics of the log files written after
the position (metadata only): the writes add it to their filters, so that Iceberg reads only the
files of the masters and of the view that can hold those keys."""

from __future__ import annotations

from dbt_incremental_mv import staleness
from dbt_incremental_mv.bookkeeping import ViewState
from dbt_incremental_mv.logs import properties as log_properties
from dbt_incremental_mv.refresh import view_classes
from dbt_incremental_mv.refresh.context import RefreshContext, StatsRequest
from dbt_incremental_mv.refresh.marked import MarkedLog
from dbt_incremental_mv.refresh.plan import RefreshPlan, fallback


def nothing_to_refresh(ctx: RefreshContext, plan: RefreshPlan, state: ViewState) -> bool:
    """Nothing to capture, mark or write (see staleness.nothing_to_refresh): metadata only."""
    specs = list(plan.logs.values())
    positions = [(s.capture, s.master_relation, s.log_relation, state.logs.get(s.log_relation)) for s in specs]
    relations = sorted({s.master_relation if s.capture else s.log_relation for s in specs})
    return bool(relations) and staleness.nothing_to_refresh(positions, ctx.metadata.mains(relations))


def mark_logs(
    ctx: RefreshContext, plan: RefreshPlan, state: ViewState | None, uncaptured: frozenset[str] = frozenset()
) -> dict[str, MarkedLog]:
    """The marked rows of every log of the view, by master relation. A fast refresh whose log was
    reset (the master's history rewritten before capture) becomes a complete refresh.

    ``uncaptured``: the masters of capture-managed logs this (complete) refresh did not capture:
    the view reflects their current snapshot, past the log (LogPosition.uncaptured). A view whose
    position is such resumes at the log's watermark at that snapshot (a capture stops there); if
    a capture went past it in one piece, the changes on either side cannot be told apart, and the
    view is recomputed."""
    meta = ctx.metadata
    specs = list(plan.logs.values())
    log_snapshots = meta.mains([s.log_relation for s in specs])
    master_snapshots = meta.mains([s.master_relation for s in specs if not s.capture or s.master_relation in uncaptured])
    requests: dict[str, StatsRequest] = {}
    unchanged: set[str] = set()
    for spec in specs:
        position = state.logs.get(spec.log_relation) if state else None
        log = meta.table(spec.log_relation)
        if spec.master_relation in uncaptured or (
                position is not None and not position.commits and log is not None
                and log_properties.no_rows_added_since(log, position.log_snapshot)):
            unchanged.add(spec.master_relation)  # (a log not captured: what it holds is not consumed yet)
            continue
        resume_at = position.master_snapshot if position is not None and position.uncaptured else None
        requests[spec.master_relation] = StatsRequest(
            spec, log_snapshots.get(spec.log_relation), position.sequence if position else 0,
            tuple(position.commits) if position else (), resume_at=resume_at,
        )
    counted = dict(zip(requests, ctx.stats(*requests.values())))
    resumed = _resume(ctx, plan, requests, counted)
    wants_ranges = plan.action == "fast" and plan.definition is not None and view_classes.uses_key_ranges(plan.definition)
    marked = {}
    for spec in specs:
        position = state.logs.get(spec.log_relation) if state else None
        consumed = position.sequence if position else 0
        skipped = spec.master_relation in uncaptured
        if spec.master_relation in unchanged:
            if spec.capture and not skipped:
                assert position is not None
                master_snapshot = position.master_snapshot
            else:  # the master as it is now: an ingestion log's, or one this refresh did not capture
                master_snapshot = master_snapshots.get(spec.master_relation)
            marked[spec.master_relation] = MarkedLog(
                spec=spec, log_snapshot=log_snapshots.get(spec.log_relation, 0), consumed=consumed, upto=consumed,
                inserts=0, deletes=0, master_snapshot=master_snapshot if master_snapshot is not None else -1,
                uncaptured=skipped or (position is not None and position.uncaptured),
            )
            continue
        stats = counted[spec.master_relation]
        if spec.master_relation in resumed:
            consumed, stats = resumed[spec.master_relation]
        if plan.action == "fast" and stats["reset_sequence"] is not None and stats["reset_sequence"] > consumed:
            plan.decision = fallback(
                plan.model_name, plan.config,
                f"the history of {spec.master_name} was rewritten or expired before it was captured",
            )
        master_snapshot = stats["captured_through"] if spec.capture else master_snapshots.get(spec.master_relation)
        log_snapshot = log_snapshots.get(spec.log_relation)
        bounds = (
            meta.column_bounds(spec.log_relation, log_snapshot, spec.key, consumed)
            if wants_ranges and log_snapshot is not None and (stats["inserts"] or stats["deletes"]) else {}
        )
        marked[spec.master_relation] = MarkedLog(
            spec=spec,
            log_snapshot=log_snapshots.get(spec.log_relation, 0),
            consumed=consumed,
            upto=max(stats["max_sequence"], consumed),
            inserts=int(stats["inserts"]),
            deletes=int(stats["deletes"]),
            master_snapshot=master_snapshot if master_snapshot is not None else -1,
            excluded=tuple(position.commits if position else ()),
            logged=tuple(plan.logged_columns.get(spec.log_relation, ())),
            key_bounds=tuple((column, *bounds[column]) for column in spec.key if column in bounds),
        )
    return marked


def _resume(
    ctx: RefreshContext, plan: RefreshPlan, requests: dict[str, StatsRequest], counted: dict[str, dict],
) -> dict[str, tuple[int, dict]]:
    """Where a view whose position is uncaptured resumes in each such log, and its counts from
    there (one more count statement, on the first refresh after such a complete refresh only)."""
    if plan.action != "fast":
        return {}
    resumed: dict[str, tuple[int, dict]] = {}
    again: dict[str, StatsRequest] = {}
    for master, request in requests.items():
        if request.resume_at is None:
            continue
        resume = counted[master]["resume_sequence"]
        if resume is None:
            plan.decision = fallback(
                plan.model_name, plan.config,
                f"the change log of {request.spec.master_name} was captured past master snapshot {request.resume_at}, "
                "which the view reflects since a complete refresh, in one piece: the changes before and after it "
                "cannot be told apart",
            )
            return {}
        consumed = max(int(resume), request.consumed)
        again[master] = StatsRequest(request.spec, request.log_snapshot, consumed, request.excluded)
    for (master, request), stats in zip(again.items(), ctx.stats(*again.values())):
        resumed[master] = (request.consumed, stats)
    return resumed
