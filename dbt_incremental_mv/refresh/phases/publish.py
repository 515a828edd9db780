"""Publish: the view's data and the record of what it consumed change in ONE Iceberg commit.

Every write to a view is staged (``spark.wap.id`` set to the encoded ViewState, see
refresh/state/bookkeeping.py) and then published by moving the view's main branch to the staged snapshot as a
compare-and-swap: of two refreshes of one view running at once, one wins and the other fails
cleanly, having changed nothing.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from dbt_incremental_mv.analysis.clock import Clock
from dbt_incremental_mv.conflicts import lost_race
from dbt_incremental_mv.layout import ROW_TOTALS, TOTALS
from dbt_incremental_mv.metadata import WAP_ID, Setting, drop_temp_view_statement, setting_statements
from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.state.bookkeeping import LogPosition, ViewState
from dbt_incremental_mv.refresh.views.statement import (
    WRITE_BRANCH_PREFIX,
    Fallback,
    LeanForm,
    RefreshStatement,
    Write,
)

# Refreshes that apply changes to the view as it was (a complete refresh recomputes it instead).
INCREMENTAL_METHODS = ("fast", "on-commit")
# Row counts of a published commit (its Iceberg summary), for the log line.
SUMMARY_KEYS = (
    "added-records",
    "deleted-records",
    "added-position-deletes",
    "removed-position-deletes",
    "added-equality-deletes",
    "removed-equality-deletes",
)


# Spark 3.5 plans a CACHE TABLE's query in a clone of the session unless the first three are set
# (CacheManager.getOrCloneSessionWithConfigsOff). A clone stays referenced by every Spark thread
# started while it is active (the broadcast-exchange pool keeps up to 128, each holding its
# inherited active session), so a long-lived JVM accumulated one per cached view. Adaptive
# execution off, as in the clone: the cached plan is the one Spark made before, and an adaptive
# cached plan would print both its initial and final plans wherever it is read. Set around the
# caching only: the writes keep adaptive execution and its final-stage shuffle optimisations.
# The cached views keep their analysed plans rather than their SQL text: a view read by a view
# read by the writes was otherwise parsed and analysed again at every reference of every statement
# (Spark's analyzer then spent more time resolving a refresh's relations than running its jobs).
STORE_ANALYSED_PLAN = "spark.sql.legacy.storeAnalyzedPlanForView"
CACHE_PLANNING = (
    ("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true"),
    ("spark.sql.adaptive.applyFinalStageShuffleOptimizations", "false"),
    ("spark.sql.sources.bucketing.autoBucketedScan.enabled", "false"),
    ("spark.sql.adaptive.enabled", "false"),
    (STORE_ANALYSED_PLAN, "true"),
)


def cache_planning(*, analysed_plans: bool = True) -> tuple[tuple[Setting, ...], tuple[Setting, ...]]:
    """The settings above, and the same keys back to the session's own (``analysed_plans=False``:
    the cached views keep their SQL text, as Spark's default)."""
    settings = tuple((k, v) for k, v in CACHE_PLANNING if analysed_plans or k != STORE_ANALYSED_PLAN)
    return settings, tuple((key, None) for key, _ in settings)


# a write branch this old was left by a killed refresh (no refresh runs for a day)
STALE_BRANCH_MS = 24 * 3600 * 1000


class ConcurrentRefreshError(RuntimeError):
    """Another refresh of the same view committed first; this one changed nothing."""


class StepKind(str, Enum):
    """What the materialization does with a step (it compares ``step.kind`` with the value)."""

    SQL = "sql"  # run the step's statement
    CREATE = "create"  # wrap the step's query in the view's DDL (partitioning, location, properties)
    SETTINGS = "settings"  # change the session's ``settings`` (Metadata.apply_settings: no statement when embedded)
    UNCACHE = "uncache"  # drop the cached ``temp_view`` (Metadata.drop_temp_view: no statement when embedded)
    PUBLISH = "publish"  # publish the commit staged with ``wap_id`` (publish(): a compare-and-swap)
    LOG = "log"  # mv_log=true: write what the commit staged with ``wap_id`` changed (own_log.py)


@dataclass(frozen=True)
class Step:
    """One step of the propagate phase: a statement (``sql``), the session settings a
    ``settings`` step changes, the cached temporary view an ``uncache`` step drops, or for
    ``publish`` and ``log`` steps the id of the staged commit they act on (``wap_id``)."""

    name: str
    sql: str = ""
    kind: StepKind = StepKind.SQL
    wap_id: str | None = None
    settings: tuple[Setting, ...] = ()
    temp_view: str = ""
    lean: LeanForm | None = None  # the statement's lean form (statement.LeanForm)
    fallback: Fallback | None = None  # what runs if the statement stops (statement.Fallback)

    @property
    def statements(self) -> list[str]:
        """What the step runs as SQL statements (over SQL; explain lists them): the statement,
        the SET/RESET statements of its settings, the DROP VIEW of its temporary view."""
        if self.kind is StepKind.SETTINGS:
            return setting_statements(self.settings)
        if self.kind is StepKind.UNCACHE:
            return [drop_temp_view_statement(self.temp_view)]
        return [self.sql]


def caching(statements: Sequence[str]) -> list[Step]:
    """``statements`` (CACHE TABLEs) planned in the session itself: between the settings' change
    and their reset (nothing when there is nothing to cache)."""
    if not statements:
        return []
    before, after = cache_planning()
    return [
        Step("cache", kind=StepKind.SETTINGS, settings=before),
        *(Step("cache", sql) for sql in statements),
        Step("cache", kind=StepKind.SETTINGS, settings=after),
    ]


def write_step(name: str, write: Write) -> Step:
    """The step running ``write`` (in its lean form when the count it needs is 0; its fallback
    when it stops)."""
    return Step(name, write.sql, lean=write.lean, fallback=write.fallback)


def staged(state: ViewState, name: str, write: Write, before: Sequence[Write] = ()) -> list[Step]:
    """``write``, staged with the state it records, then published; ``before``: the writes
    that precede it on the refresh's write branch (see statement.py)."""
    wap_id = state.encode()
    return [write_step(w.kind, w) for w in before] + [
        Step("stage", kind=StepKind.SETTINGS, settings=((WAP_ID, wap_id),)),
        write_step(name, write),
        Step("unstage", kind=StepKind.SETTINGS, settings=((WAP_ID, None),)),
        Step("publish", kind=StepKind.PUBLISH, wap_id=wap_id),  # run by publish(): a compare-and-swap
    ]


def staged_statement(state: ViewState, statement: RefreshStatement, log: bool = False) -> list[Step]:
    """The steps of a view class's writes: all staged on the write branch but the last; the
    cached views they read made first and dropped after the last write. ``log``: the view keeps
    its own change log: its rows are written after the writes, while the cached views the
    writes' filter reads still exist (``log`` step, run by own_log.py)."""
    made = caching([c.statement for c in statement.cached])
    *before, last = statement.writes
    steps = staged(state, "main", last, before)
    dropped = [Step("uncache", kind=StepKind.UNCACHE, temp_view=c.name) for c in statement.cached]
    logged = [Step("log", kind=StepKind.LOG, wap_id=steps[-1].wap_id)] if log else []
    return made + steps[:-1] + logged + dropped + steps[-1:]


def staged_snapshot(ctx: RefreshContext, view_relation: str, wap_id: str):
    """The view's snapshot staged with ``wap_id`` (None: gone, or never made)."""
    ctx.metadata.forget(view_relation)
    view = ctx.metadata.table(view_relation)
    found = [s for s in (view.snapshots.values() if view is not None else ()) if s.summary.get("wap.id") == wap_id]
    return found[-1] if found else None


def write_branch(now_ms: int | None = None) -> str:
    """A new write branch's name: unique, and telling when it was made (for the cleanup of one a
    killed refresh left behind)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return f"{WRITE_BRANCH_PREFIX}{now_ms}_{secrets.token_hex(4)}"


def stale_write_branches(branches: Sequence[str], now_ms: int | None = None) -> list[str]:
    """Write branches older than STALE_BRANCH_MS: left by a refresh that was killed."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    stale = []
    for name in branches:
        made = name[len(WRITE_BRANCH_PREFIX) :].split("_", 1)[0] if name.startswith(WRITE_BRANCH_PREFIX) else ""
        if made.isdigit() and now_ms - int(made) > STALE_BRANCH_MS:
            stale.append(name)
    return sorted(stale)


def commit_state(
    marked,
    method: str,
    base: int | None,
    clock: Clock | None = None,
    states: tuple[str, ...] = (),
    changes: str = "",
) -> ViewState:
    """The state a refresh's commit records; ``base``: the view snapshot it is made on; ``clock``:
    the time the view's clock functions read as (None: it reads no clock); ``states``: the
    internal states of a view maintained in steps (refresh/units.py); ``changes``: the record of
    what its last fast refreshes changed (refresh/indexed_choice.py)."""
    return ViewState(
        logs={
            m.spec.log_relation: LogPosition(
                m.upto, m.master_snapshot, log_snapshot=m.log_snapshot or None, uncaptured=m.uncaptured
            )
            for m in marked.values()
        },
        method=method,
        base=base,
        run=secrets.token_hex(6),
        clock=clock.timestamp if clock is not None else None,
        states=states,
        changes=changes,
    )


def open_write_branch(ctx: RefreshContext, view_relation: str, branch: str, read_at: int | None) -> None:
    """Make the write branch at the view snapshot the refresh read its state from, and drop the
    branches killed refreshes left behind (the Java API sees them: one metadata commit each)."""
    assert read_at is not None, "a fast refresh reads the view's state from a snapshot"
    if ctx.metadata.in_jvm:  # over SQL the refs are not read: no load of the view's metadata for nothing
        view = ctx.metadata.table(view_relation)
        for stale in stale_write_branches(list(view.branches) if view is not None else []):
            ctx.metadata.drop_branch(view_relation, stale)
    ctx.metadata.create_branch(view_relation, branch, read_at)
    ctx.metadata.forget(view_relation)


def publish(ctx: RefreshContext, view_relation: str, wap_id: str, branch: str | None = None) -> dict[str, str]:
    """Publish the staged commit ``wap_id`` on the view as a compare-and-swap.

    Iceberg's publish_changes cherry-picks, and it cherry-picks an append (an insert-only
    refresh, or a MERGE that only adds rows) onto whatever main is now: two refreshes of one
    view running at once would both apply their changes. Instead ``main`` is moved to the staged
    snapshot only if it is still where the staged writes began. A staged write is made on
    whatever main (or the write ``branch``) is when it commits, not on the snapshot the refresh
    read its state from: an incremental refresh staged on another refresh's commit would apply
    changes that one already applied, so the writes must also begin at the snapshot the state
    was read from. The write branch is dropped in the same commit. Returns the published
    writes' row counts (their Iceberg summaries, added up) and the view's file totals after them.
    """
    meta = ctx.metadata
    staged = staged_snapshot(ctx, view_relation, wap_id)
    if staged is None:
        raise ConcurrentRefreshError(f"the staged refresh of {view_relation} is gone (expired?); rerun the refresh")
    view = meta.table(view_relation)
    lost = ConcurrentRefreshError(
        f"another refresh of {view_relation} committed while this one ran: this run's changes were not "
        "applied (the view is correct as the other refresh left it); rerun to pick up anything newer"
    )
    try:
        return _publish(meta, view, view_relation, wap_id, staged, branch, lost)
    except ConcurrentRefreshError:
        if branch is not None:  # this run's writes: nothing will publish them
            meta.drop_branch(view_relation, branch)
        raise


def _publish(meta, view, view_relation: str, wap_id: str, staged_snapshot, branch: str | None, lost) -> dict[str, str]:
    state = ViewState.decode(wap_id)
    writes = [staged_snapshot]  # the staged write and the branch's writes before it, newest first
    began = staged_snapshot.parent_id
    if branch is not None:
        chain = view.ancestry(staged_snapshot.parent_id)  # the branch's writes, then the view before them
        ids = [s.snapshot_id for s in chain]
        if state is None or state.base is None or state.base not in ids:
            raise lost
        writes += chain[: ids.index(state.base)]
        began = state.base
    if state is not None and state.method in INCREMENTAL_METHODS and state.base is not None and began != state.base:
        raise lost
    try:
        meta.fast_forward(
            view_relation,
            began,
            to_snapshot=staged_snapshot.snapshot_id,
            drop_branches=(branch,) if branch else (),
        )
    except Exception as exc:
        if not lost_race(exc):
            raise
        raise lost from exc
    totals: dict[str, int] = {}
    for snapshot in writes:
        for key in SUMMARY_KEYS:
            totals[key] = totals.get(key, 0) + snapshot.count(key)
    # the view's files as published (the newest write's totals: compact.py decides from them)
    files = {key: staged_snapshot.summary[key] for key in TOTALS + ROW_TOTALS if key in staged_snapshot.summary}
    return {
        **{k: str(v) for k, v in totals.items() if v},
        **files,
        PUBLISHED_SNAPSHOT: str(staged_snapshot.snapshot_id),
    }


PUBLISHED_SNAPSHOT = "snapshot-id"  # in publish()'s summary: the view snapshot it published


def rows_written(summary: Mapping[str, str]) -> tuple[int, int]:
    """(inserted, deleted) rows of a published commit (net of the delete files it rewrote:
    merge-on-read writes a data file's old position deletes again with its new ones)."""

    def count(key: str) -> int:
        return int(summary.get(key) or 0)

    inserted = count("added-records")
    # rows of the data files removed (a copy-on-write rewrite, an overwrite), less those of them
    # already deleted by position, plus the rows the delete files added delete
    deleted = (
        count("deleted-records")
        + count("added-position-deletes")
        - count("removed-position-deletes")
        + count("added-equality-deletes")
        - count("removed-equality-deletes")
    )
    return inserted, deleted


def view_rows_line(summary: dict[str, str]) -> str:
    """Rows a published commit inserted into and deleted from the view."""
    inserted, deleted = rows_written(summary)
    return f"view rows: +{inserted} -{deleted}"
