"""On-commit refresh (Oracle 11gR2's): propagate just the named commits of one master to every
built fast_refresh view that reads it, each in one staged commit on the view."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dbt_incremental_mv.analysis import MasterTable, UnsupportedViewError, ViewDefinition, analyze_view
from dbt_incremental_mv.analysis.clock import Clock, sql_reads_clock
from dbt_incremental_mv.definition import DEFINITION_PROPERTY
from dbt_incremental_mv.logs.capture_plan import CaptureMethod
from dbt_incremental_mv.logs.contract import LogContractError, LogSpec, log_specs_from_graph, logs_by_master
from dbt_incremental_mv.refresh.context import RefreshContext, StatsRequest
from dbt_incremental_mv.refresh.graph import dependency_relations, model_node, view_consumers
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.phases import capture as capture_phase
from dbt_incremental_mv.refresh.phases.execute import execute_steps, run_sql_step
from dbt_incremental_mv.refresh.phases.publish import (
    Step,
    open_write_branch,
    publish,
    staged_statement,
    write_branch,
)
from dbt_incremental_mv.refresh.phases.purge import purge_log
from dbt_incremental_mv.refresh.state.bookkeeping import LogPosition, ViewState
from dbt_incremental_mv.refresh.state.view_state import view_state_at
from dbt_incremental_mv.refresh.views import view_classes


def commit_ids(commits: Sequence[Any]) -> tuple[int, ...]:
    """The commit ids named to refresh_on_commit, as integers (never pasted as text)."""
    if isinstance(commits, (str, bytes)):
        commits = [commits]
    ids = []
    for commit in commits:
        try:
            if isinstance(commit, bool) or (isinstance(commit, float) and not commit.is_integer()):
                raise ValueError
            ids.append(int(commit))
        except (TypeError, ValueError):
            raise LogContractError(
                f"refresh_on_commit: commit {commit!r} is not a commit id: name commits by their integer ids "
                "(an Iceberg snapshot id, or the _mv_commit your ingestion writes)."
            ) from None
    return tuple(ids)


def on_commit(
    ctx: RefreshContext,
    master_relation: str,
    graph: Mapping[str, Any],
    existing: Callable[[str], bool],
    commits: Sequence[int] | None = None,
) -> list[str]:
    """Propagate just the given commits of a master (default: the commits captured now) to
    every existing fast_refresh view that reads it."""
    all_logs = logs_by_master(log_specs_from_graph(graph))
    spec = all_logs.get(master_relation)
    if spec is None:
        raise LogContractError(
            f"refresh_on_commit: no change log is declared for {master_relation} (declare one with meta.mv_log)."
        )
    if spec.capture:
        captured = capture_phase.capture(
            ctx,
            spec,
            None,
            per_commit=True,
            stops=capture_phase.consumers_stops(ctx, spec, view_consumers(graph, master_relation)),
        )
        if captured.method is CaptureMethod.RESET:
            return [f"{captured.reason}: the views reading {spec.master_name} need a complete refresh (dbt run)"]
        if commits is None:
            commits = captured.commits
    elif commits is None:
        raise LogContractError(
            f"refresh_on_commit: the {spec.describe()} is written by your ingestion: name the commits "
            "to propagate, e.g. refresh_on_commit(commits=[...])."
        )
    if not commits:
        return [f"{spec.master_name}: no new commit to propagate"]
    return [
        _refresh_view(ctx, view, spec, commit_ids(commits), graph, all_logs, existing)
        for view in view_consumers(graph, master_relation)
        if existing(view)
    ]


def _refresh_view(
    ctx: RefreshContext,
    view: str,
    spec: LogSpec,
    commits: tuple[int, ...],
    graph: Mapping[str, Any],
    all_logs: Mapping[str, LogSpec],
    existing: Callable[[str], bool],
) -> str:
    meta = ctx.metadata
    state, read_at = view_state_at(meta, view)
    position = state.logs.get(spec.log_relation) if state else None
    if state is not None and state.states and position is None:
        return f"{view}: skipped (it is maintained in steps, which are refreshed by dbt run, not on commit)"
    if state is None or position is None:
        return f"{view}: skipped, it has no record of its logs (the next dbt run refreshes it completely)"
    definition = stored_definition(ctx, view, graph, all_logs)
    if isinstance(definition, str):
        return f"{view}: skipped ({definition})"
    if view_classes.blocker(definition):
        return f"{view}: skipped (on-commit refresh of {definition.view_class.value} views is not available yet)"
    masters = sorted({o.master.name for o in definition.occurrences})
    snapshots = meta.mains(sorted({*masters, spec.log_relation}))
    marked = {}
    for master in masters:
        log = all_logs[master]
        if master != spec.master_relation:
            marked[master] = MarkedLog(log, 0, 0, 0, 0, 0, snapshots[master])
            continue
        stats = ctx.stats(
            StatsRequest(spec, snapshots.get(spec.log_relation), position.sequence, tuple(position.commits), commits)
        )[0]
        # A captured commit id is the master's snapshot id: read the master as of the newest
        # named commit, so later commits do not leak in. Ingestion-written logs: as of now.
        as_of = snapshots[master]
        if spec.capture:
            master_table = meta.table(master)
            assert master_table is not None  # it has a main snapshot (snapshots[master] above)
            lineage = [s.snapshot_id for s in reversed(master_table.ancestry())]
            as_of = next((c for c in reversed(lineage) if c in commits), snapshots[master])
        marked[master] = MarkedLog(
            spec=spec,
            log_snapshot=snapshots.get(spec.log_relation, 0),
            consumed=position.sequence,
            upto=max(stats["max_sequence"], position.sequence),
            inserts=int(stats["inserts"]),
            deletes=int(stats["deletes"]),
            master_snapshot=as_of,
            excluded=position.commits,
            only=commits,
        )
    statement = view_classes.refresh_statement(definition, view, marked, dict(meta.columns(view)), write_branch())
    if statement is None:
        return f"{view}: nothing of commit(s) {', '.join(map(str, commits))} to propagate"
    logs = dict(state.logs)
    logs[spec.log_relation] = LogPosition(
        position.sequence,
        marked[spec.master_relation].master_snapshot,
        tuple(sorted({*position.commits, *commits})),
        position.log_snapshot,
    )
    new_state = ViewState(
        logs=logs,
        method="on-commit",
        base=read_at,
        run=secrets.token_hex(6),
        states=state.states,
        changes=state.changes,
    )
    if statement.branch is not None:
        open_write_branch(ctx, view, statement.branch, read_at)
    try:  # the steps the materialization runs, by the same loop
        execute_steps(staged_statement(new_state, statement), _OnCommitRunner(ctx, view, statement.branch))
    except Exception:
        ctx.metadata.reset_staging()  # a failed staged write leaves no wap.id set behind
        for cached in statement.cached:  # ... nor cached data in the session
            ctx.metadata.drop_temp_view(cached.name)
        raise
    purged = purge_log(ctx, spec, new_state, view, graph, existing, snapshots.get(spec.log_relation))
    kind = marked[spec.master_relation].kind
    return (
        f"{view}: on-commit refresh of {spec.master_name} commit(s) {', '.join(map(str, commits))}: "
        f"{kind}; steps run: {', '.join(statement.steps_run)}" + (f"; purged {', '.join(purged)}" if purged else "")
    )


class _OnCommitRunner:
    """An on-commit refresh's steps carried out (execute.py): statements, settings and cached
    views dropped through the context, the staged commit published as a compare-and-swap."""

    def __init__(self, ctx: RefreshContext, view: str, branch: str | None) -> None:
        self.ctx, self.view, self.branch = ctx, view, branch

    def sql(self, step: Step) -> None:
        run_sql_step(step, self.ctx.query, self.ctx.execute)

    def settings(self, step: Step) -> None:
        self.ctx.metadata.apply_settings(step.settings)

    def uncache(self, step: Step) -> None:
        self.ctx.metadata.drop_temp_view(step.temp_view)

    def create(self, step: Step) -> None:
        raise AssertionError("an on-commit refresh never creates the view")

    def publish(self, step: Step) -> None:
        assert step.wap_id is not None  # a publish step names its staged commit
        publish(self.ctx, self.view, step.wap_id, self.branch)

    def own_log(self, step: Step) -> None:
        raise AssertionError("an on-commit refresh writes no own log")


def stored_definition(
    ctx: RefreshContext,
    view: str,
    graph: Mapping[str, Any],
    all_logs: Mapping[str, LogSpec] | None = None,
    clock: Callable[[], Clock] | None = None,
) -> ViewDefinition | str:
    """The analysed definition a view was built from (its table property), or why not; a view
    that reads the clock is analysed at the time ``clock`` reads (None: not analysed, an on-commit
    refresh)."""
    if all_logs is None:
        all_logs = logs_by_master(log_specs_from_graph(graph))
    table = ctx.metadata.table(view)
    sql = table.properties.get(DEFINITION_PROPERTY) if table is not None else None
    if sql is None:
        return "it was not built by this plugin version (no stored definition)"
    node = model_node(graph, view)
    if node is None:
        return "it is not a model of this project"
    masters = dependency_relations(node, graph)
    missing = [m for m in masters if m not in all_logs]
    if missing:
        return f"no change log is declared for {', '.join(missing)}"
    now = None
    if sql_reads_clock(sql):  # its time is fixed by the run (refresh/phases/clock.py)
        if clock is None:
            return "it reads the clock: dbt run refreshes it"
        now = clock()
    tables = {m: MasterTable(name=m, columns=tuple(ctx.metadata.columns(m)), key=all_logs[m].key) for m in masters}
    try:
        return analyze_view(sql, tables, now)
    except UnsupportedViewError as exc:
        return str(exc)
