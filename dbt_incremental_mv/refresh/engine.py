"""The refresh of one fast_refresh model: plan (validate, analyse), mark, propagate, purge.

The adapter runs this with two callables (``query`` returns rows, ``execute`` runs a
statement) so that every decision here is testable without Spark. The materialization
runs the statements of the propagate step itself, so dbt logs and times them.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbt_incremental_mv import catalog, staleness, view_table
from dbt_incremental_mv.analysis import MasterTable, UnsupportedViewError, ViewDefinition, analyze_view
from dbt_incremental_mv.bookkeeping import LogPosition, ViewState
from dbt_incremental_mv.conflicts import lost_race
from dbt_incremental_mv.config import FastRefreshConfig
from dbt_incremental_mv.definition import COLUMNS_PROPERTY, DEFINITION_PROPERTY, definition_change, encode_columns
from dbt_incremental_mv.logs import sql as log_sql
from dbt_incremental_mv.logs.capture import CapturePlan, SnapshotInfo, plan_capture
from dbt_incremental_mv.logs.contract import (
    LogContractError,
    LogEvolution,
    LogSpec,
    log_evolution,
    log_specs_from_graph,
    logs_by_master,
    validate_log_columns,
)
from dbt_incremental_mv.refresh import view_classes
from dbt_incremental_mv.refresh.marked import MarkedLog
from dbt_incremental_mv.refresh_plan import RefreshDecision, decide_refresh
from dbt_incremental_mv.sql_text import ident, idents, integer, relation, string

Query = Callable[[str], Sequence[Sequence[Any]]]
Execute = Callable[[str], None]

# Needed by the plugin: staged commits (write-audit-publish) for the atomic refresh.
REQUIRED_VIEW_PROPERTIES = {"write.wap.enabled": "true"}
# (DEFINITION_PROPERTY, COLUMNS_PROPERTY: what the view was built from, see definition.py;
# on-commit refreshes, run outside the view's own model, analyse the stored SQL.)
# Defaults the user's tblproperties may override: merge-on-read makes a refresh write only
# what changed (delete files + new rows) instead of rewriting every file it touches; compact
# the view now and then with CALL system.rewrite_data_files (the refresh looks through it).
DEFAULT_VIEW_PROPERTIES = {
    "format-version": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}


# Captures of one log are serialized within the process (dbt threads refreshing two views of
# the same master would otherwise race and retry); across processes the capture's
# compare-and-swap commit (_commit_capture) keeps them from appending a change twice.
_capture_locks: dict[str, threading.Lock] = {}
_capture_locks_guard = threading.Lock()

# A capture that loses the race to a concurrent capture or purge decides again, this many times.
CAPTURE_ATTEMPTS = 5
# Refreshes that apply changes to the view as it was (a complete refresh recomputes it instead).
INCREMENTAL_METHODS = ("fast", "on-commit")

# Superseded capture watermarks are purged with consumed changes, or once this many pile up.
WATERMARKS_BEFORE_PURGE = 16


def _capture_lock(log_relation: str) -> threading.Lock:
    with _capture_locks_guard:
        return _capture_locks.setdefault(log_relation, threading.Lock())


class ConcurrentRefreshError(RuntimeError):
    """Another refresh of the same view committed first; this one changed nothing."""


@dataclass(frozen=True)
class Step:
    """One statement of the propagate step. ``create`` steps carry the query only: the
    materialization wraps it in the view's DDL (partitioning, location, properties);
    ``publish`` steps carry the staged commit's id, published by ``publish()``."""

    name: str
    sql: str
    kind: str = "sql"  # "sql", "create" or "publish"


@dataclass
class RefreshPlan:
    """Everything decided before anything is changed."""

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
    out_of_step: str | None = None  # why the view's record of its logs cannot be refreshed from
    partition_spec: list[str] = field(default_factory=list)  # partition_by, clustered_by as bucket()
    contract: dict[str, str] | None = None  # enforced contract: column -> Spark type
    log_evolutions: dict[str, LogEvolution] = field(default_factory=dict)  # capture-managed logs to evolve
    read_types: dict[str, dict[str, str]] = field(default_factory=dict)  # master -> column read -> current type
    existing_logs: frozenset[str] = frozenset()  # the logs that existed when planned
    view_state: ViewState | None = None  # a fast refresh: the view's state, as the staleness check read it
    view_read_at: int | None = None  # ... and the view snapshot it was read from (see publish)
    published_summary: dict[str, str] | None = None  # row counts of the commit publish() put on main

    @property
    def action(self) -> str:
        return self.decision.action

    @property
    def reason(self) -> str:
        return self.decision.reason


@dataclass
class Propagation:
    """The propagate step, ready to run: statements and what they record."""

    steps: list[Step]
    state: ViewState | None
    marked: dict[str, MarkedLog]
    summary: str


def _read_column_types(
    definition: ViewDefinition, master_columns: Mapping[str, Sequence[tuple[str, str]]]
) -> dict[str, dict[str, str]]:
    """The types of the master columns the view reads, by master (schema-change checks)."""
    read: dict[str, dict[str, str]] = {}
    for occurrence in definition.occurrences:
        types = {c.lower(): t for c, t in master_columns.get(occurrence.master.name, [])}
        for column in definition.referenced_columns[occurrence.alias]:
            read.setdefault(occurrence.master.name, {})[column.lower()] = types.get(column.lower(), "?")
    return read


def _current_types(plan: RefreshPlan, alias: str) -> dict[str, str]:
    """The master columns an occurrence reads, as the view spells them, with their current types."""
    assert plan.definition is not None
    master = plan.definition.occurrence(alias).master.name
    types = plan.read_types.get(master, {})
    return {c: types[c.lower()] for c in plan.definition.referenced_columns[alias] if c.lower() in types}


def _relation_name(node: Mapping[str, Any]) -> str:
    name = node.get("identifier") or node.get("alias") or node["name"]
    return f"{node['schema']}.{name}".lower()


def dependency_relations(model: Mapping[str, Any], graph: Mapping[str, Any]) -> list[str]:
    """The relations a model reads through ref() and source(), sorted."""
    nodes = {**graph.get("nodes", {}), **graph.get("sources", {})}
    found = set()
    for unique_id in (model.get("depends_on") or {}).get("nodes", []):
        node = nodes.get(unique_id)
        if node is not None and node.get("resource_type") in ("model", "seed", "snapshot", "source"):
            found.add(_relation_name(node))
    return sorted(found)


def view_consumers(graph: Mapping[str, Any], master_relation: str) -> list[str]:
    """Relations of every fast_refresh model that reads ``master_relation``."""
    consumers = []
    for node in graph.get("nodes", {}).values():
        if node.get("resource_type") != "model" or (node.get("config") or {}).get("materialized") != "fast_refresh":
            continue
        if master_relation in dependency_relations(node, graph):
            consumers.append(_relation_name(node))
    return sorted(consumers)


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


class FastRefreshEngine:
    def __init__(self, query: Query, execute: Execute) -> None:
        self.query = query
        self.execute = execute
        # log stats by (log, log snapshot, consumed, excluded, only): a snapshot never changes, so
        # a capture that found nothing to capture and the mark after it share one count
        self._stats_read: dict[tuple, dict[str, Any]] = {}

    # ---------------------------------------------------------------- plan
    def plan(
        self,
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
        blocker = None
        definition = None
        logged_columns: dict[str, list[str]] = {}
        evolutions: dict[str, LogEvolution] = {}  # capture-managed logs their master's schema changes outgrew
        existing_logs: set[str] = set()
        missing = [m for m in masters if m not in logs]
        master_columns = {m: self._columns(m) for m in masters}
        for master, spec in logs.items():
            if not master_columns[master]:
                raise LogContractError(f"The master {master} of the {spec.describe()} does not exist.")
            log_columns = dict(self._columns(spec.log_relation))
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
            logged_columns[spec.log_relation] = validate_log_columns(
                spec, log_columns, dict(master_columns[master]), catalog.format_version(self.query, spec.log_relation)
            )
        if missing:
            blocker = (
                f"no change log is declared for master {', '.join(missing)} "
                "(declare one as a dbt source with meta.mv_log)"
            )
        else:
            tables = {
                m: MasterTable(name=m, columns=tuple(master_columns[m]), key=logs[m].key) for m in masters
            }
            try:
                definition = analyze_view(compiled_sql, tables)
            except UnsupportedViewError as exc:
                blocker = str(exc)
            else:
                logged = {m: logged_columns[logs[m].log_relation] for m in masters if logs[m].log_relation in logged_columns}
                blocker = view_classes.blocker(definition, logged)
        existing_columns = None
        stored_definition = None
        view_types: dict[str, str] = {}
        read_columns = _read_column_types(definition, master_columns) if definition is not None else None
        change = None
        if existing_type == "table":
            view_types = dict(self._columns(view_relation))
            existing_columns = tuple(view_types)
            properties = catalog.table_properties(self.query, view_relation, (DEFINITION_PROPERTY, COLUMNS_PROPERTY))
            stored_definition, stored_columns = properties[DEFINITION_PROPERTY], properties[COLUMNS_PROPERTY]
            change = definition_change(stored_definition, compiled_sql, stored_columns, read_columns)
        decision = decide_refresh(
            name, config, existing_type=existing_type, full_refresh=full_refresh, fast_refresh_blocker=blocker,
            definition_change=change,
        )
        recreated = sorted(log for log, evolution in evolutions.items() if evolution.recreate)
        if decision.action == "fast" and recreated:
            decision = self._fallback(name, config, "; ".join(
                f"the change log {log} is recreated ({evolutions[log].describe()} in its master), so the "
                "changes it holds are lost" for log in recreated
            ))
        out_of_step, view_state, view_read_at = None, None, None
        if decision.action == "fast":
            out_of_step, view_state, view_read_at = self._staleness(view_relation, logs, existing_logs)
        if out_of_step is not None:
            decision = self._fallback(name, config, out_of_step)
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
                **DEFAULT_VIEW_PROPERTIES,
                **{str(k): str(v) for k, v in user_properties.items()},
                **REQUIRED_VIEW_PROPERTIES,
                DEFINITION_PROPERTY: compiled_sql.strip(),
                **({COLUMNS_PROPERTY: encode_columns(read_columns)} if read_columns is not None else {}),
            },
            stored_definition=stored_definition,
            view_types=view_types,
            out_of_step=out_of_step,
            partition_spec=partition_spec,
            contract=contract,
            log_evolutions=evolutions,
            read_types=read_columns or {},
            existing_logs=frozenset(existing_logs),
            view_state=view_state,
            view_read_at=view_read_at,
        )

    def _fallback(self, name: str, config: FastRefreshConfig, reason: str) -> RefreshDecision:
        return decide_refresh(name, config, existing_type="table", full_refresh=False, fast_refresh_blocker=reason)

    def _columns(self, name: str) -> list[tuple[str, str]]:
        return catalog.table_columns(self.query, name)

    def _staleness(
        self, view_relation: str, logs: Mapping[str, LogSpec], existing_logs: set[str]
    ) -> tuple[str | None, ViewState | None, int | None]:
        """Why the view cannot be fast refreshed from its record of its logs (None: it can), with
        the view's state and the view snapshot it was read from."""
        state, read_at = catalog.view_state_at(self.query, view_relation)
        if state is None or not all(spec.log_relation in state.logs for spec in logs.values()):
            return "the view has no record of what it consumed from its logs", state, read_at
        for spec in logs.values():
            reason = self.log_out_of_step(spec, state.logs[spec.log_relation], spec.log_relation in existing_logs)
            if reason is not None:
                return reason, state, read_at
        return None, state, read_at

    def log_out_of_step(self, spec: LogSpec, position: LogPosition | None, exists: bool | None = None) -> str | None:
        """Whether the log still holds every change after the view's position (see staleness.py).
        Reads only: the log's snapshot list and one count query over a few of its snapshots.
        ``exists``: whether the log exists, when the caller knows (None: look)."""
        if exists is None:
            exists = bool(self._columns(spec.log_relation))
        parents: dict[int, int | None] = {}
        operations: dict[int, str] = {}
        counts: dict[int, tuple[int, int]] = {}
        current = None
        if exists and position is not None and position.log_snapshot is not None:
            for snapshot_id, parent_id, operation, main in self.query(staleness.log_history(spec.log_relation)):
                parents[int(snapshot_id)] = None if parent_id is None else int(parent_id)
                operations[int(snapshot_id)] = str(operation)
                current = int(main)
            chain = staleness.commits_since(position.log_snapshot, current, parents) or []
            needed = staleness.snapshots_to_count(chain, operations, parents)
            if current is not None and current not in needed:
                needed.append(current)
            if needed:
                counts = {
                    int(r[0]): (int(r[1]), int(r[2]))
                    for r in self.query(staleness.unconsumed_counts(spec.log_relation, position, needed))
                }
        return staleness.out_of_step(
            spec.log_relation, position, log_exists=exists, current=current, parents=parents,
            operations=operations, counts=counts, capture=spec.capture,
        )

    # ---------------------------------------------------------------- mark
    def mark(self, plan: RefreshPlan) -> Propagation:
        """Capture, then fix what this refresh consumes and which snapshots it reads."""
        self.execute("reset spark.wap.id")  # a failed earlier refresh on this connection may have left it set
        # a fast refresh consumes from the state the staleness check accepted; its commit is made
        # on the view snapshot that state was read from, or not at all (publish)
        state, read_at = (plan.view_state, plan.view_read_at) if plan.action == "fast" else (None, None)
        if state is not None and self._idle(plan, state):
            return Propagation([], None, {}, "fast refresh: nothing marked (no master commit or log change since the last refresh); no write")
        for spec in plan.logs.values():
            if spec.capture:
                self.capture(
                    spec, plan.logged_columns.get(spec.log_relation), spec.log_relation in plan.log_evolutions,
                    exists=spec.log_relation in plan.existing_logs and spec.log_relation not in plan.log_evolutions,
                    position=state.logs.get(spec.log_relation) if state is not None else None,
                )
        planned = plan.action
        marked = self._mark_logs(plan, state)
        if plan.action == "fast":
            return self._fast(plan, marked, read_at)
        propagation = self._complete(plan, marked)
        if planned != plan.action:  # a log was reset while marking: say why in the log line
            propagation.summary += f" ({plan.reason})"
        return propagation

    def _idle(self, plan: RefreshPlan, state: ViewState) -> bool:
        """Nothing to capture, mark or write (see staleness.nothing_to_refresh): one metadata query."""
        specs = list(plan.logs.values())
        positions = [(s.capture, s.master_relation, s.log_relation, state.logs.get(s.log_relation)) for s in specs]
        relations = sorted({s.master_relation if s.capture else s.log_relation for s in specs})
        return bool(relations) and staleness.nothing_to_refresh(positions, self._current_snapshots(relations))

    def capture(
        self, spec: LogSpec, logged: Sequence[str] | None, evolve: bool = False, exists: bool = False,
        position: LogPosition | None = None,
    ) -> str:
        """Bring a capture-managed log up to its master's current snapshot; returns what it did."""
        return self.capture_commits(spec, logged, evolve, exists, position).reason

    def capture_commits(
        self, spec: LogSpec, logged: Sequence[str] | None, evolve: bool = False, exists: bool = False,
        position: LogPosition | None = None,
    ) -> CapturePlan:
        """Capture, and return what was captured (the commits, oldest first). ``logged``: the
        master columns the log holds, as planned (None: read them, and evolve the log if its
        master's schema changed); ``evolve``: the plan found the log needs evolving; ``exists``:
        the plan found the log (not looked up again); ``position``: what the refreshing view
        consumed (its log counts are read with the capture's, for the mark that follows)."""
        with _capture_lock(spec.log_relation):
            if logged is None or evolve:
                logged = self._evolve_log(spec)
                exists = logged is not None
            return self._capture(spec, logged, exists, position)

    def _evolve_log(self, spec: LogSpec) -> list[str] | None:
        """Make the log match its master's schema again if it no longer does (LogEvolution);
        returns the master columns it logs (None: it does not exist, or was dropped to be
        recreated). Decided again here, under the capture lock, so a change another refresh
        already made is not made twice."""
        log_columns = dict(self._columns(spec.log_relation))
        if not log_columns:
            return None
        evolution = log_evolution(log_columns, dict(self._columns(spec.master_relation)))
        if evolution is not None:
            for statement in log_sql.evolve_log(spec, evolution):
                self.execute(statement)
            if evolution.recreate:
                return None
            log_columns = evolution.evolved(log_columns)
        return [c for c in log_columns if not c.startswith("_mv_")]

    def _capture(
        self, spec: LogSpec, logged: Sequence[str] | None, exists: bool = False, position: LogPosition | None = None
    ) -> CapturePlan:
        if logged is None or not (exists or self._columns(spec.log_relation)):
            master_columns = self._columns(spec.master_relation)
            self.execute(log_sql.create_log(spec, master_columns))
            logged = [c for c, _ in master_columns]
            current = self._current_snapshots([spec.master_relation]).get(spec.master_relation)
            self.execute(log_sql.watermark_row(spec, logged, current))
            return CapturePlan("none", current, current, f"created {spec.log_relation}, capturing from master snapshot {current}")
        for attempt in range(1, CAPTURE_ATTEMPTS + 1):
            snapshots = self._current_snapshots([spec.log_relation, spec.master_relation])
            capture = self.capture_plan(spec, snapshots, position)
            if capture.method == "none":
                break
            if self._commit_capture(spec, logged, capture, snapshots[spec.log_relation]):
                break
            if attempt == CAPTURE_ATTEMPTS:  # lost the race every time: let the next refresh capture
                raise LogContractError(
                    f"capture into {spec.log_relation} lost {CAPTURE_ATTEMPTS} races to concurrent commits "
                    "on the log; rerun the refresh"
                )
        return CapturePlan(
            capture.method, capture.start, capture.end, f"{spec.log_relation}: {capture.method} ({capture.reason})",
            capture.commits,
        )

    def capture_plan(
        self, spec: LogSpec, snapshots: Mapping[str, int], position: LogPosition | None = None
    ) -> CapturePlan:
        """What a capture of an existing log would do now (reads only)."""
        stats = self._stats(
            spec, snapshots.get(spec.log_relation), position.sequence if position else 0,
            position.commits if position else (),
        )
        current = snapshots.get(spec.master_relation)
        if current is None or (stats["watermarks"] > 0 and stats["captured_through"] == current):
            return plan_capture(stats["captured_through"], stats["watermarks"] > 0, current, [])  # no history needed
        lineage = [
            SnapshotInfo(int(r[0]), r[1], int(r[2]), int(r[3]))
            for r in self.query(log_sql.snapshot_lineage(spec.master_relation))
        ]
        return plan_capture(stats["captured_through"], stats["watermarks"] > 0, snapshots.get(spec.master_relation), lineage)

    def _commit_capture(self, spec: LogSpec, logged: Sequence[str], capture: CapturePlan, log_snapshot: int) -> bool:
        """Append the captured changes to the log as a compare-and-swap: written to a branch made
        from the log snapshot the capture was decided on, then ``main`` is fast-forwarded to it,
        which fails if anything else (another process's capture, a purge) committed to the log
        meanwhile (returns False: decide again). So two processes never append a change twice. (A process killed
        mid-capture leaves its branch behind: ``alter table <log> drop branch mv_capture_...``.)"""
        # unique per attempt: a branch shared by two racing processes could take both appends
        digest = uuid.uuid4().hex[:16]
        branch = f"mv_capture_{digest}"
        log = relation(spec.log_relation)
        try:
            self.execute(f"alter table {log} create branch {ident(branch)} as of version {integer(log_snapshot)}")
            if capture.method == "changelog":
                view = f"mv_changes_{digest}"
                self.execute(log_sql.changelog_view(spec, view, capture.start, capture.end))
                try:
                    self.execute(log_sql.capture_from_changelog(spec, logged, view, capture.end, branch))
                finally:
                    self.execute(f"drop view if exists {ident(view)}")
            elif capture.method == "diff":
                self.execute(log_sql.capture_by_diff(spec, logged, capture.start, capture.end, branch))
            else:  # reset
                self.execute(log_sql.watermark_row(spec, logged, capture.end, reset=True, branch=branch))
            self.execute(f"call spark_catalog.system.fast_forward({string(spec.log_relation)}, 'main', {string(branch)})")
            return True
        except Exception as exc:
            if not lost_race(exc):
                raise
            return False  # another commit on the log won (its capture or purge): decide again
        finally:
            self._drop_branch(log, branch)

    def _current_snapshots(self, relations: Sequence[str]) -> dict[str, int]:
        return {r[0]: int(r[1]) for r in self.query(log_sql.current_snapshots(relations))}

    def _stats(
        self, spec: LogSpec, log_snapshot: int | None, consumed: int, excluded: Sequence[int] = (),
        only: Sequence[int] | None = None,
    ) -> dict[str, Any]:
        empty = {"max_sequence": 0, "inserts": 0, "deletes": 0, "captured_through": None, "watermarks": 0,
                 "watermark_sequence": None, "reset_sequence": None, "oldest_change": None}
        if log_snapshot is None:
            return empty
        key = (spec.log_relation, log_snapshot, consumed, tuple(excluded), None if only is None else tuple(only))
        if key not in self._stats_read:
            row = self.query(log_sql.log_stats(spec, log_snapshot, consumed, excluded, only))[0]
            stats = dict(zip(["log_relation", *empty], row))
            stats["max_sequence"] = stats["max_sequence"] or 0
            self._stats_read[key] = stats
        return dict(self._stats_read[key])

    def _mark_logs(self, plan: RefreshPlan, state: ViewState | None) -> dict[str, MarkedLog]:
        specs = list(plan.logs.values())
        log_snapshots = self._current_snapshots([s.log_relation for s in specs]) if specs else {}
        external = [s.master_relation for s in specs if not s.capture]
        master_snapshots = self._current_snapshots(external) if external else {}
        marked = {}
        for spec in specs:
            position = state.logs.get(spec.log_relation) if state else None
            consumed = position.sequence if position else 0
            excluded = position.commits if position else ()
            stats = self._stats(spec, log_snapshots.get(spec.log_relation), consumed, excluded)
            if plan.action == "fast" and stats["reset_sequence"] is not None and stats["reset_sequence"] > consumed:
                plan.decision = self._fallback(
                    plan.model_name, plan.config,
                    f"the history of {spec.master_relation} was rewritten or expired before it was captured",
                )
            master_snapshot = stats["captured_through"] if spec.capture else master_snapshots.get(spec.master_relation)
            marked[spec.master_relation] = MarkedLog(
                spec=spec,
                log_snapshot=log_snapshots.get(spec.log_relation, 0),
                consumed=consumed,
                upto=max(stats["max_sequence"], consumed),
                inserts=int(stats["inserts"]),
                deletes=int(stats["deletes"]),
                master_snapshot=master_snapshot if master_snapshot is not None else -1,
                excluded=tuple(excluded),
            )
        return marked

    def _state(
        self, plan: RefreshPlan, marked: Mapping[str, MarkedLog], method: str, base: int | None = None
    ) -> ViewState:
        """The state the refresh's commit records; ``base``: the view snapshot an incremental
        refresh read its previous state from (its commit must be made on it, see publish)."""
        if base is None and plan.existing_columns:
            base = self._current_snapshots([plan.view_relation]).get(plan.view_relation)
        return ViewState(
            logs={
                m.spec.log_relation: LogPosition(m.upto, m.master_snapshot, log_snapshot=m.log_snapshot or None)
                for m in marked.values()
            },
            method=method,
            base=base,
        )

    def _publish(self, plan: RefreshPlan, state: ViewState, name: str, write: str) -> list[Step]:
        wap_id = state.encode()
        return [
            Step("stage", f"set spark.wap.id={wap_id}"),
            Step(name, write),
            Step("unstage", "reset spark.wap.id"),
            Step("publish", wap_id, kind="publish"),  # run by publish(): a compare-and-swap
        ]

    def publish(self, view_relation: str, wap_id: str) -> dict[str, str]:
        """Publish the staged commit ``wap_id`` on the view as a compare-and-swap.

        Iceberg's publish_changes cherry-picks, and it cherry-picks an append (an insert-only
        refresh, or a MERGE that only adds rows) onto whatever main is now: two refreshes of one
        view running at once would both apply their changes. Instead ``main`` is fast-forwarded to
        the staged snapshot, which fails unless main is still the snapshot the refresh read:
        of two concurrent refreshes one wins, the other fails cleanly and changes nothing.
        Returns the published commit's row counts (its Iceberg summary).
        """
        target = relation(view_relation)
        counts = ", ".join(f"summary[{string(k)}]" for k in catalog.SUMMARY_KEYS)
        staged = self.query(
            f"select snapshot_id, parent_id, {counts} from {target}.`snapshots` "
            f"where summary['wap.id'] = {string(wap_id)} order by committed_at desc limit 1"
        )
        if not staged:
            raise ConcurrentRefreshError(f"the staged refresh of {view_relation} is gone (expired?); rerun the refresh")
        lost = ConcurrentRefreshError(
            f"another refresh of {view_relation} committed while this one ran: this run's changes were not "
            "applied (the view is correct as the other refresh left it); rerun to pick up anything newer"
        )
        # A staged write is made on whatever main is when it commits, not on the snapshot the
        # refresh read its state from: an incremental refresh whose commit landed on another
        # refresh's commit would apply changes that one already applied.
        state = ViewState.decode(wap_id)
        parent = None if staged[0][1] is None else int(staged[0][1])
        if state is not None and state.method in INCREMENTAL_METHODS and state.base is not None and parent != state.base:
            raise lost
        branch = f"mv_publish_{uuid.uuid4().hex[:16]}"
        try:
            self.execute(f"alter table {target} create branch {ident(branch)} as of version {integer(int(staged[0][0]))}")
            self.execute(f"call spark_catalog.system.fast_forward({string(view_relation)}, 'main', {string(branch)})")
        except Exception as exc:
            if not lost_race(exc):
                raise
            raise lost from exc
        finally:
            self._drop_branch(target, branch)
        return {k: str(v) for k, v in zip(catalog.SUMMARY_KEYS, staged[0][2:]) if v is not None}

    def _drop_branch(self, table: str, branch: str) -> None:
        """Drop a capture's or publish's branch; one left behind by a lost race is harmless (nothing reads it)."""
        try:
            self.execute(f"alter table {table} drop branch if exists {ident(branch)}")
        except Exception as exc:
            if not lost_race(exc):
                raise

    def _fast(self, plan: RefreshPlan, marked: dict[str, MarkedLog], read_at: int | None) -> Propagation:
        assert plan.definition is not None
        if plan.action != "fast":  # a log was reset while marking
            return self._complete(plan, marked)
        statement = view_classes.refresh_statement(plan.definition, plan.view_relation, marked, plan.view_types)
        kinds = ", ".join(f"{m.spec.master_relation}: {m.kind} (+{m.inserts}/-{m.deletes})" for m in marked.values())
        if statement is None:
            return Propagation([], None, marked, f"fast refresh: nothing marked ({kinds}); no write")
        state = self._state(plan, marked, "fast", base=read_at)
        steps = self._publish(plan, state, "main", statement.sql)
        summary = (
            f"fast refresh: {kinds}; steps run: {', '.join(statement.steps_run)}"
            + (f"; skipped: {', '.join(statement.steps_skipped)}" if statement.steps_skipped else "")
        )
        if plan.config.refresh_stats and statement.stats_sql:
            values = self.query(statement.stats_sql)[0]
            summary += "; " + ", ".join(f"{label}: {int(v or 0)}" for label, v in zip(statement.stats_labels, values))
        return Propagation(steps, state, marked, summary)

    def _complete(self, plan: RefreshPlan, marked: dict[str, MarkedLog]) -> Propagation:
        definition = plan.definition
        pinned = definition is not None and all(
            o.master.name in marked and marked[o.master.name].master_snapshot >= 0 for o in definition.occurrences
        )
        if pinned:
            query = definition.render_select({
                o.alias: marked[o.master.name].master_as_of_current_types(_current_types(plan, o.alias))
                for o in definition.occurrences
            })
            columns = definition.stored_columns
            state = self._state(plan, marked, plan.action)
        else:
            query, columns, state = plan.compiled_sql, None, None
        target = relation(plan.view_relation)
        what = "build" if plan.action == "build" else "complete refresh"
        same_table = plan.existing_columns == tuple(columns or ()) and plan.stored_definition == plan.compiled_sql.strip()
        if state is not None and plan.action == "complete" and same_table:
            steps = self._publish(plan, state, "main", f"insert overwrite {target} ({idents(columns)})\n{query}")
            return Propagation(steps, state, marked, f"{what}: recomputed in one commit")
        steps = [Step("main", view_table.enforce_contract(query, columns, plan.contract), kind="create")]
        if state is not None:
            steps += self._publish(plan, state, "record", f"insert into {target} select * from {target} where false")
        return Propagation(steps, state, marked, f"{what}: table replaced")

    # ---------------------------------------------------------------- on commit
    def on_commit(
        self, master_relation: str, graph: Mapping[str, Any], existing: Callable[[str], bool],
        commits: Sequence[int] | None = None,
    ) -> list[str]:
        """Propagate just the given commits of a master (default: the commits captured now) to
        every existing fast_refresh view that reads it; Oracle 11gR2's on-commit refresh."""
        all_logs = logs_by_master(log_specs_from_graph(graph))
        spec = all_logs.get(master_relation)
        if spec is None:
            raise LogContractError(
                f"refresh_on_commit: no change log is declared for {master_relation} (declare one with meta.mv_log)."
            )
        if spec.capture:
            captured = self.capture_commits(spec, None)
            if captured.method == "reset":
                return [f"{captured.reason}: the views reading {master_relation} need a complete refresh (dbt run)"]
            if commits is None:
                commits = captured.commits
        elif commits is None:
            raise LogContractError(
                f"refresh_on_commit: the {spec.describe()} is written by your ingestion: name the commits "
                "to propagate, e.g. refresh_on_commit(commits=[...])."
            )
        if not commits:
            return [f"{master_relation}: no new commit to propagate"]
        return [
            self._refresh_on_commit(view, spec, commit_ids(commits), graph, all_logs, existing)
            for view in view_consumers(graph, master_relation)
            if existing(view)
        ]

    def _refresh_on_commit(
        self, view: str, spec: LogSpec, commits: tuple[int, ...], graph: Mapping[str, Any],
        all_logs: Mapping[str, LogSpec], existing: Callable[[str], bool],
    ) -> str:
        state, read_at = catalog.view_state_at(self.query, view)
        position = state.logs.get(spec.log_relation) if state else None
        if state is None or position is None:
            return f"{view}: skipped, it has no record of its logs (the next dbt run refreshes it completely)"
        definition = self.stored_definition(view, graph, all_logs)
        if isinstance(definition, str):
            return f"{view}: skipped ({definition})"
        if view_classes.blocker(definition):
            return f"{view}: skipped (on-commit refresh of {definition.view_class.value} views is not available yet)"
        masters = sorted({o.master.name for o in definition.occurrences})
        snapshots = self._current_snapshots(sorted({*masters, spec.log_relation}))
        marked = {}
        for master in masters:
            log = all_logs[master]
            if master != spec.master_relation:
                marked[master] = MarkedLog(log, 0, 0, 0, 0, 0, snapshots[master])
                continue
            stats = self._stats(spec, snapshots.get(spec.log_relation), position.sequence, position.commits, commits)
            # A captured commit id is the master's snapshot id: read the master as of the newest
            # named commit, so later commits do not leak in. Ingestion-written logs: as of now.
            as_of = snapshots[master]
            if spec.capture:
                as_of = next((c for c in reversed(self._lineage_order(master)) if c in commits), snapshots[master])
            marked[master] = MarkedLog(
                spec=spec, log_snapshot=snapshots.get(spec.log_relation, 0), consumed=position.sequence,
                upto=max(stats["max_sequence"], position.sequence), inserts=int(stats["inserts"]),
                deletes=int(stats["deletes"]), master_snapshot=as_of, excluded=position.commits, only=commits,
            )
        statement = view_classes.refresh_statement(definition, view, marked, dict(self._columns(view)))
        if statement is None:
            return f"{view}: nothing of commit(s) {', '.join(map(str, commits))} to propagate"
        logs = dict(state.logs)
        logs[spec.log_relation] = LogPosition(
            position.sequence, marked[spec.master_relation].master_snapshot, tuple(sorted({*position.commits, *commits})),
            position.log_snapshot,
        )
        new_state = ViewState(logs=logs, method="on-commit", base=read_at)
        wap_id = new_state.encode()
        self.execute(f"set spark.wap.id={wap_id}")
        try:
            self.execute(statement.sql)
        finally:
            self.execute("reset spark.wap.id")
        self.publish(view, wap_id)
        purged = self.purge_log(spec, new_state, view, graph, existing)
        kind = marked[spec.master_relation].kind
        return (
            f"{view}: on-commit refresh of {spec.master_relation} commit(s) {', '.join(map(str, commits))}: "
            f"{kind}; steps run: {', '.join(statement.steps_run)}" + (f"; purged {', '.join(purged)}" if purged else "")
        )

    def stored_definition(
        self, view: str, graph: Mapping[str, Any], all_logs: Mapping[str, LogSpec] | None = None
    ) -> ViewDefinition | str:
        """The analysed definition a view was built from (its table property), or why not."""
        if all_logs is None:
            all_logs = logs_by_master(log_specs_from_graph(graph))
        sql = catalog.table_property(self.query, view, DEFINITION_PROPERTY)
        if sql is None:
            return "it was not built by this plugin version (no stored definition)"
        node = next(
            (n for n in graph.get("nodes", {}).values() if n.get("resource_type") == "model" and _relation_name(n) == view),
            None,
        )
        if node is None:
            return "it is not a model of this project"
        masters = dependency_relations(node, graph)
        missing = [m for m in masters if m not in all_logs]
        if missing:
            return f"no change log is declared for {', '.join(missing)}"
        tables = {m: MasterTable(name=m, columns=tuple(self._columns(m)), key=all_logs[m].key) for m in masters}
        try:
            return analyze_view(sql, tables)
        except UnsupportedViewError as exc:
            return str(exc)

    def _lineage_order(self, master: str) -> list[int]:
        """The master's current ancestry, oldest first (snapshot ids are not ordered)."""
        rows = self.query(log_sql.snapshot_lineage(master))
        parents = {int(r[0]): r[1] for r in rows}
        current = self._current_snapshots([master]).get(master)
        order = []
        while current is not None and current in parents:
            order.append(current)
            current = parents[current]
        return list(reversed(order))

    # ---------------------------------------------------------------- status
    def status(self, model: Mapping[str, Any], view_relation: str, graph: Mapping[str, Any]) -> staleness.ViewStatus:
        """The built view's state (fresh, stale, needs rebuild, unusable) and why. Reads only: the
        plan's checks, the logs' unconsumed rows and what a capture would do, nothing captured."""
        from dbt_incremental_mv.config import ConfigError

        name = str(model.get("name", "?"))
        # run-operation does not compile models: compare with the stored definition then (only
        # master column changes show; an edited model shows at its next run)
        sql = model.get("compiled_code") or catalog.table_property(self.query, view_relation, DEFINITION_PROPERTY)
        if sql is None:
            return staleness.view_status(name, built=True, unusable="not built by this plugin version: run dbt run --full-refresh")
        decide_only = {**(model.get("config") or {}), "refresh_method": "force", "on_configuration_change": "apply"}
        try:
            plan = self.plan({**model, "config": decide_only}, sql, view_relation, "table", False, graph)
        except (ConfigError, LogContractError) as exc:
            return staleness.view_status(name, built=True, unusable=str(exc))
        if plan.action == "build":
            return staleness.view_status(name, built=True, rebuild=[plan.reason.removesuffix(": rebuilding the view in full")])
        if plan.out_of_step is not None:
            return staleness.view_status(name, built=True, rebuild=[plan.out_of_step])
        if plan.action != "fast":
            return staleness.view_status(name, built=True, unusable=plan.reason.removeprefix("fast refresh impossible: "))
        state = catalog.view_state(self.query, view_relation)
        assert state is not None  # plan() checked it
        rebuild, pending = [], []
        for spec in plan.logs.values():
            position = state.logs[spec.log_relation]
            snapshots = self._current_snapshots([spec.log_relation, spec.master_relation])
            stats = self._stats(spec, snapshots.get(spec.log_relation), position.sequence, position.commits)
            uncaptured = 0
            if spec.capture:
                capture = self.capture_plan(spec, snapshots)
                uncaptured = len(capture.commits)
                if capture.method == "reset":
                    rebuild.append(f"the history of {spec.master_relation} was rewritten or expired before it was captured")
            if stats["reset_sequence"] is not None and stats["reset_sequence"] > position.sequence:
                rebuild.append(f"the history of {spec.master_relation} was rewritten or expired before it was captured")
            pending.append(staleness.PendingChanges(
                spec.master_relation, int(stats["inserts"] or 0) + int(stats["deletes"] or 0), uncaptured
            ))
        return staleness.view_status(name, built=True, rebuild=rebuild, pending=pending)

    # ---------------------------------------------------------------- report
    def touched_rows(self, plan: RefreshPlan, propagation: Propagation) -> str:
        """Rows the published commit inserted into and deleted from the view."""
        if not propagation.steps:
            return ""
        if any(step.kind == "create" for step in propagation.steps):
            # the table was built anew (its last commit is the empty bookkeeping one): its size
            count = self.query(f"select count(*) from {relation(plan.view_relation)}")[0][0]
            return f"view rows: {int(count or 0)}"
        summary = plan.published_summary
        if summary is None:
            summary = catalog.snapshot_summary(self.query, plan.view_relation)
        inserted = int(summary.get("added-records") or 0)
        deleted = int(summary.get("added-position-deletes") or 0) + int(summary.get("added-equality-deletes") or 0)
        if summary.get("deleted-records") and not deleted:  # copy-on-write: rewritten rows count as deleted
            deleted = int(summary["deleted-records"])
        return f"view rows: +{inserted} -{deleted}"

    # ---------------------------------------------------------------- purge
    def purge(self, plan: RefreshPlan, propagation: Propagation, graph: Mapping[str, Any], existing: Callable[[str], bool]) -> list[str]:
        """Delete log rows that every dependent view has consumed. Returns what was purged."""
        done: list[str] = []
        if propagation.state is None:
            return done
        states: dict[str, ViewState | None] = {}  # each other view read once, whatever logs it shares
        for spec in plan.logs.values():
            done += self.purge_log(spec, propagation.state, plan.view_relation, graph, existing, states)
        return done

    def purge_log(
        self, spec: LogSpec, state: ViewState, view_relation: str, graph: Mapping[str, Any], existing: Callable[[str], bool],
        states: dict[str, ViewState | None] | None = None,
    ) -> list[str]:
        """Purge what every view on the log consumed. ``states``: other views' states already read
        in this refresh (a state read a moment ago is safe: a view's position only grows, so an
        older one purges less, never more)."""
        done: list[str] = []
        states = {} if states is None else states
        own = state.logs[spec.log_relation]
        positions = [(own.sequence, own.commits)]
        for consumer in view_consumers(graph, spec.master_relation):
            if consumer == view_relation or not existing(consumer):
                continue
            if consumer not in states:
                states[consumer] = catalog.view_state(self.query, consumer)
            other = states[consumer]
            position = other.logs.get(spec.log_relation) if other else None
            if position is not None:
                positions.append((position.sequence, position.commits))
        floor = min(sequence for sequence, _ in positions)
        stats = self._stats(spec, self._current_snapshots([spec.log_relation]).get(spec.log_relation), floor)
        consumed_rows = stats["oldest_change"] is not None and stats["oldest_change"] <= floor
        consumed_on_commit = all(commits for _, commits in positions)
        if not (consumed_rows or consumed_on_commit or stats["watermarks"] > WATERMARKS_BEFORE_PURGE):
            return done
        try:
            self.execute(log_sql.purge(spec, positions, stats["watermark_sequence"]))
        except Exception as exc:  # noqa: BLE001 - a concurrent write won; the next refresh purges
            reason = str(getattr(exc, "msg", exc)).strip().splitlines()[0][:160]
            done.append(f"{spec.log_relation} left for the next refresh (concurrent commit: {reason})")
        else:
            done.append(f"{spec.log_relation} through sequence {floor}")
        return done
