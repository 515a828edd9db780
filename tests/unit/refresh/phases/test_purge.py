"""Purge by whole files: which log files every view has consumed entirely."""

from dbt_incremental_mv.metadata import DataFile
from dbt_incremental_mv.refresh.phases.purge import consumed_files


def files(*specs):
    return [DataFile(path, sequence, upper) for path, sequence, upper in specs]


def test_files_at_or_before_the_floor_go_and_later_ones_stay():
    log = files(("a", 1, "I"), ("b", 2, "D"), ("c", 3, "I"))
    assert consumed_files(log, floor=2, watermark_sequence=3) == ["a", "b"]


def test_the_newest_watermark_stays_and_superseded_ones_go():
    # a capture appends its changes and its watermark as files of one commit (sequence 3)
    log = files(("w1", 1, "W"), ("changes3", 3, "I"), ("w3", 3, "W"))
    assert consumed_files(log, floor=3, watermark_sequence=3) == ["w1", "changes3"]


def test_a_file_that_may_hold_the_newest_marker_stays():
    # a file of the newest commit holding changes and the watermark, or one without bounds
    log = files(("mixed3", 3, "W"), ("unknown3", 3, None), ("reset3", 3, "R"))
    assert consumed_files(log, floor=3, watermark_sequence=3) == []
    # ... until a newer watermark supersedes it
    assert consumed_files(log, floor=3, watermark_sequence=4) == ["mixed3", "unknown3", "reset3"]


def test_an_ingestion_log_without_watermarks_loses_every_consumed_file():
    log = files(("a", 5, "I"), ("b", 6, "W"), ("c", 7, "D"))
    assert consumed_files(log, floor=6, watermark_sequence=None) == ["a", "b"]


def test_a_file_without_a_sequence_number_is_never_purged():
    assert consumed_files(files(("v1", None, "I")), floor=10, watermark_sequence=None) == []


def test_files_newer_than_the_floor_in_the_snapshot_read_send_the_purge_back_to_rows():
    """A file newer than what every view consumed, yet in the log snapshot read, was rewritten by a
    row-level purge (its rows are older than it) or is a lagging view's capture: whole files cannot
    see its consumed rows, so the row-level purge runs. Files committed after the read do not count."""
    from types import SimpleNamespace

    from dbt_incremental_mv.metadata import Snapshot
    from dbt_incremental_mv.refresh.phases.purge import _rewritten_files

    log = SimpleNamespace(snapshots={7: Snapshot(7, 6, "append", {}, 5), 8: Snapshot(8, 7, "overwrite", {}, None)})
    meta = SimpleNamespace(table=lambda name: log)
    spec = SimpleNamespace(log_relation="shop.mlog_orders")
    assert not _rewritten_files(meta, spec, 7, 5, files(("a", 4, "I"), ("w", 5, "W")))
    assert not _rewritten_files(meta, spec, 7, 5, files(("later", 6, "I")))  # committed after the read
    assert _rewritten_files(meta, spec, 7, 4, files(("rewritten", 5, "W")))
    assert _rewritten_files(meta, spec, 8, 5, files(("a", 4, "I")))  # no sequence number known: rows


def test_a_purge_that_failed_for_another_reason_than_a_concurrent_commit_says_so():
    from dbt_incremental_mv.logs.contract import LogSpec
    from dbt_incremental_mv.refresh.phases.purge import _left_for_next_refresh

    spec = LogSpec("l", "shop.mlog_orders", "orders", "shop.orders", ("order_id",), True)
    refused = "org.apache.iceberg.exceptions.CommitFailedException: Table metadata refresh is required"
    raced = _left_for_next_refresh(spec, RuntimeError(refused))
    failed = _left_for_next_refresh(spec, RuntimeError('[MISSING_ATTRIBUTES] "_row_id" missing\nplan...'))
    assert raced == f"shop.mlog_orders left for the next refresh (concurrent commit: {refused})"
    assert failed == 'shop.mlog_orders left for the next refresh (the purge failed: [MISSING_ATTRIBUTES] "_row_id" missing)'
