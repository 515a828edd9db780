"""Publish: the view's data and the record of what it consumed change in ONE Iceberg commit.

Every write to a view is staged (``spark.wap.id`` set to the encoded ViewState, see
bookkeeping.py) and then published by moving the view's main branch to the staged snapshot as a
compare-and-swap: of two refreshes of one view running at once, one wins and the other fails
cleanly, having changed nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from dbt_incremental_mv.bookkeeping import LogPosition, ViewState
from dbt_incremental_mv.conflicts import lost_race
from dbt_incremental_mv.refresh.context import RefreshContext

# Refreshes that apply changes to the view as it was (a complete refresh recomputes it instead).
INCREMENTAL_METHODS = ("fast", "on-commit")
# Row counts of a published commit (its Iceberg summary), for the log line.
SUMMARY_KEYS = (
    "added-records", "deleted-records", "added-position-deletes", "removed-position-deletes",
    "added-equality-deletes", "removed-equality-deletes",
)


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


def staged(state: ViewState, name: str, write: str) -> list[Step]:
    """``write``, staged with the state it records, then published."""
    wap_id = state.encode()
    return [
        Step("stage", f"set spark.wap.id={wap_id}"),
        Step(name, write),
        Step("unstage", "reset spark.wap.id"),
        Step("publish", wap_id, kind="publish"),  # run by publish(): a compare-and-swap
    ]


def commit_state(marked, method: str, base: int | None) -> ViewState:
    """The state a refresh's commit records; ``base``: the view snapshot it is made on."""
    return ViewState(
        logs={
            m.spec.log_relation: LogPosition(m.upto, m.master_snapshot, log_snapshot=m.log_snapshot or None)
            for m in marked.values()
        },
        method=method,
        base=base,
    )


def publish(ctx: RefreshContext, view_relation: str, wap_id: str) -> dict[str, str]:
    """Publish the staged commit ``wap_id`` on the view as a compare-and-swap.

    Iceberg's publish_changes cherry-picks, and it cherry-picks an append (an insert-only
    refresh, or a MERGE that only adds rows) onto whatever main is now: two refreshes of one
    view running at once would both apply their changes. Instead ``main`` is moved to the staged
    snapshot only if it is still the staged snapshot's parent. A staged write is made on whatever
    main is when it commits, not on the snapshot the refresh read its state from: an incremental
    refresh staged on another refresh's commit would apply changes that one already applied, so
    its parent must also be the snapshot the state was read from. Returns the published commit's
    row counts (its Iceberg summary).
    """
    meta = ctx.metadata
    meta.forget(view_relation)
    view = meta.table(view_relation)
    found = [s for s in (view.snapshots.values() if view is not None else ()) if s.summary.get("wap.id") == wap_id]
    if not found:
        raise ConcurrentRefreshError(f"the staged refresh of {view_relation} is gone (expired?); rerun the refresh")
    staged_snapshot = found[-1]
    lost = ConcurrentRefreshError(
        f"another refresh of {view_relation} committed while this one ran: this run's changes were not "
        "applied (the view is correct as the other refresh left it); rerun to pick up anything newer"
    )
    state = ViewState.decode(wap_id)
    parent = staged_snapshot.parent_id
    if state is not None and state.method in INCREMENTAL_METHODS and state.base is not None and parent != state.base:
        raise lost
    try:
        meta.fast_forward(view_relation, parent, to_snapshot=staged_snapshot.snapshot_id)
    except Exception as exc:
        if not lost_race(exc):
            raise
        raise lost from exc
    return {k: v for k, v in staged_snapshot.summary.items() if k in SUMMARY_KEYS}


def view_rows_line(summary: dict[str, str]) -> str:
    """Rows a published commit inserted into and deleted from the view (net of the delete files
    it rewrote: merge-on-read writes a data file's old position deletes again with its new ones)."""
    def count(key: str) -> int:
        return int(summary.get(key) or 0)

    inserted = count("added-records")
    deleted = (count("added-position-deletes") - count("removed-position-deletes")
               + count("added-equality-deletes") - count("removed-equality-deletes"))
    if count("deleted-records") and not deleted:  # copy-on-write: rewritten rows count as deleted
        deleted = count("deleted-records")
    return f"view rows: +{inserted} -{deleted}"
