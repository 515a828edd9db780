"""Plan: validate the model, its change logs and its definition, and decide build, complete or
fast. Reads only (metadata, and a count of a log's rows only when a foreign commit may have
deleted changes); everything that can fail for the user fails here, before anything is changed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dbt_incremental_mv import environment, view_table
from dbt_incremental_mv.analysis import MasterTable, UnsupportedViewError, ViewDefinition, analyze_view
from dbt_incremental_mv.analysis.clock import Clock, ClockError, MovingFilter, sql_reads_clock
from dbt_incremental_mv.analysis.indexed import indexed_split
from dbt_incremental_mv.analysis.states import StateSplit, split_into_states
from dbt_incremental_mv.config import ConfigError, FastRefreshConfig, IndexedState, RefreshMethod
from dbt_incremental_mv.definition import (
    COLUMNS_PROPERTY,
    DEFINITION_PROPERTY,
    MODEL_QUERY_PROPERTY,
    defining_query,
    definition_change,
    encode_columns,
    normalized_sql,
)
from dbt_incremental_mv.layout import METADATA_CLEANUP, ViewLayout, indexed_layout, view_layout
from dbt_incremental_mv.logs import properties as log_properties
from dbt_incremental_mv.logs.contract import (
    LogContractError,
    LogEvolution,
    LogSpec,
    log_evolution,
    log_specs_from_graph,
    logs_by_master,
    validate_log_columns,
)
from dbt_incremental_mv.metadata import Metadata, commits_since
from dbt_incremental_mv.refresh import indexed_choice
from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.cost import calibration
from dbt_incremental_mv.refresh.graph import dependency_names, dependency_relations, view_consumers
from dbt_incremental_mv.refresh.phases import clock as clock_phase
from dbt_incremental_mv.refresh.phases.decide import (
    CarriesDecision,
    PlanFacts,
    RefreshAction,
    RefreshDecision,
    decide_refresh,
)
from dbt_incremental_mv.refresh.state import staleness
from dbt_incremental_mv.refresh.state.bookkeeping import LogPosition, ViewState
from dbt_incremental_mv.refresh.state.view_state import view_state_at
from dbt_incremental_mv.refresh.units import (
    Unit,
    internal_states,
    is_state_relation,
    model_query,
    retired_states,
    sorted_by,
    sorted_by_occurrence,
    units,
)
from dbt_incremental_mv.refresh.views import view_classes

DELETE_DISTRIBUTION = "write.delete.distribution-mode"
# Needed by the plugin: staged commits (write-audit-publish) for the atomic refresh.
REQUIRED_VIEW_PROPERTIES = {"write.wap.enabled": "true"}
# Defaults the user's tblproperties may override: merge-on-read makes a refresh write only
# what changed (delete files + new rows) instead of rewriting every file it touches; compact
# the view now and then with CALL system.rewrite_data_files (the refresh looks through it).
DEFAULT_VIEW_PROPERTIES = {
    "format-version": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
    # A refresh's DELETE writes each scan task's position deletes as it finds them, instead of
    # shuffling them by data file first (Iceberg's default, hash): one stage less per DELETE, no
    # exchange in its plan. Format 2 only: a deletion vector (format 3) must be written by the one
    # task that holds every delete of its data file.
    DELETE_DISTRIBUTION: "none",
    # every refresh commits: old metadata files deleted as new ones are written (refresh/phases/expire.py)
    METADATA_CLEANUP: "true",
}


def view_defaults(user_properties: Mapping[str, str]) -> dict[str, str]:
    """The default properties of a view the plugin creates, for the user's ``tblproperties``."""
    defaults = dict(DEFAULT_VIEW_PROPERTIES)
    version = user_properties.get("format-version", defaults["format-version"]).strip()
    if not version.isdigit() or int(version) >= 3:
        defaults.pop(DELETE_DISTRIBUTION)
    return defaults


@dataclass(frozen=True)
class RefreshPlan(CarriesDecision):
    """Everything decided before anything is changed; never edited afterwards (what the run
    learns is in its RefreshRun, run.py)."""

    model_name: str
    view_relation: str
    decision: RefreshDecision
    definition: ViewDefinition | None
    logs: dict[str, LogSpec]  # by master relation, for the view's masters
    logged_columns: dict[str, list[str]]  # by log relation
    existing_columns: tuple[str, ...] | None
    compiled_sql: str
    config: FastRefreshConfig = field(default_factory=FastRefreshConfig)
    tblproperties: dict[str, str] = field(default_factory=dict)
    stored_definition: str | None = None
    view_types: dict[str, str] = field(default_factory=dict)  # the existing table's columns and types
    facts: PlanFacts = field(default_factory=lambda: PlanFacts("table"))  # what the decision was taken from
    partition_spec: list[str] = field(default_factory=list)  # partition_by, clustered_by as bucket()
    contract: dict[str, str] | None = None  # enforced contract: column -> Spark type
    log_evolutions: dict[str, LogEvolution] = field(default_factory=dict)  # capture-managed logs to evolve
    read_types: dict[str, dict[str, str]] = field(default_factory=dict)  # master -> column read -> current type
    existing_logs: frozenset[str] = frozenset()  # the logs that existed when planned
    # by capture-managed log: every fast_refresh view of the project reading it (capture stops)
    log_consumers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    view_state: ViewState | None = None  # a fast refresh: the view's state, as the staleness check read it
    view_read_at: int | None = None  # ... and the view snapshot it was read from (see publish)
    own_log: LogSpec | None = None  # mv_log=true: the view's own change log, written by each fast refresh
    layout: ViewLayout = field(default_factory=ViewLayout)  # how a build or complete refresh writes the view
    now: Clock | None = None  # the time the view's clock functions read as (None: it reads no clock)
    # a fast refresh: the filters of one table the clock decides, at the view's time and this one's
    moving_filters: tuple[MovingFilter, ...] = ()
    # the view's rows when a view class may rewrite it whole (rewritable_rows; None: it may not)
    view_rows: int | None = None
    # a query the analysis refuses: how it is fast refreshed in steps (analysis/states.py), if it can be
    split_advice: str | None = None
    # maintained in steps (decision IN_STEPS): its states, then the view, each refreshed as a model
    units: tuple[Unit, ...] = ()
    # the last unit of a view maintained in steps: its states' relations, recorded in its commits
    internal_states: tuple[str, ...] = ()
    # states the view's last commit lists and this one does not: dropped once it is published
    retired_states: tuple[str, ...] = ()
    # a join view that could keep an indexed join state: whether it does, and why (indexed_choice.py)
    indexed: indexed_choice.IndexedChoice | None = None
    # ... the logs of its dimension, when its fast refreshes add to its record (ViewState.changes)
    dimension_logs: tuple[str, ...] = ()
    # ... and the record its last commit holds (carried by every commit, added to by fast ones)
    changes: str = ""


def read_column_types(
    definition: ViewDefinition, master_columns: Mapping[str, Sequence[tuple[str, str]]]
) -> dict[str, dict[str, str]]:
    """The types of the master columns the view reads, by master (schema-change checks)."""
    read: dict[str, dict[str, str]] = {}
    for occurrence in definition.occurrences:
        types = {c.lower(): t for c, t in master_columns.get(occurrence.master.name, [])}
        for column in definition.referenced_columns[occurrence.alias]:
            read.setdefault(occurrence.master.name, {})[column.lower()] = types.get(column.lower(), "?")
    return read


def rewritable_rows(
    ctx: RefreshContext, view_relation: str, config: FastRefreshConfig, own_log: LogSpec | None, partitioned: bool
) -> int | None:
    """The view's rows, when it is small enough for a view class to rewrite it whole (config
    ``rewrite_rows``); None otherwise, and when it keeps its own log (which reads the rows its
    writes changed) or is partitioned (an overwrite in dynamic mode would keep a partition whose
    groups all went)."""
    if own_log is not None or partitioned or not config.rewrite_rows:
        return None
    size = ctx.metadata.table_size(view_relation)
    return size[1] if size is not None and size[1] <= config.rewrite_rows else None


def plan_refresh(
    ctx: RefreshContext,
    model: Mapping[str, Any],
    compiled_sql: str,
    view_relation: str,
    existing_type: str | None,
    full_refresh: bool,
    graph: Mapping[str, Any],
) -> RefreshPlan:
    """Validate and decide. Reads only; raises (ConfigError, LogContractError,
    FastRefreshUnavailable) before anything is changed."""
    name = model.get("name", "?")
    config = FastRefreshConfig.from_model_config(name, model.get("config") or {})
    user_properties = (model.get("config") or {}).get("tblproperties") or {}
    partition_spec = view_table.partition_spec(name, model.get("config") or {})
    contract = view_table.contract_types(model)
    masters = dependency_relations(model, graph)
    all_logs = logs_by_master(log_specs_from_graph(graph))
    logs = {m: all_logs[m] for m in masters if m in all_logs}
    own_log = all_logs.get(view_relation.lower()) if config.mv_log else None
    if config.mv_log and own_log is None:
        raise ConfigError(
            f"Model '{name}': mv_log=true, but no change log of {name} is declared. Declare one as a dbt "
            f"source whose meta.mv_log names this model as its master and the view's unique key, e.g. "
            f"meta: {{mv_log: {{master: {name}, key: [<key columns>]}}}}."
        )
    meta = ctx.metadata
    # what the view's last commit recorded (None: no view, or not made by the plugin)
    previous = view_state_at(meta, view_relation)[0] if existing_type == "table" else None
    blocker = None
    split_advice = None
    steps: StateSplit | None = None  # the query is maintained in steps: these states, then the query over them
    definition = None
    clock = None
    tables: dict[str, MasterTable] = {}
    logged_columns: dict[str, list[str]] = {}
    evolutions: dict[str, LogEvolution] = {}  # capture-managed logs their master's schema changes outgrew
    existing_logs: set[str] = set()
    indexed: indexed_choice.IndexedChoice | None = None
    dimension_logs: tuple[str, ...] = ()
    if sorted_by_occurrence(model):  # the view over an indexed join state: its dimension is its other master
        dimension_logs = tuple(spec.log_relation for m, spec in logs.items() if not is_state_relation(m))
    missing = [m for m in masters if m not in logs]
    names = dependency_names(model, graph)  # as the user writes them: source_name.table_name, model name
    master_columns = {m: meta.columns(m) for m in masters}
    for master, spec in logs.items():
        if not master_columns[master]:
            raise LogContractError(f"The master {master} of the {spec.describe()} does not exist.")
        log_columns = dict(meta.columns(spec.log_relation))
        if log_columns:
            existing_logs.add(spec.log_relation)
        evolution = log_evolution(log_columns, dict(master_columns[master])) if spec.capture and log_columns else None
        if evolution is not None:
            evolutions[spec.log_relation] = evolution
            log_columns = evolution.evolved(log_columns)
        if not log_columns:
            if spec.capture:
                logged_columns[spec.log_relation] = [c for c, _ in master_columns[master]]
                continue  # created by the first build (or recreated: see LogEvolution)
            raise LogContractError(
                f"The {spec.describe()} does not exist. Create it (dbt run-operation create_mv_log "
                f"--args '{{master: {spec.master_ref}}}') or let your ingestion create it."
            )
        log = meta.table(spec.log_relation)
        logged_columns[spec.log_relation] = validate_log_columns(
            spec, log_columns, dict(master_columns[master]), log.format_version if log is not None else None
        )
    if missing:
        blocker = (
            f"no change log is declared for master {', '.join(names.get(m, m) for m in missing)} "
            "(declare one as a dbt source with meta.mv_log)"
        )
    else:
        tables = {m: MasterTable(name=m, columns=tuple(master_columns[m]), key=logs[m].key) for m in masters}
        clock = read_clock(ctx) if sql_reads_clock(compiled_sql) else None
        try:
            definition = analyze_view(compiled_sql, tables, clock)
        except UnsupportedViewError as exc:
            split = split_into_states(compiled_sql, tables, clock)
            if split is not None and in_steps_allowed(config, clock):
                steps = split
            else:
                split_advice = split.advice() if split is not None else None
                blocker = f"{exc} {split_advice}" if split_advice is not None else str(exc)
        else:
            logged = {
                m: logged_columns[logs[m].log_relation] for m in masters if logs[m].log_relation in logged_columns
            }
            blocker = view_classes.blocker(definition, logged)
            if (
                blocker is None
                and config.indexed_state is not IndexedState.OFF
                and in_steps_allowed(config, clock)
                and not internal_states(model)
            ):
                split = indexed_split(compiled_sql, definition, tables, master_rows(meta, masters))
                if split is not None:
                    indexed = choose_indexed(meta, config, split, definition, names, previous, view_relation)
                    if indexed.keep:  # maintained as the steps of a view refused as one are
                        steps, definition = split, None
                    else:
                        dimension_logs = (logs[dimension_master(split, definition)].log_relation,)
    existing_columns = None
    stored_definition = None
    view_types: dict[str, str] = {}
    previous_states = previous.states if previous is not None else ()
    read_columns = read_column_types(definition, master_columns) if definition is not None else None
    change = reshaped = None
    if existing_type == "table":
        view = meta.table(view_relation)
        view_types = dict(view.columns) if view is not None else {}
        existing_columns = tuple(view_types)
        properties = view.properties if view is not None else {}
        stored_definition = properties.get(DEFINITION_PROPERTY)
        reshaped = reshaping(stored_definition, defining_query(properties), compiled_sql, model)
        change = (
            None
            if reshaped
            else definition_change(stored_definition, compiled_sql, properties.get(COLUMNS_PROPERTY), read_columns)
        )
    recreated = sorted(log for log, evolution in evolutions.items() if evolution.recreate)
    lacking = [
        c
        for c in (definition.stored_columns if definition is not None else ())
        if c.lower() not in {e.lower() for e in existing_columns or ()}
    ]
    facts = PlanFacts(
        existing_type,
        full_refresh,
        blocker,
        change,
        lost_changes="; ".join(
            f"the change log {log} is recreated ({evolutions[log].describe()} in its master), so the "
            "changes it holds are lost"
            for log in recreated
        )
        or None,
        lacking_columns=(
            f"the view lacks the hidden column{'s' if len(lacking) > 1 else ''} {', '.join(lacking)} this version of "
            "the plugin keeps to refresh it (it was built by an earlier version): rebuilt once"
        )
        if lacking
        else None,
        crossings_applied=definition is not None and view_classes.applies_crossed_rows(definition) and own_log is None,
        in_steps=steps.described() if steps is not None else None,
        reshaped=reshaped,
    )
    decision = decide_refresh(name, config, facts)
    view_state, view_read_at = None, None
    if decision.action == RefreshAction.FAST:  # the view's record of its logs: read for a fast refresh only
        out_of_step, view_state, view_read_at = check_staleness(ctx, view_relation, logs, existing_logs)
        facts = replace(facts, out_of_step=out_of_step)
        decision = decide_refresh(name, config, facts)
    moving: tuple[MovingFilter, ...] = ()
    if decision.action == RefreshAction.FAST and clock is not None and definition is not None:
        clock_moved, moving = clock_phase.moved_since(compiled_sql, tables, definition, clock, view_state)
        facts = replace(facts, clock_moved=clock_moved)
        decision = decide_refresh(name, config, facts)
    user_tblproperties = {str(k): str(v) for k, v in user_properties.items()}
    # the last unit of a view maintained in steps: the states it reads, the model's own query
    states, own_query = internal_states(model), model_query(model)
    layout = ViewLayout()
    if definition is not None and decision.action != RefreshAction.FAST:  # (a fast refresh writes no new table)
        layout = (
            indexed_layout(definition, sorted_by(model))
            if sorted_by(model)
            else view_layout(definition, master_rows(meta, masters), sorted_by_occurrence(model))
        )
    return RefreshPlan(
        model_name=name,
        view_relation=view_relation,
        decision=decision,
        definition=definition,
        logs=logs,
        logged_columns=logged_columns,
        existing_columns=existing_columns,
        compiled_sql=compiled_sql,
        config=config,
        tblproperties={
            **layout.properties(),
            **view_defaults(user_tblproperties),
            **user_tblproperties,
            **REQUIRED_VIEW_PROPERTIES,
            **layout.record(),
            DEFINITION_PROPERTY: compiled_sql.strip(),
            **({MODEL_QUERY_PROPERTY: own_query.strip()} if own_query else {}),
            **({COLUMNS_PROPERTY: encode_columns(read_columns)} if read_columns is not None else {}),
        },
        stored_definition=stored_definition,
        view_types=view_types,
        facts=facts,
        partition_spec=partition_spec,
        contract=contract,
        log_evolutions=evolutions,
        read_types=read_columns or {},
        existing_logs=frozenset(existing_logs),
        log_consumers={
            spec.log_relation: tuple(view_consumers(graph, spec.master_relation))
            for spec in logs.values()
            if spec.capture
        },
        view_state=view_state,
        view_read_at=view_read_at,
        own_log=own_log,
        layout=layout,
        now=clock,
        moving_filters=moving,
        view_rows=rewritable_rows(ctx, view_relation, config, own_log, bool(partition_spec))
        if definition is not None and existing_columns is not None
        else None,
        split_advice=split_advice,
        units=units(model, view_relation, graph, steps, compiled_sql)
        if decision.action == RefreshAction.IN_STEPS and steps
        else (),
        internal_states=states,
        retired_states=tuple(retired_states(previous_states, states))
        if decision.action != RefreshAction.IN_STEPS
        else (),
        indexed=indexed,
        dimension_logs=dimension_logs,
        changes=previous.changes if previous is not None else "",
    )


def reshaping(
    stored_definition: str | None, stored_query: str | None, compiled_sql: str, model: Mapping[str, Any]
) -> str | None:
    """Why the view is rebuilt though the model's query is the same (None: it is not): it was
    written by another shape of refresh (as one view, or from internal states: indexed_state)."""
    own_query = model_query(model) or compiled_sql
    if stored_definition is None or stored_query is None:
        return None
    if normalized_sql(stored_definition) == normalized_sql(compiled_sql):
        return None
    if normalized_sql(stored_query) != normalized_sql(own_query):
        return None  # the model's SQL changed: a definition change
    if internal_states(model):
        return "the view is now read from its internal state: rebuilt once over it"
    return "the view is now maintained as one view, not from internal states: rebuilt once"


def dimension_master(split: StateSplit, definition: ViewDefinition) -> str:
    """The master of the dimension an indexed join state is sorted by."""
    return next(o.master.name for o in definition.occurrences if o.alias == split.indexed_alias)


def choose_indexed(
    meta: Metadata,
    config: FastRefreshConfig,
    split: StateSplit,
    definition: ViewDefinition,
    names: Mapping[str, str],
    previous: ViewState | None,
    view_relation: str,
) -> indexed_choice.IndexedChoice:
    """Whether the join view keeps the indexed join state ``split`` (indexed_choice.py), from its
    last commit's record and the sizes of its facts and of itself."""
    dimension = dimension_master(split, definition)
    facts = sorted({o.master.name for o in definition.occurrences} - {dimension})
    sizes = [meta.table_size(m) for m in facts]
    view_size = meta.table_size(view_relation) if previous is not None else None
    return indexed_choice.choose(
        config.indexed_state,
        kept=bool(previous is not None and previous.states),
        record=previous.changes if previous is not None else "",
        dimension=names.get(dimension, dimension),
        fact_bytes=None if any(s is None for s in sizes) else sum(s[0] for s in sizes if s is not None),
        view_bytes=view_size[0] if view_size is not None else None,
        prices=calibration(),
    )


def master_rows(meta: Metadata, masters: Sequence[str]) -> dict[str, int]:
    """The live rows of each master whose size its current snapshot records."""
    return {m: size[1] for m in masters if (size := meta.table_size(m)) is not None}


def in_steps_allowed(config: FastRefreshConfig, clock: Clock | None) -> bool:
    """Whether a query the analysis refuses as one view is maintained in steps when it splits into
    states (refresh/units.py): not when it is always recomputed (refresh_method='complete'), nor
    when it reads the clock (each step would read a time of its own)."""
    return config.refresh_method is not RefreshMethod.COMPLETE and clock is None


def read_clock(ctx: RefreshContext) -> Clock:
    """This refresh's time (refresh/phases/clock.py), or a ConfigError for a setting that is no time."""
    try:
        return clock_phase.refresh_clock(ctx)
    except ClockError as error:
        raise ConfigError(f"{environment.NOW.name}: {error}.") from error


def check_staleness(
    ctx: RefreshContext, view_relation: str, logs: Mapping[str, LogSpec], existing_logs: set[str]
) -> tuple[str | None, ViewState | None, int | None]:
    """Why the view cannot be fast refreshed from its record of its logs (None: it can), with
    the view's state and the view snapshot it was read from."""
    state, read_at = view_state_at(ctx.metadata, view_relation)
    if state is None or not all(spec.log_relation in state.logs for spec in logs.values()):
        return "the view has no record of what it consumed from its logs", state, read_at
    for spec in logs.values():
        reason = log_out_of_step(ctx, spec, state.logs[spec.log_relation], spec.log_relation in existing_logs)
        if reason is not None:
            return reason, state, read_at
    return None, state, read_at


def log_out_of_step(
    ctx: RefreshContext, spec: LogSpec, position: LogPosition | None, exists: bool | None = None
) -> str | None:
    """Whether the log still holds every change after the view's position (see refresh/state/staleness.py).
    Reads the log's metadata, and counts the view's unconsumed rows around each commit since its
    position that may have deleted some (not an append, a compaction or the plugin's purge).
    ``exists``: whether the log exists, when the caller knows (None: look)."""
    log = ctx.metadata.table(spec.log_relation) if exists is not False else None
    if exists is None:
        exists = log is not None
    parents: dict[int, int | None] = {}
    operations: dict[int, str] = {}
    counts: dict[int, tuple[int, int]] = {}
    current = None
    if exists and log is not None and position is not None and position.log_snapshot is not None:
        purges = log_properties.purge_snapshots(log.properties)
        for snapshot in log.snapshots.values():
            parents[snapshot.snapshot_id] = snapshot.parent_id
            # neither a compaction nor a plugin purge through this view's position deletes a
            # change the view has not consumed
            purged_through = purges.get(snapshot.snapshot_id)
            keeps = snapshot.operation in log_properties.KEEPS_EVERY_ROW or (
                purged_through is not None and purged_through <= position.sequence
            )
            operations[snapshot.snapshot_id] = staleness.APPEND if keeps else snapshot.operation
        current = log.main
        chain = commits_since(position.log_snapshot, current, parents) or []
        needed = staleness.snapshots_to_count(chain, operations, parents)
        if spec.capture and current is not None and current not in needed and needed:
            needed.append(current)
        if spec.capture and current is not None and not needed and log_properties.captured_through(log) is None:
            needed.append(current)  # the watermark is not vouched for by the capture property: count it
        if needed:
            counts = {
                int(r[0]): (int(r[1]), int(r[2]))
                for r in ctx.query(staleness.unconsumed_counts(spec.log_relation, position, needed))
            }
    return staleness.out_of_step(
        spec.log_relation,
        position,
        log_exists=exists,
        current=current,
        parents=parents,
        operations=operations,
        counts=counts,
        capture=spec.capture,
    )
