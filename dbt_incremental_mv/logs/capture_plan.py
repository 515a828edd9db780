"""Capture: append a master's committed changes from its Iceberg history into its log.

The log's newest watermark row (``_mv_op`` W or R) says up to which master snapshot the log
is complete. A capture walks the master's snapshot ancestry from its current snapshot back
to that one and appends the changes in between, plus a new watermark, in one commit:

- copy-on-write history: Iceberg's changelog scan, one log row per changed row image, each
  attributed to the snapshot (commit) that made it;
- the data files that changed (session mode, when the Java API can stage them): the rows of
  the data files live at the captured snapshot but not at the current one (or live with other
  delete files) against the rows of those live now but not then, ``EXCEPT ALL`` both ways
  (Iceberg v3 masters: told apart by row lineage instead, a filter and an anti join on
  ``_row_id``). Each changed file is read once however many commits rewrote it, unchanged
  files not at all, merge-on-read masters too; every change is attributed to the end
  snapshot. Taken for history with delete files, for two or more copy-on-write commits, and
  for any v3 master (one commit of a v2 master keeps the changelog scan: the same reads, and
  exact attribution). On-commit refreshes, which name commits, keep the per-commit paths;
- history with delete files (merge-on-read), which the changelog scan refuses, over SQL: the
  difference between the two snapshots (a scan of both; every change attributed to the
  end snapshot);
- commits that only rewrote files (Iceberg's ``replace``: a compaction of the data files or of the
  delete files, which changes no row): a watermark past them, nothing read (the changed-files
  path would compare the rewritten files' rows, all of them);
- broken history (the watermark snapshot is no longer an ancestor: the master was replaced,
  rolled back, or its snapshots expired before capture): a reset watermark (R). Views that
  consumed less than it cannot be fast refreshed and get a complete refresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class CaptureMethod(StrEnum):
    """How a capture brings a log up to its master (see the module's docstring)."""

    NONE = "none"  # nothing to capture: the log is up to date (or was just created)
    CHANGELOG = "changelog"  # Iceberg's changelog scan of copy-on-write commits
    FILES = "files"  # the data files the commits changed (or row lineage)
    DIFF = "diff"  # the difference of two snapshots (merge-on-read history, over SQL)
    RESET = "reset"  # the history is broken: a reset watermark
    SKIP = "skip"  # no view needs the changes: a watermark stands for them
    REWRITTEN = "rewritten"  # only commits that rewrote files (compactions): no row changed, a watermark

    @property
    def captures(self) -> bool:
        """Whether the master has commits to capture: read (or, skipped, stood for by a watermark)."""
        return self not in (CaptureMethod.NONE, CaptureMethod.RESET)

    @property
    def reads_master(self) -> bool:
        """Whether the capture reads the master's rows (the others write a watermark at most)."""
        return self in (CaptureMethod.CHANGELOG, CaptureMethod.FILES, CaptureMethod.DIFF)


# A capture by row lineage finds the old rows gone (deleted or updated) by their ids first and
# broadcasts those ids when the files' statistics say there are at most this many: a hash
# table of longs of a few tens of MB (otherwise every old row is shuffled to an anti join).
GONE_IDS_BROADCAST_ROWS = 2_000_000


def broadcast_gone_ids(rows_gone_at_most: int | None) -> bool:
    """Whether a capture by row lineage broadcasts the ids of the old rows gone."""
    return rows_gone_at_most is not None and rows_gone_at_most <= GONE_IDS_BROADCAST_ROWS


# Iceberg's operation of a commit that rewrites files without changing a row (rewrite_data_files,
# rewrite_position_delete_files)
REPLACE = "replace"


@dataclass(frozen=True)
class SnapshotInfo:
    snapshot_id: int
    parent_id: int | None
    added_delete_files: int
    total_delete_files: int
    schema_id: int | None = None  # None: not known (read over SQL)
    operation: str | None = None  # Iceberg's: append, overwrite, delete, replace (None: not known)


@dataclass(frozen=True)
class Reflected:
    """What the views reading a log reflect of its master past the log (bookkeeping.LogPosition.
    uncaptured: recomputed without the log being captured): ``stops``, those master snapshots (a
    capture ends at each it passes, so that the changes on either side are told apart);
    ``all_past``: every view with a position in the log is such a view, so no view needs the
    changes up to the oldest of them (a watermark there stands for them, none is read)."""

    stops: frozenset[int] = frozenset()
    all_past: bool = False


@dataclass(frozen=True)
class CapturePlan:
    method: CaptureMethod
    start: int | None  # exclusive; None: from the master's first snapshot
    end: int | None
    reason: str
    commits: tuple[int, ...] = ()  # the master commits captured, oldest first


def plan_capture(
    captured_through: int | None,
    has_watermark: bool,
    current: int | None,
    lineage: Sequence[SnapshotInfo],
    by_files: bool = False,
    row_lineage: bool = False,
    reflected: Reflected = Reflected(),
) -> CapturePlan:
    """Decide how to bring a log up to the master's ``current`` snapshot; ``by_files``: the
    changed data files can be staged and read (session mode, no commit attribution needed);
    ``row_lineage``: the master is an Iceberg v3 table (its rows have ids and the sequence
    number that last wrote them), so the changed files' rows are told apart without comparing
    them by value, for less than Iceberg's changelog scan costs even for one commit.

    ``reflected``: the snapshots views of the log reflect past it. A capture that passes one
    ends there, with its watermark (the next capture goes on from it); when every view is past
    the oldest, the changes up to it are not read at all ("skip": a watermark only)."""
    if current is None:
        return CapturePlan(CaptureMethod.NONE, captured_through, None, "the master has no snapshot yet")
    if has_watermark and captured_through == current:
        return CapturePlan(CaptureMethod.NONE, current, current, "the log is up to date")
    by_id = {s.snapshot_id: s for s in lineage}
    start = captured_through if has_watermark else None
    in_range: list[SnapshotInfo] = []
    cursor: int | None = current
    while cursor is not None and cursor != start:
        snapshot = by_id.get(cursor)
        if snapshot is None:  # expired, or not an ancestor
            return CapturePlan(
                CaptureMethod.RESET, start, current, f"snapshot {cursor} of the master's history is gone"
            )
        in_range.append(snapshot)
        cursor = snapshot.parent_id
    if cursor != start:
        return CapturePlan(
            CaptureMethod.RESET,
            start,
            current,
            f"the last captured snapshot {start} is not an ancestor of the master's current snapshot {current}",
        )
    in_range_ids = [s.snapshot_id for s in in_range]  # newest first
    if reflected.all_past and reflected.stops and reflected.stops <= set(in_range_ids):
        oldest = next(s for s in reversed(in_range_ids) if s in reflected.stops)
        return CapturePlan(
            CaptureMethod.SKIP,
            start,
            oldest,
            f"every view reading the log reflects master snapshot {oldest} already (recomputed since): "
            "a watermark there, no change read",
        )
    passed = [s for s in in_range_ids[1:] if s in reflected.stops]
    if passed:  # the last one passed is the oldest
        return plan_capture(captured_through, has_watermark, passed[-1], lineage, by_files, row_lineage)
    if has_watermark and all(s.operation == REPLACE for s in in_range):
        return CapturePlan(
            CaptureMethod.REWRITTEN,
            start,
            current,
            f"{len(in_range)} commit(s) that rewrote files, no row changed (compactions): a watermark, nothing read",
        )
    merge_on_read = any(s.added_delete_files for s in in_range) or bool(by_id[current].total_delete_files)
    files_readable = (
        start is not None
        and start in by_id
        and by_id[start].schema_id is not None
        and by_id[start].schema_id == by_id[current].schema_id  # staged files are read with the current schema
    )
    if by_files and files_readable and (merge_on_read or row_lineage or len(in_range) > 1):
        return CapturePlan(
            CaptureMethod.FILES,
            start,
            current,
            f"{len(in_range)} new master commit(s), read by the data files they changed",
            (current,),
        )
    if merge_on_read:
        if start is not None and start not in by_id:
            return CapturePlan(CaptureMethod.RESET, start, current, f"the last captured snapshot {start} has expired")
        return CapturePlan(
            CaptureMethod.DIFF, start, current, "the master has delete files (merge-on-read)", (current,)
        )
    commits = tuple(s.snapshot_id for s in reversed(in_range))
    return CapturePlan(CaptureMethod.CHANGELOG, start, current, f"{len(in_range)} new master commit(s)", commits)
