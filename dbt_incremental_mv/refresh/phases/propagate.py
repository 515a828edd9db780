"""Propagate: the statements that change the view, in one staged commit (see publish.py).

A fast refresh applies the marked changes with the statement of its view class (join_view,
outer_join_view, aggregate_view); a build or complete refresh recomputes the defining query,
pinned to the master snapshots the logs were marked at, so the state it records is exact."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dbt_incremental_mv import view_table
from dbt_incremental_mv.analysis.render import render_select
from dbt_incremental_mv.refresh import indexed_choice
from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.phases import own_log
from dbt_incremental_mv.refresh.phases.decide import RefreshAction
from dbt_incremental_mv.refresh.phases.mark import Marked
from dbt_incremental_mv.refresh.phases.publish import (
    Step,
    StepKind,
    commit_state,
    staged,
    staged_statement,
    write_branch,
)
from dbt_incremental_mv.refresh.phases.run import RefreshRun
from dbt_incremental_mv.refresh.state.bookkeeping import ViewState
from dbt_incremental_mv.refresh.views import view_classes
from dbt_incremental_mv.refresh.views.statement import CrossedRows, RefreshStatement, Write, WriteKind
from dbt_incremental_mv.sql_text import idents, relation

IDLE = "fast refresh: nothing marked (no master commit or log change since the last refresh); no write"


@dataclass
class Propagation:
    """The propagate step, ready to run: statements and what they record."""

    steps: list[Step]
    state: ViewState | None
    marked: dict[str, MarkedLog]
    summary: str
    steps_run: tuple[str, ...] = ()  # the view class's steps (a fast refresh's)
    steps_skipped: tuple[str, ...] = ()
    # the write branch the steps stage on, and the view snapshot it is made at (by the executor,
    # before the steps: publish.open_write_branch); None: the steps write no branch
    write_branch: tuple[str, int | None] | None = None


def propose(run: RefreshRun, marked: Marked) -> RefreshStatement | None:
    """The view class's statement applying the ``marked`` changes (None: a log was reset, or the
    changes change nothing): what the decision prices under refresh_method='force', and what a
    fast refresh writes."""
    if marked.log_reset is not None:
        return None
    plan = run.plan
    assert plan.definition is not None
    with run.clock.phase("mark"):
        return view_classes.refresh_statement(
            plan.definition,
            plan.view_relation,
            marked.logs,
            plan.view_types,
            write_branch(),
            plan.view_rows,
            plan.view_read_at,
        )


def emit(
    ctx: RefreshContext,
    run: RefreshRun,
    marked: Marked,
    read_at: int | None,
    captured: list[str],
    statement: RefreshStatement | None,
) -> Propagation:
    """The steps that change the view, as the run's decision says (``statement``: propose's;
    ``read_at``: the view snapshot a fast refresh commits on; ``captured``: what each capture
    did, for the log line)."""
    with run.clock.phase("mark"):
        if run.action == RefreshAction.FAST:
            propagation = fast(ctx, run, marked.logs, read_at, statement)
        else:
            propagation = complete(ctx, run, marked.logs)
    if captured:  # which capture path ran, and what it read
        propagation.summary += "; " + "; ".join(captured)
    return propagation


def fast(
    ctx: RefreshContext,
    run: RefreshRun,
    marked: dict[str, MarkedLog],
    read_at: int | None,
    statement: RefreshStatement | None,
) -> Propagation:
    """The writes of a fast refresh applying ``statement`` (propose's), on the write branch
    they name (made by the executor); the rows the view's own log gets go to ``run``."""
    plan = run.plan
    kinds = ", ".join(
        f"{m.spec.master_name}: {m.kind} (+{m.inserts}/-{m.deletes}{_skipped(m)})" for m in marked.values()
    )
    crossing = run.facts.clock_crossed if run.facts is not None else None
    if crossing is not None:  # rows the time moved across, applied as changes (decided for classes that can)
        assert plan.definition is not None
        branch = statement.branch if statement is not None and statement.branch is not None else write_branch()
        crossed = CrossedRows(crossing.rows, plan.moving_filters)
        statement = view_classes.with_crossed_rows(
            plan.definition, plan.view_relation, marked, statement, crossed, plan.view_types, branch
        )
    if statement is None and not any(m.outside or m.skipped or m.has_changes for m in marked.values()):
        return Propagation([], None, marked, f"fast refresh: nothing marked ({kinds}); no write")  # (watermarks alone)
    # (a dimension whose updates were all patched in place, or deleted, read no fact for them)
    changed = (m.spec.log_relation for m in marked.values() if m.has_changes and not m.inserts_patched)
    changes = indexed_choice.recorded(plan.changes, changed, plan.dimension_logs)
    state = commit_state(marked, "fast", base=read_at, clock=plan.now, states=plan.internal_states, changes=changes)
    if statement is None:
        # changes consumed that change nothing in the view (outside its filters, updates of
        # columns it does not read, new rows in no view row): its position is recorded past them,
        # by a commit of no rows, so that they are neither read again nor kept from the purge
        return Propagation(
            staged(state, "record", _record(plan.view_relation)),
            state,
            marked,
            f"fast refresh: nothing to apply ({kinds}); the view's position recorded",
        )
    choice = run.facts.after_mark if run.facts is not None else None
    chosen = f"; force: {choice.short}" if choice is not None else ""
    summary = (
        f"fast refresh: {kinds}; steps run: {', '.join(statement.steps_run)}"
        + (f"; skipped: {', '.join(statement.steps_skipped)}" if statement.steps_skipped else "")
        + chosen
    )
    if plan.config.refresh_stats and statement.stats_sql:
        values = ctx.query(statement.stats_sql)[0]
        summary += "; " + ", ".join(f"{label}: {int(v or 0)}" for label, v in zip(statement.stats_labels, values))
    log = plan.own_log is not None and statement.touched is not None
    run.changed_rows = (
        own_log.ChangedRows(
            statement.touched,
            known=True,
            deleted=statement.deleted,
            inserted=statement.inserts_last,
            # (a view reading the clock: its rows are the query at the time they were written, which
            # the masters' previous snapshots do not say)
            deleted_rows=statement.deleted_rows if plan.now is None else None,
        )
        if log and statement.touched is not None
        else None
    )
    return Propagation(
        staged_statement(state, statement, log),
        state,
        marked,
        summary,
        tuple(statement.steps_run),
        tuple(statement.steps_skipped),
        (statement.branch, read_at) if statement.branch is not None else None,
    )


def _skipped(log: MarkedLog) -> str:
    """What of the log the view skips: images its filters of the master's rows drop, updates
    that changed no column it reads."""
    said = ""
    if log.outside:
        said += f"; {log.outside} image{'s' if log.outside != 1 else ''} outside the view's filters"
    if log.skipped:
        said += f"; {log.skipped} update{'s' if log.skipped != 1 else ''} skipped: no column the view reads changed"
    return said


def complete(ctx: RefreshContext, run: RefreshRun, marked: Mapping[str, MarkedLog]) -> Propagation:
    """A build or complete refresh (``run.action``): the defining query recomputed."""
    plan = run.plan
    definition = plan.definition
    pinned = definition is not None and all(
        o.master.name in marked and marked[o.master.name].master_snapshot >= 0 for o in definition.occurrences
    )
    target = relation(plan.view_relation)
    if definition is not None and pinned:
        sources = {}  # each master at its marked snapshot, the columns read cast to their current types
        for o in definition.occurrences:
            types = plan.read_types.get(o.master.name, {})
            read = {c: types[c.lower()] for c in definition.referenced_columns[o.alias] if c.lower() in types}
            sources[o.alias] = marked[o.master.name].master_as_of_current_types(read)
        query = plan.layout.sorted_query(render_select(definition, sources))
        columns = definition.stored_columns
        base = ctx.metadata.main(plan.view_relation) if plan.existing_columns else None
        state = commit_state(
            marked, run.action, base=base, clock=plan.now, states=plan.internal_states, changes=plan.changes
        )
    else:
        query, columns, state = plan.compiled_sql, None, None
    same_table = plan.existing_columns == tuple(columns or ()) and plan.stored_definition == plan.compiled_sql.strip()
    if state is not None and columns is not None and run.action == RefreshAction.COMPLETE and same_table:
        steps = staged(
            state, "main", Write(WriteKind.OVERWRITE, f"insert overwrite {target} ({idents(columns)})\n{query}")
        )
        return Propagation(steps, state, dict(marked), "recomputed in one commit")
    # the table made anew, then (when the query is pinned) the record of what it reflects
    record = staged(state, "record", _record(plan.view_relation)) if state is not None else []
    create = Step("main", view_table.enforce_contract(query, columns, plan.contract), kind=StepKind.CREATE)
    return Propagation([create, *record], state, dict(marked), "table replaced")


def _record(view_relation: str) -> Write:
    """A write of no rows: its commit records the view's state alone (what it reflects)."""
    target = relation(view_relation)
    return Write(WriteKind.RECORD, f"insert into {target} select * from {target} where false")
