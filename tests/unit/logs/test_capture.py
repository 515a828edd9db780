from dbt_incremental_mv.logs.capture_plan import (
    GONE_IDS_BROADCAST_ROWS, Reflected, SnapshotInfo, broadcast_gone_ids, plan_capture,
)


def chain(*ids, deletes=(), schema_changed_at=None):
    infos, parent = [], None
    for i in ids:
        schema = 1 if schema_changed_at is not None and i >= schema_changed_at else 0
        infos.append(SnapshotInfo(i, parent, 1 if i in deletes else 0, 1 if any(d <= i for d in deletes) else 0, schema))
        parent = i
    return infos


def test_nothing_to_do_when_up_to_date_or_empty():
    assert plan_capture(3, True, 3, chain(1, 2, 3)).method == "none"
    assert plan_capture(None, True, None, []).method == "none"


def test_copy_on_write_history_uses_the_changelog():
    plan = plan_capture(1, True, 3, chain(1, 2, 3))
    assert (plan.method, plan.start, plan.end) == ("changelog", 1, 3)
    assert "2 new master commit" in plan.reason


def test_from_the_beginning_when_the_log_has_no_watermark():
    plan = plan_capture(None, False, 2, chain(1, 2))
    assert (plan.method, plan.start, plan.end) == ("changelog", None, 2)


def test_a_watermark_of_an_empty_master_captures_everything():
    plan = plan_capture(None, True, 2, chain(1, 2))
    assert (plan.method, plan.start) == ("changelog", None)


def test_delete_files_switch_to_the_snapshot_diff():
    assert plan_capture(1, True, 3, chain(1, 2, 3, deletes=(3,))).method == "diff"
    assert plan_capture(2, True, 3, chain(1, 2, 3, deletes=(2,))).method == "diff"  # older delete files still live


def test_broken_history_resets():
    assert plan_capture(7, True, 3, chain(1, 2, 3)).method == "reset"  # not an ancestor
    assert plan_capture(1, True, 3, chain(2, 3)[1:]).method == "reset"  # snapshot 2 expired
    expired_start = [SnapshotInfo(3, 2, 1, 1), SnapshotInfo(2, 1, 0, 0)]
    assert plan_capture(1, True, 3, expired_start).method == "reset"  # the diff needs the start snapshot


def test_changed_files_are_read_once_for_several_commits_or_delete_files():
    plan = plan_capture(1, True, 3, chain(1, 2, 3), by_files=True)
    assert (plan.method, plan.start, plan.end, plan.commits) == ("files", 1, 3, (3,))  # attributed to the end
    assert "2 new master commit(s), read by the data files they changed" in plan.reason
    assert plan_capture(2, True, 3, chain(1, 2, 3, deletes=(3,)), by_files=True).method == "files"
    assert plan_capture(2, True, 3, chain(1, 2, 3, deletes=(1,)), by_files=True).method == "files"  # older delete files


def test_one_copy_on_write_commit_keeps_the_changelog_and_its_attribution():
    assert plan_capture(2, True, 3, chain(1, 2, 3), by_files=True).method == "changelog"


def test_one_commit_of_a_v3_master_is_read_by_its_changed_files_and_row_lineage():
    plan = plan_capture(2, True, 3, chain(1, 2, 3), by_files=True, row_lineage=True)
    assert (plan.method, plan.commits) == ("files", (3,))  # one commit: attributed to it, as the changelog would
    # on-commit refreshes (no staging) and SQL connections keep the changelog
    assert plan_capture(2, True, 3, chain(1, 2, 3), by_files=False, row_lineage=True).method == "changelog"


def test_changed_files_need_the_start_snapshot_its_schema_and_the_session():
    assert plan_capture(1, True, 3, chain(1, 2, 3)).method == "changelog"  # over SQL: no staging
    assert plan_capture(1, True, 3, chain(1, 2, 3, schema_changed_at=2), by_files=True).method == "changelog"
    assert plan_capture(1, True, 3, chain(1, 2, 3, deletes=(3,), schema_changed_at=3), by_files=True).method == "diff"
    assert plan_capture(None, False, 3, chain(1, 2, 3), by_files=True).method == "changelog"  # from the beginning
    unknown = [SnapshotInfo(i, i - 1 or None, 0, 0) for i in (1, 2, 3)]  # schemas not read (SQL)
    assert plan_capture(1, True, 3, unknown, by_files=True).method == "changelog"
    expired_start = [SnapshotInfo(3, 2, 1, 1, 0), SnapshotInfo(2, 1, 0, 0, 0)]
    assert plan_capture(1, True, 3, expired_start, by_files=True).method == "reset"


def test_the_gone_rows_ids_are_broadcast_only_when_the_statistics_bound_them_low():
    assert broadcast_gone_ids(0) and broadcast_gone_ids(GONE_IDS_BROADCAST_ROWS)
    assert not broadcast_gone_ids(GONE_IDS_BROADCAST_ROWS + 1)
    assert not broadcast_gone_ids(None)  # not known (no statistics, or delete files)


def test_a_capture_ends_at_the_oldest_snapshot_a_view_reflects_past_the_log():
    """A view recomputed without capture reflects master snapshot 3: the capture ends there
    (its own watermark), so that the view resumes after it; the next capture goes on."""
    views = Reflected(frozenset({3, 5}))
    plan = plan_capture(1, True, 6, chain(1, 2, 3, 4, 5, 6), reflected=views)
    assert (plan.method, plan.start, plan.end, plan.commits) == ("changelog", 1, 3, (2, 3))
    assert plan_capture(3, True, 6, chain(1, 2, 3, 4, 5, 6), reflected=views).end == 5
    assert plan_capture(5, True, 6, chain(1, 2, 3, 4, 5, 6), reflected=views).end == 6
    # the current snapshot itself is no stop (the capture ends there anyway); nor is one not passed
    assert plan_capture(1, True, 3, chain(1, 2, 3), reflected=Reflected(frozenset({3, 9}))).end == 3


def test_changes_no_view_needs_are_not_read():
    """Every view of the log reflects snapshot 3 or 5 past it: the changes up to 3 are needed by
    none (a watermark stands for them); those between 3 and 5 are, by the view at 3."""
    views = Reflected(frozenset({3, 5}), all_past=True)
    plan = plan_capture(1, True, 6, chain(1, 2, 3, 4, 5, 6), reflected=views)
    assert (plan.method, plan.start, plan.end, plan.commits) == ("skip", 1, 3, ())
    assert plan_capture(3, True, 6, chain(1, 2, 3, 4, 5, 6), reflected=views).method == "changelog"
    # a view that reflects a snapshot the log is captured through already needs what follows it
    assert plan_capture(1, True, 6, chain(1, 2, 3, 4, 5, 6), reflected=Reflected(frozenset({1, 5}), True)).method == "changelog"
    assert plan_capture(1, True, 6, chain(1, 2, 3, 4, 5, 6), reflected=Reflected(frozenset({6}), True)).end == 6


def test_commits_that_only_rewrote_files_need_a_watermark_and_no_read():
    from dataclasses import replace

    # a merge of the delete files (adds delete files, changes no row) after the captured snapshot 2
    merged = [*chain(1, 2, deletes=(2,)), SnapshotInfo(3, 2, 1, 1, 0, "replace")]
    for by_files in (False, True):
        plan = plan_capture(2, True, 3, merged, by_files=by_files)
        assert (plan.method, plan.start, plan.end) == ("rewritten", 2, 3)
        assert not plan.method.reads_master and plan.method.captures
    # a compaction after a change: the change is read, the compaction's files with it
    changed = [*chain(1, 2), SnapshotInfo(3, 2, 0, 0, 0, "overwrite"), SnapshotInfo(4, 3, 1, 1, 0, "replace")]
    assert plan_capture(2, True, 4, changed, by_files=True).method == "files"
    # a log without a watermark captures from the start
    assert plan_capture(None, False, 3, [replace(s, operation="replace") for s in chain(1, 2, 3)]).method == "changelog"
