"""A fast refresh compacts its view when the commit it published leaves it due (refresh/phases/compact.py)."""

import pytest

from dbt_incremental_mv.config import ConfigError, FastRefreshConfig
from dbt_incremental_mv.layout import CompactionKind, ViewFiles, ViewLayout, written_sort
from dbt_incremental_mv.metadata import TableMetadata
from dbt_incremental_mv.refresh.phases.compact import Compaction, compact, compaction, due
from dbt_incremental_mv.refresh.phases.decide import RefreshAction

MB = 1024**2
DUE = ViewFiles(12, 21, 30 * MB)  # 11 data files over the 1 a rewrite leaves, and 21 delete files: 32
NOT_DUE = ViewFiles(12, 20, 30 * MB)


def test_only_a_fast_refresh_with_auto_compact_compacts_and_only_when_its_files_are_due():
    assert due(DUE, RefreshAction.FAST, auto_compact=True)
    assert not due(NOT_DUE, RefreshAction.FAST, auto_compact=True)
    assert not due(DUE, RefreshAction.FAST, auto_compact=False)
    for rewritten in (RefreshAction.BUILD, RefreshAction.COMPLETE, RefreshAction.IN_STEPS):
        assert not due(DUE, rewritten, auto_compact=True)  # the view was written anew
    assert not due(None, RefreshAction.FAST, auto_compact=True)  # nothing published


def test_the_published_commits_totals_say_the_views_files():
    summary = {"total-data-files": "42", "total-delete-files": "5", "total-files-size": "3000000", "added-records": "1"}
    assert ViewFiles.of_summary(summary) == ViewFiles(42, 5, 3_000_000)
    assert ViewFiles.of_summary({"added-records": "1"}) is None  # (a summary without totals: not decided on)


def test_a_partitioned_views_files_are_judged_by_its_delete_files_only():
    from dbt_incremental_mv.view_table import partitioned

    assert partitioned({"partition_by": ["order_date"]}) and partitioned({"clustered_by": "id", "buckets": 4})
    assert not partitioned({}) and not partitioned({"partition_by": []})
    summary = {"total-data-files": "400", "total-delete-files": "0", "total-files-size": "4000000"}
    assert not due(ViewFiles.of_summary(summary, partitioned=True), RefreshAction.FAST, auto_compact=True)
    assert due(ViewFiles.of_summary(summary), RefreshAction.FAST, auto_compact=True)


def test_auto_compact_is_on_by_default_and_a_boolean():
    assert FastRefreshConfig.from_model_config("m", {}).auto_compact is True
    assert FastRefreshConfig.from_model_config("m", {"auto_compact": False}).auto_compact is False
    with pytest.raises(ConfigError, match="Model 'm': auto_compact='no' must be true or false"):
        FastRefreshConfig.from_model_config("m", {"auto_compact": "no"})


def _table(properties):
    return TableMetadata("s.v", (("k", "bigint"), ("_mv_o_id", "bigint")), {"format-version": "2", **properties}, {}, None)


def test_a_view_built_sorted_is_compacted_sorted_by_the_same_columns():
    layout = ViewLayout(sort_by=("_mv_o_id", "odd`name"), bloom=("_mv_c_id",))
    properties = {**layout.properties(), **layout.record()}
    assert written_sort(properties) == layout.sort_by
    planned = compaction("s.v", DUE, _table(properties))
    assert planned.statements[0] == (
        "call system.rewrite_data_files(table => '`s`.`v`', strategy => 'sort', sort_order => "
        "'`_mv_o_id` ASC NULLS FIRST, `odd``name` ASC NULLS FIRST', "
        "options => map('delete-file-threshold', '1', 'min-file-size-bytes', '8388608', 'remove-dangling-deletes', 'true', 'target-file-size-bytes', '67108864'))"
    )
    assert planned.statements[1].startswith("call system.rewrite_position_delete_files(")
    # built before the sort was recorded (or the property edited by hand): compacted unsorted
    for properties in ({}, {"dbt_incremental_mv.sorted-by": "not json"}):
        assert "strategy" not in compaction("s.v", DUE, _table(properties)).statements[0]
    assert ViewLayout().record() == {}


def test_many_delete_files_over_few_data_files_are_merged_and_many_small_data_files_rewritten():
    from dbt_incremental_mv.layout import CompactionKind, compaction_kind

    # an indexed join state after a scattered DELETE: 6 data files (two a rewrite would leave), 325 delete files
    state = ViewFiles(6, 325, 124 * MB, records=6_000_000, deleted=9_000)
    planned = compaction("s.v", state, _table({}))
    assert planned.kind is CompactionKind.DELETE_FILES
    assert planned.statements == (
        "call system.rewrite_position_delete_files(table => '`s`.`v`', options => map('rewrite-all', 'true'))",
    )
    # many small data files (a merge would leave 11 + 12 of the 32 extra files that make it due)
    assert compaction("s.v", DUE, _table({})).kind is CompactionKind.DATA_FILES
    # a tenth of its rows deleted: rewritten (a scan still reads them and drops them)
    assert compaction_kind(ViewFiles(6, 325, 124 * MB, records=6_000_000, deleted=600_000), 2) is (
        CompactionKind.DATA_FILES
    )
    # format 3 (a deletion vector per data file), ARRAY or MAP columns (Iceberg cannot rewrite their
    # delete files), or not due (compacted by hand): rewritten
    assert compaction_kind(state, 3) is CompactionKind.DATA_FILES
    assert compaction_kind(state, 2, ["bigint", "array<struct<v:double>>"]) is CompactionKind.DATA_FILES
    assert compaction_kind(ViewFiles(6, 5, 124 * MB), 2) is CompactionKind.DATA_FILES
    # what the log line says of a merge
    ctx = _Context()
    assert compact(ctx, planned).line.startswith("merged 325 delete files into 0 in ")


class _Context:
    def __init__(self, fail_with=None):
        self.statements, self.fail_with = [], fail_with
        after = {"total-data-files": "1", "total-delete-files": "0", "total-files-size": "100"}
        self.metadata = self
        self._after = after

    def execute(self, sql):
        if self.fail_with is not None:
            raise self.fail_with
        self.statements.append(sql)

    def forget(self, *names):
        pass

    def table(self, name):
        from dbt_incremental_mv.metadata.types import Snapshot

        snapshot = Snapshot(9, None, "replace", self._after)
        return TableMetadata(name, (), {"format-version": "2"}, {9: snapshot}, 9)


def test_a_compaction_says_what_it_did_one_that_loses_a_race_is_skipped_and_a_failure_is_a_warning():
    planned = Compaction("s.v", DUE, ("call a", "call b"))
    ctx = _Context()
    done = compact(ctx, planned)
    assert ctx.statements == ["call a", "call b"]
    assert done.line.startswith("compacted 12 data and 21 delete files to 1 and 0 in ") and done.failure is None
    raced = RuntimeError("CommitFailedException: Cannot commit: another commit to the same table was made meanwhile")
    raced.lost_race = True
    skipped = compact(_Context(raced), planned)
    assert skipped.line.startswith("compaction skipped (another commit") and skipped.failure is None
    failed = compact(_Context(RuntimeError("disk full\n\tat org.apache.iceberg...")), planned)
    assert failed.line == "compaction failed (the view is as the refresh published it)"
    assert failed.failure is not None
    assert failed.failure.startswith("s.v was refreshed, but compacting it then failed: disk full. The next refresh")
    assert "auto_compact=false" in failed.failure and "at org.apache" not in failed.failure


def test_where_small_data_files_make_a_view_due_only_they_are_rewritten():
    from dbt_incremental_mv.layout import compaction_kind

    layout = ViewLayout(sort_by=("_mv_o_id",))
    properties = {**layout.properties(), **layout.record()}
    # a 54 MB view: 8 files of its build, 25 small ones its refreshes' INSERTs added, 1 delete file per data file
    packed = ViewFiles(33, 8, 54 * MB, records=18_000_000, deleted=3_000)
    assert packed.compaction_due and packed.small_file_bytes == 54 * MB // 16
    planned = compaction("s.v", packed, _table(properties))
    assert planned.kind is CompactionKind.SMALL_FILES
    assert planned.statements == (
        "call system.rewrite_data_files(table => '`s`.`v`', strategy => 'sort', sort_order => "
        "'`_mv_o_id` ASC NULLS FIRST', options => map('delete-file-threshold', '2147483647', "
        "'delete-ratio-threshold', '1.0', 'min-file-size-bytes', '3538944', 'min-input-files', '2', "
        "'remove-dangling-deletes', 'true', 'target-file-size-bytes', '67108864'))",
    )
    # what runs when they leave it due: its data files rewritten, as for a view they do not make due
    assert len(planned.if_still_due) == 2
    assert planned.if_still_due[0].startswith("call system.rewrite_data_files(table => '`s`.`v`', strategy => 'sort'")
    assert "'delete-file-threshold', '1'" in planned.if_still_due[0]
    assert planned.if_still_due[1].startswith("call system.rewrite_position_delete_files(")
    # a small file is at most 8 MB, whatever the view's size, and every file of a view of a few KB
    assert ViewFiles(300, 8, 9000 * MB).small_file_bytes == 8 * MB
    assert ViewFiles(30, 8, 40_000).small_file_bytes == 256 * 1024
    # a tenth of its rows deleted, even in a view of one file: its data files rewritten
    assert compaction_kind(ViewFiles(33, 8, 54 * MB, records=1_000, deleted=100), 2) is CompactionKind.DATA_FILES
    # the delete files outnumber the small data files: merged (or the data files rewritten), as before
    assert compaction_kind(ViewFiles(6, 325, 124 * MB), 2) is CompactionKind.DELETE_FILES
    # not on format 3 nor with ARRAY or MAP columns (not measured there)
    assert compaction_kind(packed, 3) is CompactionKind.DATA_FILES
    assert compaction_kind(packed, 2, ["map<string,int>"]) is CompactionKind.DATA_FILES
    assert compaction("s.v", DUE, _table(properties)).if_still_due == ()


def test_a_view_its_small_files_rewritten_leave_due_has_its_data_files_rewritten_after_them():
    planned = Compaction(
        "s.v", ViewFiles(33, 8, 54 * MB), ("call small",), CompactionKind.SMALL_FILES, ("call a", "call b")
    )
    ctx = _Context()  # they leave 1 data file: not due
    done = compact(ctx, planned)
    assert ctx.statements == ["call small"]
    assert done.line.startswith("rewrote its small data files: 33 data files to 1 in ") and done.failure is None
    ctx = _Context()
    ctx._after = {"total-data-files": "30", "total-delete-files": "8", "total-files-size": str(54 * MB)}  # still due
    done = compact(ctx, planned)
    assert ctx.statements == ["call small", "call a", "call b"]
    assert done.line.startswith("compacted 33 data and 8 delete files to 30 and 8 in ")
