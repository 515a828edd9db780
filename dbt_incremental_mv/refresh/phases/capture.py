"""Capture: bring capture-managed change logs up to their masters' current snapshots.

What a capture does is decided by ``logs/capture_plan.py`` (changelog scan, snapshot difference, or
reset); here it is committed. A capture appends to a branch made from the log snapshot it was
decided on, then main is fast-forwarded to it as a compare-and-swap (with the capture property,
in session mode in the same metadata commit): two processes never append a change twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from dbt_incremental_mv.conflicts import lost_race
from dbt_incremental_mv.logs import properties as log_properties
from dbt_incremental_mv.logs import sql as log_sql
from dbt_incremental_mv.logs.capture_plan import (
    CaptureMethod,
    CapturePlan,
    Reflected,
    SnapshotInfo,
    broadcast_gone_ids,
    plan_capture,
)
from dbt_incremental_mv.logs.contract import LogContractError, LogSpec, log_evolution
from dbt_incremental_mv.process_state import PROCESS
from dbt_incremental_mv.refresh.context import RefreshContext, StatsRequest
from dbt_incremental_mv.refresh.phases.plan import RefreshPlan
from dbt_incremental_mv.refresh.state.bookkeeping import LogPosition, ViewState
from dbt_incremental_mv.refresh.state.view_state import consumer_states

# A capture that loses the race to a concurrent capture or purge decides again, this many times.
CAPTURE_ATTEMPTS = 5

Stops = Callable[[], Reflected]  # read only when there is something to capture


def capture_logs(ctx: RefreshContext, plan: RefreshPlan, state: ViewState | None, skipped: frozenset[str]) -> list[str]:
    """A refresh's capture: every capture-managed log of the view but those of the masters in
    ``skipped`` (force found their capture not needed); what each capture did, for the log line."""
    captured = []
    for spec in plan.logs.values():
        if spec.capture and spec.master_relation not in skipped:
            # what the log's other views reflect past it (read only when there is something to capture)
            stops = consumers_stops(
                ctx, spec, plan.log_consumers.get(spec.log_relation, ()), {plan.view_relation: state}
            )
            done = capture(
                ctx,
                spec,
                plan.logged_columns.get(spec.log_relation),
                spec.log_relation in plan.log_evolutions,
                exists=spec.log_relation in plan.existing_logs and spec.log_relation not in plan.log_evolutions,
                position=state.logs.get(spec.log_relation) if state is not None else None,
                stops=stops,
            )
            if done.method.captures:
                captured.append(f"captured {done.reason}")
    return captured


def capture(
    ctx: RefreshContext,
    spec: LogSpec,
    logged: Sequence[str] | None,
    evolve: bool = False,
    exists: bool = False,
    position: LogPosition | None = None,
    per_commit: bool = False,
    stops: Stops | None = None,
) -> CapturePlan:
    """Capture, and return what was captured (the commits, oldest first). ``logged``: the
    master columns the log holds, as planned (None: read them, and evolve the log if its
    master's schema changed); ``evolve``: the plan found the log needs evolving; ``exists``:
    the plan found the log (not looked up again); ``position``: what the refreshing view
    consumed (its log counts are read with the capture's when the log must be read);
    ``per_commit``: attribute each change to its own commit where the history allows it (an
    on-commit refresh names commits), rather than read the changed data files once; ``stops``:
    what the views of the log reflect past it (consumers_stops; read only when there is
    something to capture): the capture ends at each such master snapshot it passes, with a
    watermark there, and goes on from it; changes no view needs are not read (logs/capture_plan.py)."""
    with PROCESS.capture_locks.of(spec.log_relation):  # process_state.py says why
        # what this refresh read of the log may predate the lock: another thread may have
        # created, evolved or captured into it meanwhile
        ctx.metadata.forget(spec.log_relation, spec.master_relation)
        if logged is None or evolve:
            logged = _evolve_log(ctx, spec)
            exists = logged is not None
        return _capture(ctx, spec, logged, exists, position, per_commit, stops)


def _evolve_log(ctx: RefreshContext, spec: LogSpec) -> list[str] | None:
    """Make the log match its master's schema again if it no longer does (LogEvolution);
    returns the master columns it logs (None: it does not exist, or was dropped to be
    recreated). Decided again here, under the capture lock, so a change another refresh
    already made is not made twice."""
    meta = ctx.metadata
    meta.forget(spec.log_relation, spec.master_relation)
    log_columns = dict(meta.columns(spec.log_relation))
    if not log_columns:
        return None
    evolution = log_evolution(log_columns, dict(meta.columns(spec.master_relation)))
    if evolution is not None:
        for statement in log_sql.evolve_log(spec, evolution):
            ctx.execute(statement)
        meta.forget(spec.log_relation)
        if evolution.recreate:
            return None
        log_columns = evolution.evolved(log_columns)
    return [c for c in log_columns if not c.startswith("_mv_")]


def _capture(
    ctx: RefreshContext,
    spec: LogSpec,
    logged: Sequence[str] | None,
    exists: bool = False,
    position: LogPosition | None = None,
    per_commit: bool = False,
    stops: Stops | None = None,
) -> CapturePlan:
    meta = ctx.metadata
    if logged is None or not (exists or meta.columns(spec.log_relation)):
        return _create_log(ctx, spec)
    done: list[CapturePlan] = []  # one per segment (a capture ends at each stop it passes)
    attempt = 0
    while True:
        attempt += 1
        if attempt > 1 or done:
            meta.forget(spec.log_relation, spec.master_relation)
        snapshots = meta.mains([spec.log_relation, spec.master_relation])
        plan = capture_plan(ctx, spec, snapshots, position, per_commit, stops)
        if plan.method is CaptureMethod.NONE:
            break
        read = _commit_capture(ctx, spec, logged, plan, snapshots[spec.log_relation])
        if read is None:  # lost the race
            if attempt == CAPTURE_ATTEMPTS:  # every time: let the next refresh capture
                raise LogContractError(
                    f"capture into {spec.log_relation} lost {CAPTURE_ATTEMPTS} races to concurrent commits "
                    "on the log; rerun the refresh"
                )
            continue
        done.append(replace(plan, reason=f"{plan.reason}: {read}") if read else plan)
        if plan.end == snapshots.get(spec.master_relation):
            break
        attempt = 0  # stopped at a view's snapshot: the next segment
    if not done:
        return CapturePlan(
            plan.method, plan.start, plan.end, f"{spec.log_relation}: {plan.method} ({plan.reason})", plan.commits
        )
    reasons = [
        f"{p.method} ({p.reason})"
        + (f", stopped at master snapshot {p.end} (a view reflects it)" if p is not done[-1] else "")
        for p in done
    ]
    return CapturePlan(
        done[-1].method,
        done[0].start,
        done[-1].end,
        f"{spec.log_relation}: {'; then '.join(reasons)}",
        tuple(c for p in done for c in p.commits),
    )


def _create_log(ctx: RefreshContext, spec: LogSpec) -> CapturePlan:
    """Create the log, with a watermark at the master's current snapshot (capture starts there)."""
    meta = ctx.metadata
    master_columns = meta.columns(spec.master_relation)
    ctx.execute(log_sql.create_log(spec, master_columns))
    logged = [c for c, _ in master_columns]
    current = meta.main(spec.master_relation)
    ctx.execute(log_sql.watermark_row(spec, logged, current))
    meta.forget(spec.log_relation)
    if meta.in_jvm and current is not None:
        head = meta.main(spec.log_relation)
        assert head is not None  # the watermark row was just committed to the log
        try:  # vouch for the watermark just written (a no-op move of main, with the property)
            meta.fast_forward(
                spec.log_relation, head, to_snapshot=head, properties=log_properties.capture_property(current, head)
            )
        except Exception as exc:  # noqa: BLE001 - another commit came first: the watermark row is read instead
            if not lost_race(exc):
                raise
    return CapturePlan(
        CaptureMethod.NONE, current, current, f"created {spec.log_relation}, capturing from master snapshot {current}"
    )


def capture_plan(
    ctx: RefreshContext,
    spec: LogSpec,
    snapshots: Mapping[str, int],
    position: LogPosition | None = None,
    per_commit: bool = False,
    stops: Stops | None = None,
) -> CapturePlan:
    """What a capture of an existing log would do now (reads only): the log's capture property
    says how far it is captured; without it (or when it no longer holds) one count of the log.
    The changed data files are read (method ``files``) in session mode unless ``per_commit``."""
    current = snapshots.get(spec.master_relation)
    log = ctx.metadata.table(spec.log_relation)
    vouched = log_properties.captured_through(log) if log is not None else None
    if vouched is not None:
        captured_through, has_watermark = vouched.master_snapshot, True
    else:
        stats = ctx.stats(
            StatsRequest(
                spec,
                snapshots.get(spec.log_relation),
                position.sequence if position else 0,
                tuple(position.commits) if position else (),
            )
        )[0]
        captured_through, has_watermark = stats["captured_through"], stats["watermarks"] > 0
    if current is None or (has_watermark and captured_through == current):
        return plan_capture(captured_through, has_watermark, current, [])  # no history needed
    master = ctx.metadata.table(spec.master_relation)
    lineage = [
        SnapshotInfo(
            s.snapshot_id,
            s.parent_id,
            s.count("added-delete-files"),
            s.count("total-delete-files"),
            s.schema_id,
            s.operation,
        )
        for s in (master.snapshots.values() if master is not None else ())
    ]
    return plan_capture(
        captured_through,
        has_watermark,
        current,
        lineage,
        by_files=ctx.metadata.in_jvm and not per_commit,
        row_lineage=master is not None and (master.format_version or 0) >= 3,
        reflected=stops() if stops is not None else Reflected(),
    )


def _commit_capture(
    ctx: RefreshContext, spec: LogSpec, logged: Sequence[str], plan: CapturePlan, log_snapshot: int
) -> str | None:
    """Append the captured changes to the log as a compare-and-swap: written to a branch made
    from the log snapshot the capture was decided on, then main is fast-forwarded to it, which
    fails if anything else (another process's capture, a purge) committed to the log meanwhile
    (returns None: decide again; else what was read, for the log line). (A process killed
    mid-capture leaves its branch behind: ``alter table <log> drop branch mv_capture_...``.)"""
    meta = ctx.metadata
    digest = uuid.uuid4().hex[
        :16
    ]  # unique per attempt: a branch shared by two racing processes could take both appends
    branch = f"mv_capture_{digest}"
    committed = False
    read = ""
    try:
        meta.create_branch(spec.log_relation, branch, log_snapshot)
        if plan.method is CaptureMethod.CHANGELOG:
            assert plan.end is not None  # a plan that reads changes ends at a master snapshot
            view = f"mv_changes_{digest}"
            ctx.execute(log_sql.changelog_view(spec, view, plan.start, plan.end))
            try:
                ctx.execute(log_sql.capture_from_changelog(spec, logged, view, plan.end, branch))
            finally:
                meta.drop_temp_view(view)
        elif plan.method is CaptureMethod.FILES:
            assert plan.start is not None and plan.end is not None
            with meta.changed_files(spec.master_relation, plan.start, plan.end) as changed:
                if changed is not None:
                    read = changed.describe()
                    broadcast = broadcast_gone_ids(changed.rows_gone_at_most)
                    if broadcast:
                        read += f" (at most {changed.rows_gone_at_most:,} rows gone: found by their ids first)"
                    ctx.execute(
                        log_sql.capture_by_files(
                            spec,
                            logged,
                            changed.removed_view,
                            changed.added_view,
                            plan.end,
                            branch,
                            lineage_since=changed.lineage_since,
                            written_view=changed.written_view,
                            gone_ids_broadcast=broadcast,
                        )
                    )
                else:  # the files cannot be staged (e.g. the schema changed since): both snapshots are read
                    read = "read by a scan of both snapshots instead"
                    ctx.execute(log_sql.capture_by_diff(spec, logged, plan.start, plan.end, branch))
        elif plan.method is CaptureMethod.DIFF:
            assert plan.end is not None  # a plan that reads changes ends at a master snapshot
            ctx.execute(log_sql.capture_by_diff(spec, logged, plan.start, plan.end, branch))
        elif plan.method in (CaptureMethod.SKIP, CaptureMethod.REWRITTEN):  # a watermark stands for the commits
            ctx.execute(log_sql.watermark_row(spec, logged, plan.end, branch=branch))
        else:  # reset
            ctx.execute(log_sql.watermark_row(spec, logged, plan.end, reset=True, branch=branch))
        properties = None
        if meta.in_jvm and plan.end is not None:
            meta.forget(spec.log_relation)
            head = meta.branch_head(spec.log_relation, branch)
            if head is not None:
                properties = log_properties.capture_property(plan.end, head)
        meta.fast_forward(spec.log_relation, log_snapshot, branch=branch, properties=properties)
        committed = True
        return read
    except Exception as exc:
        if not lost_race(exc):
            raise
        return None  # another commit on the log won (its capture or purge): decide again
    finally:
        meta.forget(spec.log_relation)
        if not committed:
            meta.drop_branch(spec.log_relation, branch)


def reflected(spec: LogSpec, states: Iterable[ViewState | None]) -> Reflected:
    """What the views with these states reflect of the log's master past the log (a complete
    refresh that skipped the capture: bookkeeping.LogPosition.uncaptured)."""
    stops, positions, all_past = set(), 0, True
    for state in states:
        position = state.logs.get(spec.log_relation) if state is not None else None
        if position is None:  # not built, or no record: its next refresh recomputes it
            continue
        positions += 1
        if position.uncaptured and position.master_snapshot is not None:
            stops.add(position.master_snapshot)
        else:
            all_past = False
    return Reflected(frozenset(stops), all_past and positions > 0)


def consumers_stops(
    ctx: RefreshContext, spec: LogSpec, views: Sequence[str], known: Mapping[str, ViewState | None] | None = None
) -> Stops:
    """What the views reading a log (``views``) reflect past it, their states read when asked
    (only when there is something to capture); ``known``: states already read, by view."""
    known = known or {}

    def read() -> Reflected:
        return reflected(
            spec,
            (
                state
                for view in views
                for state in ([known[view]] if view in known else consumer_states(ctx.metadata, view))
            ),
        )

    return read
