"""mv_status: a built view's state (fresh, stale, needs rebuild, unusable) and why. Reads only:
the plan's checks, the logs' unconsumed rows and what a capture would do; nothing captured."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from dbt_incremental_mv.config import ConfigError
from dbt_incremental_mv.definition import defining_query
from dbt_incremental_mv.layout import ViewFiles
from dbt_incremental_mv.logs.capture_plan import CaptureMethod
from dbt_incremental_mv.logs.contract import LogContractError
from dbt_incremental_mv.refresh.context import RefreshContext, StatsRequest
from dbt_incremental_mv.refresh.phases import clock as clock_phase
from dbt_incremental_mv.refresh.phases.capture import capture_plan
from dbt_incremental_mv.refresh.phases.decide import RefreshAction
from dbt_incremental_mv.refresh.phases.plan import plan_refresh
from dbt_incremental_mv.refresh.state import staleness
from dbt_incremental_mv.refresh.state.view_state import view_state
from dbt_incremental_mv.refresh.units import Unit
from dbt_incremental_mv.view_table import partitioned


def status(
    ctx: RefreshContext, model: Mapping[str, Any], view_relation: str, graph: Mapping[str, Any]
) -> staleness.ViewStatus:
    """The view's staleness, and whether its files are due for compaction (layout.ViewFiles)."""
    found = _staleness(ctx, model, view_relation, graph)
    files = ViewFiles.of(ctx.metadata.table(view_relation), partitioned(model.get("config") or {}))
    if files is None or not files.compaction_due or found.compaction:  # (a view in steps: its units said)
        return found
    return replace(found, compaction=f"{files.describe()}: a full scan opens and applies them all")


def _staleness(
    ctx: RefreshContext, model: Mapping[str, Any], view_relation: str, graph: Mapping[str, Any]
) -> staleness.ViewStatus:
    name = str(model.get("name", "?"))
    # run-operation does not compile models: compare with the stored definition then (only
    # master column changes show; an edited model shows at its next run)
    view = ctx.metadata.table(view_relation)
    sql = model.get("compiled_code") or (defining_query(view.properties) if view is not None else None)
    if sql is None:
        return staleness.view_status(
            name, built=True, unusable="not built by this plugin version: run dbt run --full-refresh"
        )
    decide_only = {**(model.get("config") or {}), "refresh_method": "force", "on_configuration_change": "apply"}
    try:
        plan = plan_refresh(ctx, {**model, "config": decide_only}, sql, view_relation, "table", False, graph)
    except (ConfigError, LogContractError) as exc:
        return staleness.view_status(name, built=True, unusable=str(exc))
    if plan.action == RefreshAction.IN_STEPS:
        return _in_steps(ctx, name, plan.units)
    if plan.action == RefreshAction.BUILD:
        return staleness.view_status(
            name, built=True, rebuild=[plan.reason.removesuffix(": rebuilding the view in full")]
        )
    if plan.facts.out_of_step is not None:
        return staleness.view_status(name, built=True, rebuild=[plan.facts.out_of_step])
    if plan.facts.clock_moved is not None:
        return staleness.view_status(name, built=True, rebuild=[plan.facts.clock_moved])
    if plan.action != RefreshAction.FAST:
        return staleness.view_status(name, built=True, unusable=plan.reason.removeprefix("fast refresh impossible: "))
    state = view_state(ctx.metadata, view_relation)
    assert state is not None  # plan_refresh() checked it
    rebuild: list[str] = []
    pending: list[staleness.PendingChanges] = []
    for spec in plan.logs.values():
        position = state.logs[spec.log_relation]
        snapshots = ctx.metadata.mains([spec.log_relation, spec.master_relation])
        if position.uncaptured:  # recomputed past the log: pending is what came after that snapshot
            pending.append(_pending_past_log(ctx, spec, position, snapshots, rebuild))
            continue
        stats = ctx.stats(
            StatsRequest(spec, snapshots.get(spec.log_relation), position.sequence, tuple(position.commits))
        )[0]
        uncaptured = 0
        if spec.capture:
            capture = capture_plan(ctx, spec, snapshots, per_commit=True)  # counts the commits
            uncaptured = len(capture.commits)
            if capture.method is CaptureMethod.RESET:
                rebuild.append(f"the history of {spec.master_name} was rewritten or expired before it was captured")
        if stats["reset_sequence"] is not None and stats["reset_sequence"] > position.sequence:
            rebuild.append(f"the history of {spec.master_name} was rewritten or expired before it was captured")
        pending.append(
            staleness.PendingChanges(
                spec.master_relation, int(stats["inserts"] or 0) + int(stats["deletes"] or 0), uncaptured
            )
        )
    crossed = None
    if plan.moving_filters and plan.definition is not None:  # rows the time moved across (the masters as they are)
        crossing = clock_phase.crossed_rows(ctx, plan.definition, plan.moving_filters, {})
        if crossing is not None and not plan.facts.crossings_applied:
            rebuild.append(f"{crossing.reason} since the time its rows reflect")
        elif crossing is not None:
            crossed = f"{crossing.reason} since the time its rows reflect: the next run applies them"
    return staleness.view_status(name, built=True, rebuild=rebuild, pending=pending, crossed=crossed)


# the more severe first: a view maintained in steps stands as the worst of its units
_SEVERITY = (staleness.Staleness.UNUSABLE, staleness.Staleness.NEEDS_REBUILD, staleness.Staleness.STALE)


def _in_steps(ctx: RefreshContext, name: str, units: Sequence[Unit]) -> staleness.ViewStatus:
    """A view maintained in steps (refresh/units.py): the worst state among its internal states
    and itself, each unit's said."""
    found: list[tuple[str, staleness.ViewStatus]] = []
    for unit in units:
        if ctx.metadata.table(unit.relation) is None:
            return staleness.view_status(
                name, built=True, rebuild=[f"its internal state {unit.relation} is not built (maintained in steps)"]
            )
        found.append((unit.identifier, status(ctx, unit.model, unit.relation, unit.graph)))
    worst = next((level for level in _SEVERITY if any(s.status is level for _, s in found)), staleness.Staleness.FRESH)
    detail = "; ".join(
        f"{identifier}: {s.status}" + (f" ({s.detail})" if s.detail else "")
        for identifier, s in found
        if s.status is not staleness.Staleness.FRESH
    )
    compaction = "; ".join(f"{identifier}: {s.compaction}" for identifier, s in found if s.compaction)
    return staleness.ViewStatus(name, worst, detail, compaction)


def _pending_past_log(ctx: RefreshContext, spec, position, snapshots, rebuild: list[str]) -> staleness.PendingChanges:
    """The changes pending for a view recomputed without capturing its log (LogPosition.uncaptured):
    the master commits after the snapshot it reflects, logged (after the log's watermark there)
    or not captured yet."""
    reflected = position.master_snapshot
    stats = ctx.stats(
        StatsRequest(
            spec, snapshots.get(spec.log_relation), position.sequence, tuple(position.commits), resume_at=reflected
        )
    )[0]
    master = ctx.metadata.table(spec.master_relation)
    if stats["resume_sequence"] is None:  # no watermark at that snapshot
        captured = stats["captured_through"]
        if (
            master is not None
            and captured is not None
            and captured != reflected
            and reflected in {s.snapshot_id for s in master.ancestry(captured)}
        ):
            rebuild.append(
                f"the change log of {spec.master_name} was captured past master snapshot {reflected}, which the "
                "view reflects since a complete refresh, in one piece"
            )
            return staleness.PendingChanges(spec.master_relation, 0, 0)
        since = master.commits_since(reflected) if master is not None else None
        if since is None:
            rebuild.append(f"the history of {spec.master_name} was rewritten or expired before it was captured")
            return staleness.PendingChanges(spec.master_relation, 0, 0)
        return staleness.PendingChanges(spec.master_relation, 0, len(since))
    logged = ctx.stats(StatsRequest(spec, snapshots.get(spec.log_relation), int(stats["resume_sequence"])))[0]
    capture = capture_plan(ctx, spec, snapshots, per_commit=True)
    return staleness.PendingChanges(
        spec.master_relation, int(logged["inserts"] or 0) + int(logged["deletes"] or 0), len(capture.commits)
    )
