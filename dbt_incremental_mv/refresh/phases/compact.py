"""Compact: after a fast refresh has published, the view's files rewritten when they are due.

A fast refresh writes merge-on-read: position delete files (deletion vectors on format 3) and
small data files. A user's full scan of the view opens and applies them all, so without
compaction the view reads slower after every refresh (measured: 1.64-1.92x its rebuilt self
after 100 small refreshes; layout.py). When the commit the refresh published leaves the view at a
threshold (layout.ViewFiles.compaction_due: its delete files, or many small data files), the
refresh runs Iceberg's compaction of the files with deletes and the small ones
(layout.compaction_statements), sorted as the view was built. Its cost follows those files, not
the view: a refresh that touched few files rewrites few.

Decided once, from the published commit's totals (no metadata read when not due). Runs after the
publish: the compaction's ``replace`` commit changes no row, the next refresh reads the view's state
through it, a capture of the view as a master skips it, and a crash during it leaves the view as
published. It can lose to a commit made meanwhile (another refresh of the view): that is reported
in the log line and left to the next refresh or ``mv_compact``. A view maintained in steps has each
internal state refreshed as a model of its own, so each is compacted the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from dbt_incremental_mv.conflicts import lost_race
from dbt_incremental_mv.layout import ViewFiles, ViewLayout, compaction_statements
from dbt_incremental_mv.metadata import TableMetadata
from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.phases.decide import RefreshAction


@dataclass(frozen=True)
class Compaction:
    """A compaction a refresh runs: of ``relation``, whose files are ``files``, by ``statements``."""

    relation: str
    files: ViewFiles
    statements: tuple[str, ...]


def due(files: ViewFiles | None, action: RefreshAction, auto_compact: bool) -> bool:
    """Whether a refresh that published ``files`` (None: it published nothing) compacts: a fast
    refresh, with ``auto_compact``, that left the files due (ViewFiles.compaction_due). A build or
    complete refresh writes the view anew."""
    return auto_compact and action is RefreshAction.FAST and files is not None and files.compaction_due


def compaction(relation: str, files: ViewFiles, table: TableMetadata) -> Compaction:
    """The compaction of ``relation`` (its ``table`` as the refresh left it): sorted as it was built."""
    statements = compaction_statements(
        relation,
        table.format_version,
        [t for _, t in table.columns],
        ViewLayout.written(table.properties).sort_by,
    )
    return Compaction(relation, files, tuple(statements))


def compact(ctx: RefreshContext, planned: Compaction) -> str:
    """Run ``planned``; says what it did, for the log line. A compaction that lost to a concurrent
    commit is skipped (the view is as the refresh published it); any other failure fails the model,
    saying the refresh itself was published."""
    began = time.monotonic()
    try:
        for statement in planned.statements:
            ctx.execute(statement)
    except Exception as exc:
        if lost_race(exc):
            return "compaction skipped (another commit on the view meanwhile: the next refresh compacts it)"
        raise RuntimeError(
            f"{planned.relation} was refreshed (its commit is published), but compacting it then failed: {exc}. "
            "Set auto_compact=false on the model to refresh without compacting, and compact it with "
            "`dbt run-operation mv_compact` once the cause is fixed."
        ) from exc
    ctx.metadata.forget(planned.relation)
    after = ViewFiles.of(ctx.metadata.table(planned.relation))
    return (
        f"compacted {planned.files.data_files:,} data and {planned.files.delete_files:,} delete files to "
        f"{after.data_files:,} and {after.delete_files:,}"
        if after is not None
        else "compacted"
    ) + f" in {time.monotonic() - began:.1f} s"
