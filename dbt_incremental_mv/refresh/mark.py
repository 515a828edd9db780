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


def mark_logs(ctx: RefreshContext, plan: RefreshPlan, state: ViewState | None) -> dict[str, MarkedLog]:
    """The marked rows of every log of the view, by master relation. A fast refresh whose log was
    reset (the master's history rewritten before capture) becomes a complete refresh."""
    meta = ctx.metadata
    specs = list(plan.logs.values())
    log_snapshots = meta.mains([s.log_relation for s in specs])
    master_snapshots = meta.mains([s.master_relation for s in specs if not s.capture])
    requests: dict[str, StatsRequest] = {}
    unchanged: set[str] = set()
    for spec in specs:
        position = state.logs.get(spec.log_relation) if state else None
        log = meta.table(spec.log_relation)
        if (position is not None and not position.commits and log is not None
                and log_properties.no_rows_added_since(log, position.log_snapshot)):
            unchanged.add(spec.master_relation)
            continue
        requests[spec.master_relation] = StatsRequest(
            spec, log_snapshots.get(spec.log_relation), position.sequence if position else 0,
            tuple(position.commits) if position else (),
        )
    counted = dict(zip(requests, ctx.stats(*requests.values())))
    wants_ranges = plan.action == "fast" and plan.definition is not None and view_classes.uses_key_ranges(plan.definition)
    marked = {}
    for spec in specs:
        position = state.logs.get(spec.log_relation) if state else None
        consumed = position.sequence if position else 0
        if spec.master_relation in unchanged:
            assert position is not None
            master_snapshot = position.master_snapshot if spec.capture else master_snapshots.get(spec.master_relation)
            marked[spec.master_relation] = MarkedLog(
                spec=spec, log_snapshot=log_snapshots.get(spec.log_relation, 0), consumed=consumed, upto=consumed,
                inserts=0, deletes=0, master_snapshot=master_snapshot if master_snapshot is not None else -1,
            )
            continue
        stats = counted[spec.master_relation]
        if plan.action == "fast" and stats["reset_sequence"] is not None and stats["reset_sequence"] > consumed:
            plan.decision = fallback(
                plan.model_name, plan.config,
                f"the history of {spec.master_relation} was rewritten or expired before it was captured",
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
