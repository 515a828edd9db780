"""refresh_method='force': fast or complete, whichever the cost model (cost.py) estimates cheaper.

Decided twice, from metadata only, before anything is written to the view:

1. before the capture, when a capture-managed log has master commits to capture: the capture
   reads every data file those commits changed, and a complete refresh does not need it (it
   reads the masters as they are now). If even the cheapest fast refresh (its statements and
   the tables they read whole, no change read) plus its share of the capture (made once for
   every view of the log) costs more than a complete refresh, the view is recomputed and the
   capture skipped: the view records that it reflects
   the masters' current snapshots past their logs (LogPosition.uncaptured), and the next capture
   of such a log stops at that snapshot so the view can go on from there;
2. after the mark step, when the changes are counted and the statements rendered: the whole
   estimate (cost.estimate_fast, cost.estimate_recompute); the fast refresh's includes the
   compaction its commit would make due (compaction_after, cost.with_compaction): a refresh that
   would compact a large view may cost more than recomputing it, which leaves no delete file.
"""

from __future__ import annotations

from collections.abc import Mapping

from dbt_incremental_mv.config import RefreshMethod
from dbt_incremental_mv.layout import ViewFiles
from dbt_incremental_mv.logs import properties as log_properties
from dbt_incremental_mv.refresh import cost
from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.phases import compact
from dbt_incremental_mv.refresh.phases.capture import capture_plan
from dbt_incremental_mv.refresh.phases.decide import RefreshAction
from dbt_incremental_mv.refresh.phases.mark import netting_columns
from dbt_incremental_mv.refresh.phases.plan import RefreshPlan
from dbt_incremental_mv.refresh.state.bookkeeping import ViewState
from dbt_incremental_mv.refresh.views import view_classes
from dbt_incremental_mv.refresh.views.statement import RefreshStatement


def after_mark(
    ctx: RefreshContext, plan: RefreshPlan, marked: Mapping[str, MarkedLog], statement: RefreshStatement
) -> cost.Choice:
    """The fast refresh of ``statement`` or a complete refresh of what was marked."""
    prices = cost.calibration()
    fast = cost.estimate_fast(statement, plan.view_relation, marked, ctx.metadata, prices)
    compaction = compaction_after(ctx, plan, statement, fast.bytes_written)
    if compaction is not None:
        fast = cost.with_compaction(
            fast,
            statement,
            plan.view_relation,
            compaction.files,
            len(compaction.statements),
            ctx.metadata,
            prices,
            compaction.kind,
        )
    assert plan.definition is not None
    snapshots = {m: log.master_snapshot for m, log in marked.items()}
    complete = cost.estimate_recompute(plan.definition, snapshots, plan.view_relation, ctx.metadata, prices)
    return cost.choose(fast, complete)


def compaction_after(
    ctx: RefreshContext, plan: RefreshPlan, statement: RefreshStatement, written: int
) -> compact.Compaction | None:
    """The compaction the fast refresh of ``statement`` would run after its publish: the same
    decision (compact.due) on the files its commit would leave (cost.files_after: the view's now,
    and what its writes add, ``written`` bytes of them), None when not due."""
    table = ctx.metadata.table(plan.view_relation)
    now = ViewFiles.of(table, partitioned=bool(plan.partition_spec))
    after = cost.files_after(now, statement, plan.view_relation, written, ctx.metadata) if now is not None else None
    if table is None or after is None or not compact.due(after, RefreshAction.FAST, plan.config.auto_compact):
        return None
    return compact.compaction(plan.view_relation, after, table)


def captures_to_skip(
    ctx: RefreshContext, plan: RefreshPlan, state: ViewState | None
) -> tuple[frozenset[str], cost.Choice | None]:
    """refresh_method='force', before the capture of the plan's refresh: the
    masters whose capture a complete refresh does without (empty: capture as usual), and the
    choice made (None: none yet, decided after the mark; ``complete``: the run recomputes)."""
    if state is None or plan.action != RefreshAction.FAST or plan.config.refresh_method is not RefreshMethod.FORCE:
        return frozenset(), None
    early = choice_before_capture(ctx, plan, state)
    if early is None:
        return frozenset(), None
    choice, masters = early
    return (masters if choice.method == RefreshAction.COMPLETE else frozenset()), choice


def choice_before_capture(
    ctx: RefreshContext, plan: RefreshPlan, state: ViewState
) -> tuple[cost.Choice, frozenset[str]] | None:
    """Whether to recompute the view rather than capture: the choice, and the masters whose
    capture it skips; None when no capture is pending (decided after the mark step then)."""
    assert plan.definition is not None
    meta = ctx.metadata
    prices = cost.calibration()
    pending: dict[str, int] = {}  # master -> bytes of the data files its commits to capture changed
    unknown = []
    for spec in plan.logs.values():
        if not spec.capture:
            continue
        snapshots = meta.mains([spec.log_relation, spec.master_relation])
        position = state.logs.get(spec.log_relation)
        capture = capture_plan(ctx, spec, snapshots, position)
        if not capture.method.reads_master:
            continue
        master = meta.table(spec.master_relation)
        commits = master.commits_since(capture.start) if master is not None and capture.start is not None else None
        if commits is None:
            continue
        if any("added-files-size" not in c.summary and "removed-files-size" not in c.summary for c in commits):
            unknown.append(spec.master_relation)
        pending[spec.master_relation] = sum(
            c.count("added-files-size") + c.count("removed-files-size") for c in commits
        )
    if not pending:
        return None
    # the cheapest fast refresh: a change in every log that has (or will have) one
    current = meta.mains([o.master.name for o in plan.definition.occurrences])
    provisional = {}
    for spec in plan.logs.values():
        position = state.logs.get(spec.log_relation)
        log = meta.table(spec.log_relation)
        changed = spec.master_relation in pending or not (
            position is not None and log is not None and log_properties.no_rows_added_since(log, position.log_snapshot)
        )
        # one new row: the cheapest change (a ranked view applies new rows without its master)
        provisional[spec.master_relation] = MarkedLog(
            spec,
            (log.main if log is not None else None) or 0,
            position.sequence if position else 0,
            (position.sequence if position else 0) + 1,
            int(changed),
            0,
            current.get(spec.master_relation, -1),
            # its images carry the view's columns when the log does (the view reads them there)
            logged=tuple(plan.logged_columns.get(spec.log_relation, ())),
            netted_by=netting_columns(plan, spec),
        )
    statement = view_classes.refresh_statement(
        plan.definition,
        plan.view_relation,
        provisional,
        plan.view_types,
        view_rows=plan.view_rows,
    )
    if statement is None:
        return None
    fast = cost.estimate_fast(statement, plan.view_relation, provisional, meta, prices, whole_reads_only=True)
    # each log is captured once for every view that reads it: this view pays its share
    captures = [
        (size, len(plan.log_consumers.get(plan.logs[master].log_relation, ()))) for master, size in pending.items()
    ]
    fast = cost.with_capture(fast, captures, prices, unknown=tuple(unknown))
    complete = cost.estimate_recompute(plan.definition, current, plan.view_relation, meta, prices)
    return cost.choose(fast, complete), frozenset(pending)
