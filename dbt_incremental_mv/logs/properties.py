"""What a change log's own table properties record, so a refresh need not scan the log to know it.

- ``dbt_incremental_mv.capture``: the master snapshot the log is captured through, and the log
  snapshot that capture committed, set in the same metadata commit that publishes the capture.
  It holds only while no other append came after that log snapshot (a capture by another
  process over SQL, or by an older plugin version): otherwise the log's watermark rows are read.
- ``dbt_incremental_mv.purges``: the newest log snapshots made by the plugin's purge, each with
  the sequence it purged through. Such a purge deleted only rows at or before that sequence, so
  the staleness check need not count the unconsumed changes of a view whose position is at or past
  it (a purge by another dbt project sharing the log, purging further than this view consumed, is
  still counted and detected).

Both are written in session mode only (Iceberg's Java API commits the table metadata); over SQL
(thrift) they are not written, and the log's rows are read instead, as before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from dbt_incremental_mv.metadata import TableMetadata

CAPTURE_PROPERTY = "dbt_incremental_mv.capture"
PURGES_PROPERTY = "dbt_incremental_mv.purges"
PURGES_KEPT = 32
APPEND = "append"
# Iceberg operations that never delete a change: appends, and compaction (rewrites rows unchanged).
KEEPS_EVERY_ROW = ("append", "replace")


@dataclass(frozen=True)
class CapturedThrough:
    master_snapshot: int
    log_snapshot: int


def capture_property(master_snapshot: int, log_snapshot: int) -> dict[str, str]:
    return {CAPTURE_PROPERTY: json.dumps({"master": master_snapshot, "log": log_snapshot}, sort_keys=True)}


def captured_through(log: TableMetadata) -> CapturedThrough | None:
    """The master snapshot the log is captured through, from its property, when the property is
    still true: its log snapshot is on main and no append came after it. None: read the log."""
    raw = log.properties.get(CAPTURE_PROPERTY)
    if not raw:
        return None
    try:
        value = json.loads(raw)
        recorded = CapturedThrough(int(value["master"]), int(value["log"]))
    except (ValueError, KeyError, TypeError):
        return None
    since = log.commits_since(recorded.log_snapshot)
    if since is None or any(s.operation == APPEND for s in since):
        return None
    return recorded


def purge_snapshots(properties: Mapping[str, str]) -> dict[int, int]:
    """The plugin's purges of the log: purge snapshot -> the sequence it purged through (it
    deleted only rows at or before it, every view of its project had consumed them)."""
    purges = {}
    for entry in (properties.get(PURGES_PROPERTY) or "").split(","):
        snapshot, _, floor = entry.strip().partition(":")
        if snapshot.isdigit() and floor.isdigit():
            purges[int(snapshot)] = int(floor)
    return purges


def purges_property(properties: Mapping[str, str], purge_snapshot: int, floor: int) -> dict[str, str]:
    """The purges property with this purge added (the newest ones kept)."""
    known = [e for e in (properties.get(PURGES_PROPERTY) or "").split(",") if e.strip()]
    known = [*known, f"{purge_snapshot}:{floor}"][-PURGES_KEPT:]
    return {PURGES_PROPERTY: ",".join(known)}


def no_rows_added_since(log: TableMetadata, log_snapshot: int | None) -> bool:
    """Whether the log provably holds no row added after ``log_snapshot``: every commit since is
    a compaction, a delete of whole files, or the plugin's purge (which adds no change). False
    when unknown (then the log's rows are counted)."""
    if log_snapshot is None:
        return False
    since = log.commits_since(log_snapshot)
    if since is None:
        return False
    purges = purge_snapshots(log.properties)
    return all(s.operation in ("replace", "delete") or s.snapshot_id in purges for s in since)
