"""explain_fast_refresh: what the next refresh of one view would do, without doing it (Oracle's
DBMS_MVIEW.EXPLAIN_MVIEW, and the statements of its refresh traces).

Read-only: the plan's checks, metadata, and for a built view the counts of its logs (one read);
nothing is captured, staged, written or purged. Works for a model not built yet (its first run
builds it; the statements of a later fast refresh are shown as they would be).

The report: the view's class; every reason it cannot be fast refreshed (all of them, each with
what to change); what the next ``dbt run`` would do and why; the estimate refresh_method='force'
decides by; the statements of each phase (capture, mark, write, publish, purge); layout advice.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dbt_incremental_mv.analysis import MasterTable, ViewClass, ViewDefinition, analyze_view, functions
from dbt_incremental_mv.analysis.analyze import (
    construct_refusals,
    ignored_order,
    ordered_by_value,
    outer_joins_made_inner,
)
from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.model import OutputKind, Ranking
from dbt_incremental_mv.config import ConfigError, RefreshMethod
from dbt_incremental_mv.layout import ViewFiles, layout_advice
from dbt_incremental_mv.logs import sql as log_sql
from dbt_incremental_mv.logs.capture_plan import CaptureMethod, CapturePlan
from dbt_incremental_mv.logs.contract import LogContractError, LogSpec
from dbt_incremental_mv.refresh import cost
from dbt_incremental_mv.refresh.context import RefreshContext, StatsRequest
from dbt_incremental_mv.refresh.graph import dependency_names
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.phases import expire as expire_phase
from dbt_incremental_mv.refresh.phases import force
from dbt_incremental_mv.refresh.phases.capture import capture_plan, consumers_stops
from dbt_incremental_mv.refresh.phases.decide import RefreshAction
from dbt_incremental_mv.refresh.phases.execute import Listing, execute_steps
from dbt_incremental_mv.refresh.phases.mark import (
    key_probe,
    mark_logs,
    netting_columns,
    nothing_to_refresh,
    plan_patched_by,
    relevant_images,
)
from dbt_incremental_mv.refresh.phases.plan import RefreshPlan, plan_refresh
from dbt_incremental_mv.refresh.phases.publish import commit_state, staged_statement
from dbt_incremental_mv.refresh.state.bookkeeping import ViewState
from dbt_incremental_mv.refresh.views import outer_aggregate, view_classes
from dbt_incremental_mv.sql_text import relation

PREFIX = "cannot fast refresh: "


@dataclass
class Explanation:
    model: str
    view_relation: str
    built: bool
    view_class: str | None = None
    clock: str | None = None  # how the view depends on the time, when its query reads the clock
    masters: list[str] = field(default_factory=list)  # each master with its log and key, and where the key is from
    refusals: list[str] = field(default_factory=list)  # every reason, each with what to change
    split: str | None = None  # how a refused query is fast refreshed in steps (analysis/states.py)
    next_run: str = ""  # what the next dbt run does, and why
    cost: str | None = None  # the estimates force decides by, and its choice
    files: str | None = None  # a built view's files, and when a refresh compacts them (compact.py)
    history: str | None = None  # a built view's snapshots, and when a refresh expires them (expire.py)
    indexed: str | None = None  # a join view that could keep an indexed join state: whether it does, why
    phases: list[tuple[str, list[str]]] = field(default_factory=list)  # (phase, statements or -- notes)
    layout: list[str] = field(default_factory=list)
    # a view maintained in steps: the explanation of each of its units (its states, then itself)
    steps: list[Explanation] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"-- explain_fast_refresh: {self.model} ({self.view_relation}{'' if self.built else ', not built yet'})"]
        out.append(f"view class: {self.view_class or 'none (the definition cannot be analysed)'}")
        if self.clock:
            out.append(f"clock: {self.clock}")
        if self.refusals:
            out.append(f"fast refreshable: no ({len(self.refusals)} reason{'s' if len(self.refusals) != 1 else ''})")
            out += [f"  {i}. {reason}" for i, reason in enumerate(self.refusals, 1)]
            if self.split:
                out.append(f"  {self.split}")
        else:
            out.append("fast refreshable: yes")
        out.append(f"next dbt run: {self.next_run}")
        if self.cost:
            out.append(f"cost: {self.cost}")
        if self.files:
            out.append(f"files: {self.files}")
        if self.history:
            out.append(f"history: {self.history}")
        if self.indexed:
            out.append(f"indexed state: {self.indexed}")
        out += [f"master {line}" for line in self.masters]
        for phase, statements in self.phases:
            out += ["", f"-- {phase}"]
            out += [s if s.startswith("--") else f"{s.rstrip(';')};" for s in statements]
        if self.layout:
            out += ["", "-- layout advice (not run): write orders that let Iceberg skip files in the refresh"]
            out += [f"{s};" for s in self.layout]
        for number, step in enumerate(self.steps, 1):
            out += ["", f"-- step {number} of {len(self.steps)}"] + step.lines()
        return out


def explain(
    ctx: RefreshContext, model: Mapping[str, Any], sql: str, view_relation: str, built: bool, graph: Mapping[str, Any]
) -> Explanation:
    name = str(model.get("name", "?"))
    found = Explanation(name, view_relation, built)
    config = model.get("config") or {}
    method = str(config.get("refresh_method") or RefreshMethod.FORCE).lower()
    # decided as force (a refresh_method='fast' view that cannot be fast refreshed is explained,
    # not refused) and with definition changes applied
    decide_only = {
        **config,
        "refresh_method": RefreshMethod.COMPLETE if method == RefreshMethod.COMPLETE else RefreshMethod.FORCE,
        "on_configuration_change": "apply",
    }
    try:
        plan = plan_refresh(
            ctx, {**model, "config": decide_only}, sql, view_relation, "table" if built else None, False, graph
        )
    except (ConfigError, LogContractError) as exc:
        found.refusals = [str(exc)]
        found.next_run = "fails before anything is changed (above)"
        return found
    found.masters = [
        f"{spec.master_name}: log {spec.log_relation} ({'captured by the plugin' if spec.capture else 'written by its ingestion'}), "
        f"key ({', '.join(spec.key)}) from {spec.key_origin or 'its declaration'}{_dropped(plan, spec)}"
        f"{_patched(plan, spec)}"
        for _, spec in sorted(plan.logs.items())
    ]
    found.indexed = plan.indexed.reason if plan.indexed is not None else None
    if plan.action == RefreshAction.IN_STEPS:
        return _in_steps(ctx, found, plan)
    found.refusals = refusals(ctx, plan, model, sql, graph)
    if found.refusals:
        found.split = plan.split_advice
    definition = plan.definition
    found.view_class = _class_of(definition) if definition is not None else None
    order = ignored_order(sql) if found.view_class is not None else None
    if found.view_class is not None and order is not None:
        found.view_class += f" ({order}: ignored, a table keeps no order; sort when reading the view)"
    made_inner = outer_joins_made_inner(sql) if found.view_class is not None else []
    if found.view_class is not None and made_inner:
        found.view_class += (
            f" ({', '.join(made_inner)} read as inner: a condition no NULL satisfies discards the rows it null-extends)"
        )
    if plan.now is not None:
        found.clock = _clock_prose(plan)
    found.next_run = plan.action if plan.action == RefreshAction.FAST else f"{plan.action} ({plan.reason})"
    if method == RefreshMethod.FAST and found.refusals:
        found.next_run = "fails before anything is changed: refresh_method='fast' and the view cannot be fast refreshed"
    if definition is not None:
        found.layout = layout_advice(definition, view_relation)
    found.files = _files(ctx, plan) if built else None
    found.history = _history(ctx, plan) if built else None
    if plan.action != RefreshAction.FAST:
        found.phases.append((plan.action, [_recompute(plan)]))
        if definition is not None and not found.refusals:
            found.phases += _fast_phases(
                ctx, plan, None, _provisional(ctx, plan, None), "once built, a fast refresh runs"
            )
        return found
    state = plan.view_state
    assert state is not None
    if nothing_to_refresh(ctx, plan, state) and not plan.moving_filters:
        found.next_run = (
            "fast: nothing to refresh (no master commit or log change since the last refresh); no statement"
        )
        found.phases += _fast_phases(ctx, plan, state, _provisional(ctx, plan, state), "a refresh of changes runs")
        return found
    captures = _captures(ctx, plan, state)
    if captures:  # decided before the capture (as force does): the marks are not known yet
        early = force.choice_before_capture(ctx, plan, state)
        choice = early[0] if early is not None else None
        marked = _provisional(ctx, plan, state)
    else:
        marked = mark_logs(ctx, plan, state).logs
        assert definition is not None  # a fast refresh is decided for an analysed view only
        statement = view_classes.refresh_statement(
            definition,
            view_relation,
            marked,
            plan.view_types,
            view_rows=plan.view_rows,
            view_snapshot=plan.view_read_at,
        )
        choice = force.after_mark(ctx, plan, marked, statement) if statement is not None else None
    if choice is not None:
        found.cost = _choice_line(choice, plan.config.refresh_method)
        if choice.method == RefreshAction.COMPLETE and plan.config.refresh_method is RefreshMethod.FORCE:
            found.next_run = f"complete ({choice.why})"
    found.phases += _fast_phases(ctx, plan, state, marked, "fast refresh", captures)
    return found


def _dropped(plan: RefreshPlan, spec: LogSpec) -> str:
    """Which of the master's changes a fast refresh drops: those outside the view's filters of its
    rows (mark.relevant_images)."""
    relevant = relevant_images(plan, spec)
    return f"; changes of rows failing {relevant} before and after are dropped" if relevant is not None else ""


def _patched(plan: RefreshPlan, spec: LogSpec) -> str:
    """Whether a fast refresh patches the master's updates from the view's own rows (mark.plan_patched_by)."""
    if plan_patched_by(plan, spec) is None:
        return ""
    return "; its updates that keep a row in the view are written from the view's own rows (PATCH), not joined again"


def _files(ctx: RefreshContext, plan: RefreshPlan) -> str | None:
    """The view's files now, and whether its refreshes compact them (refresh/phases/compact.py)."""
    files = ViewFiles.of(ctx.metadata.table(plan.view_relation), partitioned=bool(plan.partition_spec))
    if files is None:
        return None
    if not plan.config.auto_compact:
        return f"{files.describe()}; auto_compact=false: " + (
            "compaction due, `dbt run-operation mv_compact` runs it"
            if files.compaction_due
            else f"due at {files.due_at}"
        )
    return f"{files.describe()}; a fast refresh that leaves {files.due_at} compacts the view"


def _history(ctx: RefreshContext, plan: RefreshPlan) -> str | None:
    """The view's snapshots, and when its refreshes expire them (refresh/phases/expire.py)."""
    table = ctx.metadata.table(plan.view_relation)
    return expire_phase.describe(table, int(time.time() * 1000)) if table is not None else None


# ---------------------------------------------------------------------- reasons
def _prose(view_class: ViewClass) -> str:
    return view_class.value.replace("_", " ")  # outer join, union all


def _class_of(definition: ViewDefinition) -> str:
    """The view class; for an aggregate, over outer joins (and their anchor) and with HAVING."""
    if definition.branches:
        shown = "; ".join(f"branch {n}: {_class_of(b)}" for n, b in enumerate(definition.branches, start=1))
        return f"{_prose(definition.view_class)} ({shown}; each maintained on its own rows, marked by _mv_branch)"
    text = _prose(definition.view_class)
    if definition.view_class is ViewClass.AGGREGATE and definition.null_supplying:
        text += f" over outer joins (anchor: {outer_aggregate.anchor(definition)})"
    if definition.having is not None:
        text += " with HAVING (the groups it does not hold are recomputed when changed)"
    recomputed = [o for o in definition.outputs if o.kind is OutputKind.RECOMPUTED]
    if recomputed:
        calls = ", ".join(describe(o.expression) for o in recomputed)
        text += f" (no delta maintains {calls}: every group a change touches is recomputed from the masters"
        if any(
            len(o.expression.this.expressions) > 1 for o in recomputed if functions.concatenated_value(o.expression)
        ):
            text += "; values the ORDER BY of a LISTAGG leaves tied are joined in their own order, the same way by every build and refresh"
        text += ")"
    if definition.ranking is not None:
        text += f" ({_ranking_prose(definition.ranking)})"
    if definition.windowing is not None:
        partitions = ", ".join(describe(p) for p in definition.windowing.partition_by)
        text += f" (windows partitioned by {partitions}; a change recomputes its partitions"
        if definition.windowing.tie_break:
            keys = ", ".join(describe(t) for t in definition.windowing.tie_break)
            text += (
                f"; rows the ORDER BY of ROW_NUMBER, LEAD, LAG, NTILE or a ROWS frame leaves tied are ordered by"
                f" the master's key ({keys}), the same way by every build and refresh"
            )
        text += ")"
    if definition.partition_query is not None and not definition.occurrences:
        text += (
            " (the query reads no table: its rows never change, a refresh has nothing to do, and one that finds"
            " the time it reads moved recomputes it)"
        )
    elif definition.partition_query is not None:
        partitions = ", ".join(describe(p) for p in definition.partition_query.partition_by)
        text += (
            f" (the query as written, recomputed by partition: every window, GROUP BY and DISTINCT in it partitions"
            f" by {partitions}, so a change recomputes the view's rows of its values of {partitions} from the"
            " master's rows of them"
        )
        lookups = definition.partition_query.lookups
        if lookups:
            joined = ", ".join(
                f"{alias} (matched by {alias}.{lookup.column} = {describe(lookup.through_value)}"
                f"{', NULLs too: NOT IN or an IN not filtering' if lookup.null_sensitive else ''})"
                for alias, lookup in sorted(lookups.items())
            )
            text += (
                f"; {joined} read whole, a change to one of its rows recomputing the partitions of the rows it joins"
            )
        if definition.partition_query.tie_broken:
            text += (
                "; rows the ORDER BY of ROW_NUMBER, LEAD, LAG, NTILE or a ROWS frame leaves tied are ordered by"
                " the key of the rows it reads (every column of them where they have none), the same way by every"
                " build and refresh"
            )
        text += ")"
    ordered = ordered_by_value(definition)
    if ordered:
        text += (
            f" ({', '.join(describe(n) for n in ordered)}: the query leaves the order of their values to the order"
            " Spark reads the rows in; the view orders them by value, the same way by every build and refresh)"
        )
    return text


def _clock_prose(plan: RefreshPlan) -> str:
    """How a view that reads the clock is refreshed (analysis/clock.py)."""
    assert plan.now is not None
    state = plan.view_state
    reflected = f"; its rows reflect {state.clock}" if state is not None and state.clock is not None else ""
    crossed = (
        "the rows a refresh finds the time moved across are applied as changes"
        if plan.facts.crossings_applied
        else "a refresh that finds rows the time moved across recomputes the view"
    )
    return (
        f"the query reads the time (current_date(), current_timestamp(), now()); this run reads it as "
        f"{plan.now.timestamp}{reflected}. Filters of one table's rows by the time are fast refreshed ({crossed}); "
        "read anywhere else (selected, in a join condition, HAVING, a window, a UNION ALL branch), the time makes "
        "the refresh recompute the view "
        "whenever it moved (current_date(): once a day)"
    )


def _ranking_prose(ranking: Ranking) -> str:
    """What a RANKED view keeps, and how ties are broken (the refresh recomputes partitions)."""
    partitions = ", ".join(describe(p) for p in ranking.partition_by)
    kept = "the first row" if ranking.keep == 1 else f"the top {ranking.keep} ranks"
    text = f"{kept} of each partition by {partitions} by {ranking.function.value}; a change recomputes its partitions"
    if ranking.tie_break:
        text += (
            f"; rows the ORDER BY leaves tied are ranked by the master's key ({', '.join(describe(t) for t in ranking.tie_break)}),"
            " the same way by every build and refresh"
        )
    return text


def _in_steps(ctx: RefreshContext, found: Explanation, plan: RefreshPlan) -> Explanation:
    """A query refused as one view and maintained in steps (refresh/units.py): each unit explained
    as the model it is refreshed as; a unit after one not built yet is built after it."""
    found.view_class = plan.reason
    found.next_run = "in steps: each internal state, then the view, refreshed as the model it is (below)"
    waiting = None
    for unit in plan.units:
        built = ctx.metadata.table(unit.relation) is not None
        if waiting is not None:
            step = Explanation(str(unit.model.get("name")), unit.relation, built)
            step.view_class = "read after the step before it, which is not built yet"
            step.next_run = f"build (after {waiting})"
            found.steps.append(step)
            continue
        found.steps.append(explain(ctx, unit.model, unit.sql, unit.relation, built, unit.graph))
        if not built:
            waiting = unit.identifier
    return found


def refusals(
    ctx: RefreshContext, plan: RefreshPlan, model: Mapping[str, Any], sql: str, graph: Mapping[str, Any]
) -> list[str]:
    """Every reason the view cannot be fast refreshed, each with what to change: masters without
    a change log, constructs no fast refresh maintains (all of them), and, when neither, what the
    analysis or the view class refuses."""
    reasons = [
        f"{written}: no change log is declared for it. Declare one: a dbt source table with "
        f"meta.mv_log: {{master: {written}, key: [<its unique key>], capture: true}}"
        for master, written in dependency_names(model, graph).items()
        if master not in plan.logs
    ]
    try:
        reasons += [str(e).removeprefix(PREFIX) for e in construct_refusals(sql, plan.now)]
    except UnsupportedViewError as exc:  # not one query
        return reasons + [str(exc).removeprefix(PREFIX)]
    if reasons:
        return reasons
    tables = {m: MasterTable(name=m, columns=tuple(ctx.metadata.columns(m)), key=s.key) for m, s in plan.logs.items()}
    try:
        definition = analyze_view(sql, tables, plan.now)
    except UnsupportedViewError as exc:
        return [str(exc).removeprefix(PREFIX)]
    logged = {
        m: plan.logged_columns[s.log_relation] for m, s in plan.logs.items() if s.log_relation in plan.logged_columns
    }
    blocker = view_classes.blocker(definition, logged)
    return [blocker] if blocker else []


# ---------------------------------------------------------------------- statements
def _recompute(plan: RefreshPlan) -> str:
    target = relation(plan.view_relation)
    if plan.action == RefreshAction.BUILD:
        return f"create or replace table {target} using iceberg as\n{plan.compiled_sql.strip()}"
    return f"insert overwrite {target}\n{plan.compiled_sql.strip()}"


def _captures(ctx: RefreshContext, plan: RefreshPlan, state: ViewState) -> dict[str, CapturePlan]:
    """What the capture of each capture-managed log would do now (reads only)."""
    found = {}
    for spec in plan.logs.values():
        if not spec.capture:
            continue
        snapshots = ctx.metadata.mains([spec.log_relation, spec.master_relation])
        stops = consumers_stops(ctx, spec, plan.log_consumers.get(spec.log_relation, ()), {plan.view_relation: state})
        capture = capture_plan(ctx, spec, snapshots, state.logs.get(spec.log_relation), stops=stops)
        if capture.method is not CaptureMethod.NONE:
            found[spec.master_relation] = capture
    return found


def capture_statements(spec: LogSpec, logged: list[str], capture: CapturePlan) -> list[str]:
    """The statements of one capture (refresh/phases/capture.py runs them on a branch of the log)."""
    branch = "mv_capture_<id>"
    note = (
        f"-- {spec.log_relation}: {capture.method} ({capture.reason}); appended on branch {branch} of the log, "
        "then main fast-forwarded to it (a compare-and-swap)"
    )
    if capture.method is CaptureMethod.CHANGELOG:
        view = "mv_changes_<id>"
        return [
            note,
            log_sql.changelog_view(spec, view, capture.start, capture.end or 0),
            log_sql.capture_from_changelog(spec, logged, view, capture.end or 0, branch),
        ]
    if capture.method is CaptureMethod.FILES:
        return [
            note,
            f"-- the data files changed between master snapshots {capture.start} and {capture.end}, staged "
            "as temporary views (Iceberg metadata: no job)",
            log_sql.capture_by_files(
                spec,
                logged,
                "mv_files_removed_<id>",
                "mv_files_added_<id>",
                capture.end or 0,
                branch,
                written_view="mv_files_added_<id>",
            ),
        ]
    if capture.method is CaptureMethod.DIFF:
        return [note, log_sql.capture_by_diff(spec, logged, capture.start, capture.end or 0, branch)]
    return [
        note,
        log_sql.watermark_row(spec, logged, capture.end, reset=capture.method is CaptureMethod.RESET, branch=branch),
    ]


def _provisional(ctx: RefreshContext, plan: RefreshPlan, state: ViewState | None) -> dict[str, MarkedLog]:
    """Marks of one change in every log (at its current snapshot), to render the statements a
    refresh of changes runs."""
    marked = {}
    snapshots = ctx.metadata.mains([s.log_relation for s in plan.logs.values()])
    for master, spec in plan.logs.items():
        position = state.logs.get(spec.log_relation) if state is not None else None
        consumed = position.sequence if position is not None else 0
        reflected = position.master_snapshot if position is not None and position.master_snapshot is not None else 0
        marked[master] = MarkedLog(
            spec,
            snapshots.get(spec.log_relation, 0),
            consumed,
            consumed + 1,
            1,
            1,
            reflected,
            logged=tuple(plan.logged_columns.get(spec.log_relation, ())),
            netted_by=netting_columns(plan, spec),
            relevant=relevant_images(plan, spec),
        )
    return marked


def _fast_phases(
    ctx: RefreshContext,
    plan: RefreshPlan,
    state: ViewState | None,
    marked: Mapping[str, MarkedLog],
    title: str,
    captures: Mapping[str, CapturePlan] | None = None,
) -> list[tuple[str, list[str]]]:
    definition = plan.definition
    assert definition is not None
    phases: list[tuple[str, list[str]]] = []
    if captures:
        statements = []
        for master, capture in captures.items():
            spec = plan.logs[master]
            statements += capture_statements(spec, list(plan.logged_columns.get(spec.log_relation, ())), capture)
        phases.append((f"{title}: capture", statements))
    requests = [
        StatsRequest(
            m.spec,
            m.log_snapshot,
            m.consumed or 0,
            m.excluded,
            probe=key_probe(ctx, plan, m.spec, m.log_snapshot, m.consumed or 0),
        )
        for m in marked.values()
    ]
    phases.append(
        (
            f"{title}: mark (the counts of every log that gained rows, the view's net images and keys, in one statement)",
            ["\nunion all\n".join(f"select {i} as request, * from (\n{r.sql()}\n)" for i, r in enumerate(requests))],
        )
    )
    statement = view_classes.refresh_statement(
        definition,
        plan.view_relation,
        marked,
        plan.view_types,
        view_rows=plan.view_rows,
        view_snapshot=plan.view_read_at,
    )
    if statement is None:
        phases.append((f"{title}: write", ["-- nothing to write for these changes"]))
        return phases
    listing = Listing()  # the steps a refresh executes, listed
    execute_steps(staged_statement(commit_state(marked, "fast", base=None), statement), listing)
    phases.append((f"{title}: write (on a branch of the view, staged with the refresh's record)", listing.statements))
    if plan.own_log is not None and statement.touched is not None:  # mv_log=true
        spec = plan.own_log
        phases.append(
            (
                f"{title}: log (mv_log=true: what the refresh changed, to a branch of {spec.log_relation})",
                [
                    f"-- one insert into a branch of {spec.log_relation}: the rows the DELETE removes (its condition, below, on "
                    "the view as it was) and the rows in the data files the INSERT's commit adds (staged from its manifest; "
                    "over the Thrift Server: the view's rows meeting the filter below at both snapshots), compared (one "
                    "aggregate: a row deleted and inserted again unchanged is not logged), and a watermark at the staged refresh",
                    *([f"-- deleted: {' '.join(statement.deleted.split())}"] if statement.deleted else []),
                    f"-- filter: {' '.join(statement.touched.split())}",
                ],
            )
        )
    phases.append(
        (
            f"{title}: publish",
            [
                f"-- fast-forward main of {plan.view_relation} to the staged snapshot, if main is still the snapshot the "
                "refresh read (a compare-and-swap: Iceberg metadata, no job); the write branch is dropped with it",
                *(
                    [
                        f"-- then main of {plan.own_log.log_relation} to its branch, if main is still where the branch began "
                        "(a compare-and-swap; if not, or after a crash between the two, its readers' capture appends the change)"
                    ]
                    if plan.own_log is not None and statement.touched is not None
                    else []
                ),
            ],
        )
    )
    purge = []
    for spec in plan.logs.values():
        purge.append(
            f"-- {spec.log_relation}: the rows every view of the log consumed go: whole data files dropped in "
            "Iceberg's metadata (no job) in the embedded session; over the Thrift Server:"
        )
        purge.append(log_sql.purge(spec, [(marked[spec.master_relation].upto, ())], None))
    phases.append((f"{title}: purge", purge))
    return phases


def _choice_line(choice: cost.Choice, method: str) -> str:
    """The estimates and the choice: ``fast ~41.0 s (...); complete ~12.0 s (...): force runs ...``."""
    estimates = (
        f"fast ~{choice.fast.seconds:.1f} s ({choice.fast.describe()}); "
        f"complete ~{choice.complete.seconds:.1f} s ({choice.complete.describe()})"
    )
    if method == RefreshMethod.FORCE:
        return f"{estimates}: refresh_method='force' runs {choice.method} ({choice.why})"
    return f"{estimates}: refresh_method='{method}' runs {method} regardless"
