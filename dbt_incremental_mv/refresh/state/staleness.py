"""Whether a view and its change logs are still in step, and the view's state for people.

A view records, per log, how far it consumed it (``LogPosition``): the row sequence, the master
snapshot it reflects and the log snapshot it read. Its next fast refresh is right only if the
log still holds every change after that position. Two things break that without the plugin
knowing, and both are detectable from Iceberg metadata plus one small count per log:

- **the log's history no longer contains the log snapshot the view read** (the log was dropped
  and recreated, rolled back, or its snapshots were expired past the view's position): the
  rows after the position cannot be told apart from rows the view already has;
- **a commit after that snapshot removed rows the view has not consumed**. The unconsumed rows
  of a view (images after its sequence, not of a commit it consumed on commit) can only grow:
  captures and ingestion append, compaction rewrites them unchanged, and the plugin's purge
  deletes only rows every view consumed (and superseded watermarks, which are not counted). So
  for each commit since that snapshot that is not an append, the count of the view's
  unconsumed images is compared before and after it: fewer after means someone deleted
  changes the view needed (``delete from <log>`` by hand, a foreign retention job).

A capture-managed log also needs its capture watermark: without it the next capture could not
tell where the log stops. The master's own history (expired or rolled back before capture) is
checked by the capture itself (a reset watermark, see logs/capture_plan.py).

Any of these makes the view *out of step*: it gets a complete refresh (or fails under
``refresh_method='fast'``), never a partial one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from dbt_incremental_mv.logs import sql as log_sql
from dbt_incremental_mv.logs.contract import DELETE, INSERT, OP_COLUMN
from dbt_incremental_mv.metadata import commits_since
from dbt_incremental_mv.refresh.state.bookkeeping import LogPosition
from dbt_incremental_mv.sql_text import ident, integer, relation, string

APPEND = "append"


def unconsumed_counts(log_relation: str, position: LogPosition, snapshots: Sequence[int]) -> str:
    """Per log snapshot: the images the view has not consumed, and the capture watermarks."""
    op = ident(OP_COLUMN)
    images = (
        f"{op} in ({string(INSERT)}, {string(DELETE)}) and {log_sql.unconsumed(position.sequence, position.commits)}"
    )
    parts = [
        f"select {integer(s)} as snapshot_id, count_if({images}) as unconsumed, "
        f"count_if(not ({op} in ({string(INSERT)}, {string(DELETE)}))) as watermarks\n"
        f"from {relation(log_relation)} version as of {integer(s)}"
        for s in snapshots
    ]
    return "\nunion all\n".join(parts)


def snapshots_to_count(
    chain: Sequence[int], operations: Mapping[int, str], parents: Mapping[int, int | None]
) -> list[int]:
    """The snapshots whose unconsumed counts decide: each non-append commit and its parent."""
    needed: list[int] = []
    for snapshot in chain:
        if operations.get(snapshot) != APPEND:
            for s in (parents[snapshot], snapshot):
                if s is not None and s not in needed:
                    needed.append(s)
    return needed


def out_of_step(
    log_relation: str,
    position: LogPosition | None,
    *,
    log_exists: bool,
    current: int | None,
    parents: Mapping[int, int | None],
    operations: Mapping[int, str],
    counts: Mapping[int, tuple[int, int]],
    capture: bool,
) -> str | None:
    """Why the view's position in the log no longer matches the log (None: it still does).

    ``counts``: for the snapshots ``snapshots_to_count`` named and the current one,
    (unconsumed images, watermarks). Views whose position records no log snapshot (built by an
    older version) are not checked until their next refresh records one.
    """
    if position is None:
        return None
    if not log_exists:
        return f"the change log {log_relation} the view was refreshed from no longer exists"
    if position.log_snapshot is None:
        return None
    chain = commits_since(position.log_snapshot, current, parents)
    if chain is None:
        return (
            f"the change log {log_relation} no longer holds the snapshot {position.log_snapshot} the view was last "
            "refreshed from (the log was dropped and recreated, rolled back, or its snapshots were expired "
            "past the view's position)"
        )
    for snapshot in chain:
        parent = parents[snapshot]
        if operations.get(snapshot) == APPEND or parent is None:
            continue
        before, after = counts[parent][0], counts[snapshot][0]
        if after < before:
            return (
                f"{before - after} change(s) the view had not consumed were deleted from {log_relation} by "
                f"its commit {snapshot} ({operations.get(snapshot)}), which was not the plugin's purge"
            )
    if capture and current is not None and current in counts and counts[current][1] == 0:
        return f"the capture watermark of {log_relation} was deleted: the log no longer says where its changes start"
    return None


# ------------------------------------------------------------------ the view's state, for people


class Staleness(StrEnum):
    """How a view stands (Oracle's USER_MVIEWS.STALENESS); the value is what mv_status prints."""

    FRESH = "fresh"
    STALE = "stale"  # changes pending: the next run applies them
    NEEDS_REBUILD = "needs rebuild"  # the next run recomputes it (and says why)
    UNUSABLE = "unusable"  # it cannot be fast refreshed
    NOT_BUILT = "not built"

    @classmethod
    def named(cls, text: str) -> Staleness:
        """The state a user names, in either spelling: ``needs rebuild`` or ``needs_rebuild``."""
        wanted = text.strip().lower().replace("_", " ")
        for state in cls:
            if state.value == wanted:
                return state
        allowed = ", ".join(state.value.replace(" ", "_") for state in cls if state is not cls.FRESH)
        raise ValueError(f"mv_status: fail_on names {text!r}, which is not a state. Allowed: {allowed}.")


@dataclass(frozen=True)
class PendingChanges:
    """What a refresh would consume from one master now."""

    master: str
    logged: int  # images in the log the view has not consumed
    uncaptured: int  # master commits not captured into the log yet (capture-managed logs)

    def describe(self) -> str:
        parts = []
        if self.logged:
            parts.append(f"{self.logged} logged change(s)")
        if self.uncaptured:
            parts.append(f"{self.uncaptured} uncaptured commit(s)")
        return f"{self.master}: {' + '.join(parts)}"


@dataclass(frozen=True)
class ViewStatus:
    model: str
    status: Staleness
    detail: str = ""
    # why the view's files are due for compaction (layout.ViewFiles), whatever its state
    compaction: str = ""

    def line(self) -> str:
        text = f"{self.model}: {self.status}" + (f" ({self.detail})" if self.detail else "")
        if self.compaction:
            text += (
                f"; compaction recommended ({self.compaction}):"
                f" dbt run-operation mv_compact --args '{{models: [{self.model}]}}'"
            )
        return text


def view_status(
    model: str,
    *,
    built: bool,
    unusable: str | None = None,
    rebuild: Sequence[str] = (),
    pending: Sequence[PendingChanges] = (),
    crossed: str | None = None,
) -> ViewStatus:
    """Oracle's STALENESS, decided: ``unusable`` (why it cannot be fast refreshed: no log,
    unsupported construct), ``rebuild`` (why the next run recomputes it: definition or master
    column changed, log out of step, master history rewritten), ``pending`` (changes per master),
    ``crossed`` (rows the time moved across, which the next run applies: a join view reading the clock)."""
    if not built:
        return ViewStatus(model, Staleness.NOT_BUILT, "dbt run builds it")
    if unusable:
        return ViewStatus(model, Staleness.UNUSABLE, unusable)
    if rebuild:
        return ViewStatus(model, Staleness.NEEDS_REBUILD, "; ".join(rebuild))
    changed = [p for p in pending if p.logged or p.uncaptured]
    if changed or crossed:
        found = ["changes pending: " + ", ".join(p.describe() for p in changed)] if changed else []
        return ViewStatus(model, Staleness.STALE, "; ".join(found + ([crossed] if crossed else [])))
    return ViewStatus(model, Staleness.FRESH)


def positions_current(
    positions: Sequence[tuple[bool, str, str, LogPosition | None]], current: Mapping[str, int]
) -> bool:
    """Whether a view provably has nothing to consume, from snapshot ids alone (no log scan):
    the cheap no-op refresh. ``positions`` holds, per log, (capture-managed?, master relation,
    log relation, the view's position); ``current`` the current snapshot of those relations.

    - a capture-managed log: the master is still at the snapshot the view reflects. Its log can
      then hold nothing newer for the view (captures only log later master commits; a master
      whose history was rewritten has another snapshot id);
    - a log written by ingestion: the log is still at the snapshot the view read.

    A position with commits consumed on commit (beyond its sequence) never qualifies: commits
    older than the reflected snapshot may still be pending.
    """
    if not positions:
        return False
    for capture, master, log, position in positions:
        if position is None or position.commits:
            return False
        recorded, now = (
            (position.master_snapshot, current.get(master)) if capture else (position.log_snapshot, current.get(log))
        )
        if recorded is None or now is None or recorded != now:
            return False
    return True
