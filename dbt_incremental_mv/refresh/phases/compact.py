"""Compact: after a fast refresh has published, the view's files rewritten when they are due.

A fast refresh writes merge-on-read: position delete files (deletion vectors on format 3) and
small data files. A user's full scan of the view opens and applies them all, so without
compaction the view reads slower after every refresh (measured: 1.64-1.92x its rebuilt self
after 100 small refreshes; layout.py). When the commit the refresh published leaves the view at a
threshold (layout.ViewFiles.compaction_due: its delete files, or many small data files), the
refresh runs Iceberg's compaction (layout.compaction_statements): where the refreshes' small data
files are most of the extra files and few of its rows are deleted, only those (and, if that leaves
it due, then its data files as below); where merging its delete files leaves it at most half the
files that make it due and few of its rows are deleted, only those (one per data file at most: a
scattered DELETE writes one per scan task and data file); otherwise the data files with deletes
and the small ones rewritten; sorted as the view was built (layout.compaction_kind). Its cost
follows those files, not the view: a refresh that touched few files rewrites few.

Decided once, from the published commit's totals (no metadata read when not due). Runs after the
publish: the compaction's ``replace`` commit changes no row, the next refresh reads the view's state
through it, a capture of the view as a master skips it, and a crash during it leaves the view as
published. It can lose to a commit made meanwhile (another refresh of the view): that is reported
in the log line and left to the next refresh or ``mv_compact``; any other failure is a warning
(the refresh's own result is published: a maintenance step does not fail the model). A view
maintained in steps has each internal state refreshed as a model of its own, so each is compacted
the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from dbt_incremental_mv.layout import CompactionKind, ViewFiles, compaction_kind, compaction_statements, written_sort
from dbt_incremental_mv.metadata import TableMetadata
from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.phases.decide import RefreshAction
from dbt_incremental_mv.refresh.phases.maintenance import Maintained, run_after_publish


@dataclass(frozen=True)
class Compaction:
    """A compaction a refresh runs: of ``relation``, whose files are ``files``, by ``statements``,
    rewriting its ``kind`` of files."""

    relation: str
    files: ViewFiles
    statements: tuple[str, ...]
    kind: CompactionKind = CompactionKind.DATA_FILES
    # run after ``statements`` when they leave the view still due (the data files rewritten after its
    # small files: layout.compaction_kind)
    if_still_due: tuple[str, ...] = ()

    def still_due(self, after: ViewFiles | None) -> bool:
        """Whether ``if_still_due`` runs, ``statements`` having left the view's files ``after``."""
        return bool(self.if_still_due) and after is not None and after.compaction_due


def due(files: ViewFiles | None, action: RefreshAction, auto_compact: bool) -> bool:
    """Whether a refresh that published ``files`` (None: it published nothing) compacts: a fast
    refresh, with ``auto_compact``, that left the files due (ViewFiles.compaction_due). A build or
    complete refresh writes the view anew."""
    return auto_compact and action is RefreshAction.FAST and files is not None and files.compaction_due


def compaction(relation: str, files: ViewFiles, table: TableMetadata) -> Compaction:
    """The compaction of ``relation`` (its ``table`` as the refresh left it): its small data files
    rewritten (then, if that leaves it due, its data files), its delete files merged, or its data
    files rewritten; sorted as it was built (layout.compaction_kind)."""
    column_types = [t for _, t in table.columns]
    kind = compaction_kind(files, table.format_version, column_types)
    sort_by = written_sort(table.properties)
    statements = compaction_statements(
        relation, table.format_version, column_types, sort_by, kind, files.small_file_bytes
    )
    if_still_due = (
        compaction_statements(relation, table.format_version, column_types, sort_by)
        if kind is CompactionKind.SMALL_FILES
        else []
    )
    return Compaction(relation, files, tuple(statements), kind, tuple(if_still_due))


def compact(ctx: RefreshContext, planned: Compaction) -> Maintained:
    """Run ``planned``. The refresh is published before: a compaction that loses to a concurrent
    commit is skipped (the next refresh compacts), and one that fails otherwise is a warning, the
    view as the refresh published it, not a failed model."""
    began = time.monotonic()
    unfinished = _run(ctx, planned.relation, planned.statements)
    if unfinished is not None:
        return unfinished
    after = _files(ctx, planned.relation)
    packed = planned.kind is CompactionKind.SMALL_FILES
    if planned.still_due(after):
        unfinished = _run(ctx, planned.relation, planned.if_still_due)
        if unfinished is not None:
            return unfinished
        after, packed = _files(ctx, planned.relation), False
    if after is None:
        done = "compacted"
    elif planned.kind is CompactionKind.DELETE_FILES:
        done = f"merged {planned.files.delete_files:,} delete files into {after.delete_files:,}"
    elif packed:
        done = f"rewrote its small data files: {planned.files.data_files:,} data files to {after.data_files:,}"
    else:
        done = (
            f"compacted {planned.files.data_files:,} data and {planned.files.delete_files:,} delete files to "
            f"{after.data_files:,} and {after.delete_files:,}"
        )
    return Maintained(f"{done} in {time.monotonic() - began:.1f} s")


def _run(ctx: RefreshContext, relation: str, statements: tuple[str, ...]) -> Maintained | None:
    """Run a compaction's ``statements`` after the publish (None: done)."""
    return run_after_publish(
        ctx,
        statements,
        "compaction skipped (another commit on the view meanwhile: the next refresh compacts it)",
        "compaction failed (the view is as the refresh published it)",
        lambda detail: (
            f"{relation} was refreshed, but compacting it then failed: {detail}. The next refresh "
            "tries again; `dbt run-operation mv_compact` compacts it by hand, and auto_compact=false stops the "
            "refreshes compacting it."
        ),
    )


def _files(ctx: RefreshContext, relation: str) -> ViewFiles | None:
    """The view's files as the compaction's last commit left them."""
    ctx.metadata.forget(relation)
    return ViewFiles.of(ctx.metadata.table(relation))
