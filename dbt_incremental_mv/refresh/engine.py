"""The refresh of one fast_refresh model, phase by phase: plan, capture, mark, propagate,
publish, purge, compact, expire. Each phase is a module of its own; this one only orchestrates.

The adapter runs it with two callables (``query`` returns rows, ``execute`` runs a statement)
and the metadata seam (``metadata.py``), so that every decision here is testable without
Spark. The materialization runs the statements of the propagate step itself, so dbt logs and
times them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.config import RefreshMethod
from dbt_incremental_mv.layout import ViewFiles
from dbt_incremental_mv.logs.capture_plan import CapturePlan
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.metadata import Metadata
from dbt_incremental_mv.refresh.context import Execute, Query, RefreshContext
from dbt_incremental_mv.refresh.graph import view_consumers
from dbt_incremental_mv.refresh.operations import explain as explain_phase
from dbt_incremental_mv.refresh.operations import history
from dbt_incremental_mv.refresh.operations import on_commit as on_commit_phase
from dbt_incremental_mv.refresh.operations import status as status_phase
from dbt_incremental_mv.refresh.phases import capture as capture_phase
from dbt_incremental_mv.refresh.phases import clock as clock_phase
from dbt_incremental_mv.refresh.phases import compact as compact_phase
from dbt_incremental_mv.refresh.phases import expire as expire_phase
from dbt_incremental_mv.refresh.phases import force, own_log, propagate
from dbt_incremental_mv.refresh.phases import publish as publish_phase
from dbt_incremental_mv.refresh.phases.decide import RefreshAction, RunFacts
from dbt_incremental_mv.refresh.phases.execute import PhaseClock, StepRunner, execute_steps, run_sql_step
from dbt_incremental_mv.refresh.phases.mark import mark_logs, nothing_to_refresh
from dbt_incremental_mv.refresh.phases.plan import RefreshPlan, plan_refresh
from dbt_incremental_mv.refresh.phases.propagate import IDLE, Propagation
from dbt_incremental_mv.refresh.phases.publish import ConcurrentRefreshError, Step, StepKind  # noqa: F401 - part of the engine's API
from dbt_incremental_mv.refresh.phases.purge import purge_log
from dbt_incremental_mv.refresh.phases.run import RefreshRun
from dbt_incremental_mv.refresh.state import staleness
from dbt_incremental_mv.refresh.state.bookkeeping import LogPosition
from dbt_incremental_mv.refresh.units import Unit, state_log_relation
from dbt_incremental_mv.sql_text import relation


class FastRefreshEngine:
    def __init__(self, query: Query, execute: Execute, metadata: Metadata | None = None) -> None:
        if metadata is None:
            self.ctx = RefreshContext.over_sql(query, execute)
        else:
            self.ctx = RefreshContext(query, execute, metadata)

    # ---------------------------------------------------------------- plan
    def plan(
        self,
        model: Mapping[str, Any],
        compiled_sql: str,
        view_relation: str,
        existing_type: str | None,
        full_refresh: bool,
        graph: Mapping[str, Any],
    ) -> RefreshRun:
        """Validate and decide (reads only, see plan.py): the plan, in the record of its run."""
        clock = PhaseClock()
        with clock.phase("plan"):
            plan = plan_refresh(self.ctx, model, compiled_sql, view_relation, existing_type, full_refresh, graph)
        return RefreshRun(plan, clock=clock)

    # ---------------------------------------------------------------- execute
    def execute(self, run: RefreshRun, propagation: Propagation, runner: StepRunner) -> None:
        """Make the write branch the steps stage on, then run them with ``runner`` (execute.py),
        timed into the run's record."""
        if propagation.write_branch is not None:
            with run.clock.phase("write"):
                branch, read_at = propagation.write_branch
                publish_phase.open_write_branch(self.ctx, run.plan.view_relation, branch, read_at)
                run.write_branch = branch  # (publish drops it)
        execute_steps(propagation.steps, runner, run.clock)

    def runner(self, run: RefreshRun, statement: Callable[[str], object], create: Callable[[str], str]) -> StepRunner:
        """The steps of ``run`` carried out: statements by ``statement`` (the adapter's: dbt logs
        them), the view's table made by ``create`` (the DDL around a query), settings and the
        drop of cached views by the metadata seam (through the session when embedded), publish
        and the own log by this engine."""
        return _RefreshRunner(self, run, statement, create)

    # ---------------------------------------------------------------- own log + publish
    def write_own_log(self, run: RefreshRun, wap_id: str) -> None:
        """mv_log=true: write the rows this fast refresh changed to a branch of the view's own
        change log, published after the view's commit (see own_log.py)."""
        ctx = self.ctx
        plan = run.plan
        assert plan.own_log is not None and run.changed_rows is not None and plan.view_read_at is not None
        staged = publish_phase.staged_snapshot(ctx, plan.view_relation, wap_id)
        if staged is None:
            return  # publish reports it
        written = own_log.write(
            ctx, plan.own_log, plan.view_relation, plan.view_read_at, staged.snapshot_id, run.changed_rows
        )
        if isinstance(written, str):
            run.own_log_note = f"{plan.own_log.log_relation} not written ({written})"
        else:
            run.pending_log = written

    def publish(self, view_relation: str, wap_id: str, run: RefreshRun | None = None) -> dict[str, str]:
        """Publish the staged commit as a compare-and-swap (see publish.py), then the rows
        written to the view's own log for it, if any."""
        ctx = self.ctx
        pending = getattr(run, "pending_log", None)
        try:
            summary = publish_phase.publish(ctx, view_relation, wap_id, run.write_branch if run is not None else None)
        except BaseException:
            if pending is not None:
                own_log.abandon(ctx, [pending])
            raise
        if run is not None and pending is not None:
            run.pending_log = None
            run.own_log_note = own_log.publish(ctx, pending)
        return summary

    # ---------------------------------------------------------------- report + purge
    def finish(
        self, run: RefreshRun, propagation: Propagation, graph: Mapping[str, Any], existing: Callable[[str], bool]
    ) -> str:
        """Purge what every view has consumed, compact the view when due; returns the model's one log line."""
        with run.clock.phase("purge"):
            line = self._finish(run, propagation, graph, existing)
        files = ViewFiles.of_summary(run.published_summary or {}, partitioned=bool(run.plan.partition_spec))
        if compact_phase.due(files, run.action, run.plan.config.auto_compact):
            assert files is not None  # (due)
            with run.clock.phase("compact"):
                table = self.ctx.metadata.table(run.plan.view_relation)
                if table is not None:
                    compacted = compact_phase.compact(
                        self.ctx, compact_phase.compaction(run.plan.view_relation, files, table)
                    )
                    line += f"; {compacted.line}"
                    run.compaction_failure = compacted.failure
        published = int((run.published_summary or {}).get(publish_phase.PUBLISHED_SNAPSHOT) or 0)
        if files is not None and expire_phase.checked(self.ctx.metadata.in_jvm, published):
            table = self.ctx.metadata.table(run.plan.view_relation)
            now_ms = int(time.time() * 1000)
            planned = expire_phase.expiry(run.plan.view_relation, table, now_ms, run.action) if table else None
            if planned is not None:
                with run.clock.phase("expire"):
                    expired = expire_phase.expire(self.ctx, planned)
                line += f"; {expired.line}"
                run.expiry_failure = expired.failure
        return line

    def _finish(
        self, run: RefreshRun, propagation: Propagation, graph: Mapping[str, Any], existing: Callable[[str], bool]
    ) -> str:
        plan = run.plan
        touched = self.touched_rows(run, propagation)
        if plan.own_log is not None:  # a log the view keeps starts with its first build
            created = own_log.ensure_exists(self.ctx, plan.own_log)
            if (
                created is None
                and run.own_log_note is None
                and propagation.steps
                and run.action not in (RefreshAction.FAST, RefreshAction.BUILD)
            ):
                created = (
                    f"{plan.own_log.log_relation} not written (a complete refresh: its readers capture the change)"
                )
            run.own_log_note = created or run.own_log_note
        purged = self.purge(run, propagation, graph, existing)
        if plan.retired_states and propagation.steps:  # the published commit no longer lists them
            line_dropped = self.drop_states(plan.retired_states)
            run.own_log_note = "; ".join(filter(None, [run.own_log_note, line_dropped]))
        line = (
            propagation.summary
            if run.action == RefreshAction.FAST
            else f"{run.action} ({run.reason}): {propagation.summary}"
        )
        if touched:
            line += f"; {touched}"
        if run.recomputed_groups is not None and not plan.config.refresh_stats:  # (the stats count them)
            line += f"; groups recomputed from the masters: {run.recomputed_groups}"
        if run.fallback is not None:
            line += f"; a changed group needed its masters: {run.fallback} ran instead"
        if run.own_log_note:
            line += f"; {run.own_log_note}"
        if purged:
            line += f"; purged {', '.join(purged)}"
        return line

    def drop_states(self, states: Sequence[str]) -> str:
        """Drop internal states the view no longer reads, and their logs; says what was dropped."""
        for state in states:
            for table in (state, state_log_relation(state)):
                self.ctx.execute(f"drop table if exists {relation(table)}")
                self.ctx.metadata.forget(table)
        return f"dropped the internal state{'s' if len(states) > 1 else ''} {', '.join(states)} it no longer reads"

    def touched_rows(self, run: RefreshRun, propagation: Propagation) -> str:
        """Rows the published commit inserted into and deleted from the view."""
        if not propagation.steps:
            return ""
        ctx = self.ctx
        plan = run.plan
        if any(step.kind is StepKind.CREATE for step in propagation.steps):
            # the table was built anew (its last commit is the empty bookkeeping one): its size
            ctx.metadata.forget(plan.view_relation)
            view = ctx.metadata.table(plan.view_relation)
            current = view.current if view is not None else None
            if current is not None and "total-records" in current.summary:
                return f"view rows: {current.count('total-records') - current.count('total-position-deletes')}"
            count = ctx.query(f"select count(*) from {relation(plan.view_relation)}")[0][0]
            return f"view rows: {int(count or 0)}"
        return publish_phase.view_rows_line(run.published_summary or {})

    def purge(
        self, run: RefreshRun, propagation: Propagation, graph: Mapping[str, Any], existing: Callable[[str], bool]
    ) -> list[str]:
        """Delete log rows that every dependent view has consumed. Returns what was purged."""
        if propagation.state is None:
            return []
        ctx = self.ctx
        plan = run.plan
        done: list[str] = []
        for spec in plan.logs.values():
            marked = propagation.marked.get(spec.master_relation)
            if (
                marked is not None
                and marked.upto == marked.consumed
                and (run.action == RefreshAction.FAST or marked.uncaptured)
            ):
                continue  # this view consumed nothing of the log: it cannot raise what every view consumed
            done += purge_log(
                ctx,
                spec,
                propagation.state,
                plan.view_relation,
                graph,
                existing,
                marked.log_snapshot if marked is not None else None,
            )
        return done

    def history_row(
        self, run: RefreshRun, propagation: Propagation, line: str, invocation_id: str
    ) -> history.HistoryRow:
        """The refresh history's row for this refresh (history.py), from what the phases kept."""
        return history.refresh_row(self.ctx, run, propagation, line, invocation_id)

    # ---------------------------------------------------------------- operations
    def on_commit(
        self,
        master_relation: str,
        graph: Mapping[str, Any],
        existing: Callable[[str], bool],
        commits: Sequence[int] | None = None,
    ) -> list[str]:
        return on_commit_phase.on_commit(self.ctx, master_relation, graph, existing, commits)

    def stored_definition(self, view: str, graph: Mapping[str, Any]) -> ViewDefinition | str:
        """The definition a view was built from, as a run would analyse it now (layout advice)."""
        return on_commit_phase.stored_definition(
            self.ctx, view, graph, clock=lambda: clock_phase.refresh_clock(self.ctx)
        )

    def explain(
        self, model: Mapping[str, Any], sql: str, view_relation: str, built: bool, graph: Mapping[str, Any]
    ) -> list[str]:
        return explain_phase.explain(self.ctx, model, sql, view_relation, built, graph).lines()

    def status(self, model: Mapping[str, Any], view_relation: str, graph: Mapping[str, Any]) -> staleness.ViewStatus:
        return status_phase.status(self.ctx, model, view_relation, graph)

    def capture(self, spec: LogSpec, logged: Sequence[str] | None, graph: Mapping[str, Any] | None = None) -> str:
        """Bring a capture-managed log up to its master's current snapshot; returns what it did.
        ``graph``: the project's, for the views reading the log (their capture stops)."""
        consumers = view_consumers(graph, spec.master_relation) if graph is not None else ()
        return capture_phase.capture(
            self.ctx, spec, logged, stops=capture_phase.consumers_stops(self.ctx, spec, consumers)
        ).reason

    def capture_plan(
        self, spec: LogSpec, snapshots: Mapping[str, int], position: LogPosition | None = None
    ) -> CapturePlan:
        return capture_phase.capture_plan(self.ctx, spec, snapshots, position)


@dataclass
class Refresh:
    """One model's refresh as the materialization drives it, call by call: the engine over the
    connection it was planned on (what it read of the metadata kept) and the record of its run."""

    engine: FastRefreshEngine
    run: RefreshRun

    @property
    def plan(self) -> RefreshPlan:
        return self.run.plan

    @property
    def action(self) -> str:
        return self.run.action

    @property
    def units(self) -> tuple[Unit, ...]:
        """A view maintained in steps: its states, then itself, each refreshed as a model of its
        own (refresh/units.py); () otherwise."""
        return self.run.plan.units

    def prepare(self) -> Propagation:
        """The refresh's phases in order, up to the steps that change the view: what is known
        before the capture (nothing changed since the last refresh: no write; under
        refresh_method='force', a complete refresh cheaper even before the capture, which it
        then skips), the capture and the mark, the view class's statement for the marked changes,
        the run's one decision (decide.py) and the steps it calls for."""
        ctx = self.engine.ctx
        run = self.run
        plan = run.plan
        # a fast refresh consumes from the state the staleness check accepted; its commit is made
        # on the view snapshot that state was read from, or not at all (publish)
        state = plan.view_state if plan.action == RefreshAction.FAST else None
        with run.clock.phase("mark"):
            idle = state is not None and nothing_to_refresh(ctx, plan, state)
            if idle and clock_phase.crossed_since(ctx, plan.definition, plan.moving_filters, plan.logs, state) is None:
                run.decide(RunFacts())
                return Propagation([], None, {}, IDLE)
            ctx.metadata.reset_staging()
            skipped, early = force.captures_to_skip(ctx, plan, state)
        with run.clock.phase("capture"):
            captured = capture_phase.capture_logs(ctx, plan, state, skipped)
        reads_changes = plan.action == RefreshAction.FAST and not (
            early is not None and early.method == RefreshAction.COMPLETE
        )
        with run.clock.phase("mark"):
            action = RefreshAction.FAST if reads_changes else RefreshAction.COMPLETE
            marked = mark_logs(ctx, plan, state, uncaptured=skipped, action=action)
        statement = propagate.propose(run, marked) if reads_changes else None
        crossed = late = None
        with run.clock.phase("mark"):
            if reads_changes:
                crossed = clock_phase.crossed_since(
                    ctx, plan.definition, plan.moving_filters, plan.logs, marked=marked.logs
                )
            if crossed is None and statement is not None and plan.config.refresh_method is RefreshMethod.FORCE:
                late = force.after_mark(ctx, plan, marked.logs, statement)
        run.decide(RunFacts(before_capture=early, log_reset=marked.log_reset, clock_crossed=crossed, after_mark=late))
        if skipped:
            captured.append(f"capture of {', '.join(plan.logs[m].master_name for m in sorted(skipped))} not needed")
        return propagate.emit(ctx, run, marked, plan.view_read_at if state is not None else None, captured, statement)


class _RefreshRunner:
    """A refresh's steps carried out (FastRefreshEngine.runner)."""

    def __init__(
        self,
        engine: FastRefreshEngine,
        run: RefreshRun,
        statement: Callable[[str], object],
        create: Callable[[str], str],
    ) -> None:
        self.engine, self.run, self.statement, self.create_sql = engine, run, statement, create

    def sql(self, step: Step) -> None:
        ran = run_sql_step(step, self.engine.ctx.query, self.statement)
        if ran.counted is not None:
            self.run.recomputed_groups = ran.counted
        if ran.fell_back and step.fallback is not None:
            self.run.fallback = step.fallback.in_words

    def create(self, step: Step) -> None:
        self.statement(self.create_sql(step.sql))

    def settings(self, step: Step) -> None:
        self.engine.ctx.metadata.apply_settings(step.settings)

    def uncache(self, step: Step) -> None:
        self.engine.ctx.metadata.drop_temp_view(step.temp_view)

    def publish(self, step: Step) -> None:
        assert step.wap_id is not None  # a publish step names its staged commit
        self.run.published_summary = self.engine.publish(self.run.plan.view_relation, step.wap_id, self.run)

    def own_log(self, step: Step) -> None:
        assert step.wap_id is not None
        self.engine.write_own_log(self.run, step.wap_id)
