"""Expire: after a refresh has published, the view's old snapshots removed when enough are due.

Every refresh commits to the view (its writes, the publish, a compaction), and Iceberg keeps every
snapshot until it is expired: each one in the table's metadata file, which every statement on the
view reads and every commit writes again, and each one's manifests and the data and delete files
only it still references. Measured (benchmarks/results/snapshot_history.md): a 100,000-row table
after 700 small refreshes, compacted to the same files as a young one: 1,420 snapshots against 20,
a DELETE of one key 0.237 s against 0.208 s, an INSERT 0.120 s against 0.093 s, the plugin's read of
its metadata 77 ms against 5 ms; the expiry of 1,415 snapshots took 13.4 s (about 2,900 files
deleted). Iceberg also keeps every metadata file unless ``write.metadata.delete-after-commit.enabled``,
which the plugin sets on the tables it creates (layout.METADATA_CLEANUP): 3.7 GB of them beside 23 MB
of data after 1,400 refreshes.

What is kept is what Iceberg's own ``expire_snapshots`` keeps by the view's table properties:
snapshots younger than ``history.expire.max-snapshot-age-ms`` (default here EXPIRE_AGE_MS, a day;
Iceberg's own default is five days), at least ``history.expire.min-snapshots-to-keep`` of main's
newest, every branch's head (a refresher staging its writes on a branch), and always the newest
snapshot that holds the view's state and every one after it (compactions' ``replace`` commits come
after it: refresh/state/view_state.py reads the state through them). The files only expired
snapshots referenced are deleted. A downstream view that captures this view's history
(``capture: true``) and has not run for longer than the age finds its start expired: it refreshes
completely once (as after any expired history; docs/operations.md).

Decided from the view's metadata after the publish (no statement when not due; over SQL, where
reading it takes two statements, one refresh in SQL_CHECK_EVERY reads it): after a fast
refresh when at least EXPIRE_BATCH snapshots would go, so that the statement runs once per that many
commits; after a complete refresh or a build (``create or replace`` keeps the old table's history),
when any would, each of them holding a whole copy of the view. Runs after
the publish and the compaction, as one ``expire_snapshots`` procedure call; a commit made meanwhile
(another refresh) fails it, reported in the log line and left to the next refresh; any other
failure is a warning (the refresh's own result is published). ``gc.enabled=false`` (Iceberg
refuses to delete files of such a table) leaves the view's history alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from dbt_incremental_mv.metadata import TableMetadata
from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.phases.decide import RefreshAction
from dbt_incremental_mv.refresh.phases.maintenance import Maintained, run_after_publish
from dbt_incremental_mv.refresh.state.view_state import state_depth
from dbt_incremental_mv.sql_text import relation, string

AGE_PROPERTY = "history.expire.max-snapshot-age-ms"
KEEP_PROPERTY = "history.expire.min-snapshots-to-keep"
GC_PROPERTY = "gc.enabled"
EXPIRE_AGE_MS = 24 * 60 * 60 * 1000  # a day of snapshots, when the view does not say
EXPIRE_BATCH = 100  # snapshots that must be due before the statement runs (after a fast refresh)
SQL_CHECK_EVERY = 10  # over SQL, the refreshes that read the view's metadata to decide: one in this many


@dataclass(frozen=True)
class Expiry:
    """The expiry of ``relation``'s snapshots older than ``older_than_ms``, keeping at least the
    ``retain_last`` newest of main (the state's snapshot among them); ``due``: how many go."""

    relation: str
    older_than_ms: int
    retain_last: int
    due: int

    @property
    def statement(self) -> str:
        return (
            f"call system.expire_snapshots(table => {string(relation(self.relation))}, "
            f"older_than => timestamp {string(utc_text(self.older_than_ms))}, retain_last => {self.retain_last})"
        )


def utc_text(epoch_ms: int) -> str:
    """``epoch_ms`` as a timestamp literal's text in UTC (``Z``: whatever the session's time zone)."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def checked(in_jvm: bool, published_snapshot: int) -> bool:
    """Whether a refresh that published ``published_snapshot`` reads the view's metadata to decide
    its expiry: always in the embedded session (the Java API reads it in milliseconds); over SQL (two
    statements) one refresh in SQL_CHECK_EVERY, chosen by the published snapshot's id (random)."""
    return in_jvm or published_snapshot % SQL_CHECK_EVERY == 0


def _gc_disabled(table: TableMetadata) -> bool:
    """``gc.enabled=false``: Iceberg refuses to delete the table's files, so nothing is expired."""
    return table.properties.get(GC_PROPERTY, "true").strip().lower() == "false"


def _property(table: TableMetadata, key: str, default: int) -> int:
    try:
        return int(table.properties.get(key, default))
    except ValueError:
        return default


def expiry(
    relation: str, table: TableMetadata, now_ms: int, action: RefreshAction = RefreshAction.FAST
) -> Expiry | None:
    """The expiry of ``table``'s snapshots its properties make due at ``now_ms``, after a refresh that
    published by ``action`` (None: too few would go, or the table may not delete files): at least
    EXPIRE_BATCH after a fast refresh, any one after a complete refresh or a build (each snapshot
    before them holds a whole copy of the view). Mirrors what Iceberg's
    ``expire_snapshots`` removes: each branch's ancestors past its ``retain_last`` newest from the first
    one older than ``older_than_ms``, and snapshots on no branch older than it."""
    if _gc_disabled(table) or table.main is None:
        return None
    older_than = now_ms - max(_property(table, AGE_PROPERTY, EXPIRE_AGE_MS), 0)
    # the newest snapshot holding the view's state and all after it (every one when none holds it)
    state_at = state_depth(table)
    retain_last = max(_property(table, KEEP_PROPERTY, 1), (len(table.ancestry()) if state_at is None else state_at + 1))
    heads = [table.main, *table.branches.values()]
    kept = set()
    for head in heads:  # each branch keeps its newest retain_last, and on from them its young ones
        for position, snapshot in enumerate(table.ancestry(head)):
            if position < retain_last or snapshot.timestamp_ms is None or snapshot.timestamp_ms >= older_than:
                kept.add(snapshot.snapshot_id)
            else:
                break
    on_branches = {snapshot.snapshot_id for head in heads for snapshot in table.ancestry(head)}
    due = sum(
        1
        for snapshot in table.snapshots.values()
        if snapshot.snapshot_id not in kept
        and (snapshot.snapshot_id in on_branches or (snapshot.timestamp_ms or now_ms) < older_than)
    )
    if due < (EXPIRE_BATCH if action is RefreshAction.FAST else 1):
        return None
    return Expiry(relation, older_than, retain_last, due)


def describe(table: TableMetadata, now_ms: int) -> str:
    """The view's history for explain_fast_refresh: its snapshots, what its refreshes keep, and how
    many an expiry would remove now."""
    if _gc_disabled(table):
        return f"{len(table.snapshots):,} snapshots; {GC_PROPERTY}=false: never expired"
    age_hours = max(_property(table, AGE_PROPERTY, EXPIRE_AGE_MS), 0) / 3_600_000
    planned = expiry(table.name, table, now_ms, RefreshAction.COMPLETE)  # (any due one counted)
    due = planned.due if planned is not None else 0
    return (
        f"{len(table.snapshots):,} snapshots; a refresh expires those older than {age_hours:g} h "
        f"({AGE_PROPERTY}) once {EXPIRE_BATCH} are due ({due:,} now), never the one holding the view's state"
    )


def expire(ctx: RefreshContext, planned: Expiry) -> Maintained:
    """Run ``planned`` after the publish: one that loses to a concurrent commit is skipped (the next
    refresh expires), one that fails otherwise is a warning, the view as the refresh published it."""
    began = time.monotonic()
    unfinished = run_after_publish(
        ctx,
        [planned.statement],
        "old snapshots kept (another commit on the view meanwhile: the next refresh expires them)",
        "old snapshots kept (expiring them failed)",
        lambda detail: (
            f"{planned.relation} was refreshed, but expiring its old snapshots then failed: {detail}. The next "
            f"refresh tries again; tblproperties {{'{GC_PROPERTY}': 'false'}} keeps every snapshot, and "
            f"'{AGE_PROPERTY}' sets how long they are kept."
        ),
    )
    if unfinished is not None:
        return unfinished
    ctx.metadata.forget(planned.relation)
    return Maintained(f"expired {planned.due:,} old snapshots in {time.monotonic() - began:.1f} s")
