from dbt_incremental_mv.analysis import MasterTable, analyze_view
from dbt_incremental_mv.layout import layout_advice

MASTERS = {
    "s.orders": MasterTable("s.orders", (("order_id", "bigint"), ("customer_id", "bigint"), ("amount", "int")), ("order_id",)),
    "s.customers": MasterTable("s.customers", (("customer_id", "bigint"), ("name", "string")), ("customer_id",)),
}


def test_view_sorted_by_hidden_keys_masters_by_key_and_join_columns():
    view = analyze_view(
        "select o.order_id, c.name from s.orders o join s.customers c on o.customer_id = c.customer_id", MASTERS
    )
    assert layout_advice(view, "s.order_names") == [
        "alter table `s`.`order_names` write ordered by `_mv_o_order_id`, `_mv_c_customer_id`",
        "alter table `s`.`orders` write ordered by `order_id`",
        "alter table `s`.`customers` write ordered by `customer_id`",
        # the orders of a changed customer are read by their customer_id (a bloom filter skips row groups)
        "alter table `s`.`orders` set tblproperties ('write.parquet.bloom-filter-enabled.column.customer_id' = 'true', "
        "'write.parquet.row-group-size-bytes' = '16777216')",
    ]


def test_aggregate_view_sorted_by_group_keys():
    view = analyze_view("select customer_id, sum(amount) as total from s.orders group by customer_id", MASTERS)
    assert layout_advice(view, "s.totals")[0] == "alter table `s`.`totals` write ordered by `customer_id`"


def test_a_view_is_due_for_compaction_by_the_files_a_scan_opens_beyond_a_rewrites_or_its_deleted_rows():
    from dbt_incremental_mv.layout import COMPACT_EXTRA_FILES, COMPACT_EXTRA_PER_FILE, ViewFiles

    MB = 1024**2
    # a 30 MB view: a rewrite leaves 1 file; 32 extra files (delete files, and data files over 1) make it due
    mid = ViewFiles(12, 0, 30 * MB)
    assert (mid.rewritten_files, mid.extra_files, mid.extra_files_due) == (1, 11, 32)
    assert not mid.compaction_due  # as a few refreshes leave it
    assert ViewFiles(12, 21, 30 * MB).compaction_due and not ViewFiles(12, 20, 30 * MB).compaction_due
    assert ViewFiles(33, 0, 30 * MB).compaction_due  # many small files
    # a view of one row group (16 MB): its scan is a job's fixed cost, each extra file 2-3% of it: 8 make it due
    small = ViewFiles(8, 0, 3 * MB)
    assert (small.rewritten_files, small.extra_files, small.extra_files_due) == (1, 7, 8)
    assert not small.compaction_due and ViewFiles(9, 0, 3 * MB).compaction_due
    assert ViewFiles(5, 4, 16 * MB).compaction_due and not ViewFiles(5, 4, 16 * MB + 1).compaction_due
    # a 900 MB view in 27 files of a build: a refresh deleting in 12 of them is not due (one was,
    # when 4 delete files were: its compaction cost as much as a rebuild); many more refreshes are
    big = ViewFiles(30, 12, 900 * MB)
    assert (big.rewritten_files, big.extra_files, big.extra_files_due) == (15, 27, 256)
    assert big.extra_files_due == COMPACT_EXTRA_FILES + COMPACT_EXTRA_PER_FILE * 15
    assert not big.compaction_due
    assert ViewFiles(150, 121, 900 * MB).compaction_due and not ViewFiles(150, 120, 900 * MB).compaction_due
    # a tenth of its rows deleted: due whatever its files
    assert ViewFiles(30, 12, 900 * MB, records=10_000_000, deleted=999_999).compaction_due is False
    assert ViewFiles(30, 12, 900 * MB, records=10_000_000, deleted=1_000_000).compaction_due
    # partitioned: a file per partition however small (a compaction leaves them): its delete files only
    assert not ViewFiles(365, 0, 30 * MB, partitioned=True).compaction_due
    assert ViewFiles(365, 32, 30 * MB, partitioned=True).compaction_due
    assert ViewFiles(365, 8, 3 * MB, partitioned=True).compaction_due
    assert ViewFiles(202, 49, 3_355_443).describe() == "202 data files and 49 delete files, 3.2 MB"
    assert mid.due_at == "32 files beyond the 1 data files a rewrite leaves (now 11)"
    assert small.due_at == "8 files beyond the 1 data files a rewrite leaves (now 7)"
    assert big.due_at == "256 files beyond the 15 data files a rewrite leaves (now 27), or 10% of its rows deleted"
    assert ViewFiles(365, 3, 300 * MB, partitioned=True).due_at == "96 delete files (now 3), or 10% of its rows deleted"
    # a view of one file: its deleted rows cost less than its scan's job
    assert not ViewFiles(2, 1, 3 * MB, records=2, deleted=1).compaction_due
    summary = {"total-data-files": "30", "total-delete-files": "2", "total-files-size": "9", "total-records": "100",
               "total-position-deletes": "10"}
    assert ViewFiles.of_summary(summary) == ViewFiles(30, 2, 9, records=100, deleted=10)


def test_the_view_is_compacted_by_icebergs_procedures_its_deletes_applied():
    from dbt_incremental_mv.layout import compaction_statements

    rewrite = (
        "call system.rewrite_data_files(table => '`s`.`order-totals`', options => "
        "map('delete-file-threshold', '1', 'min-file-size-bytes', '8388608', 'remove-dangling-deletes', 'true', 'target-file-size-bytes', '67108864'))"
    )
    dangling = "call system.rewrite_position_delete_files(table => '`s`.`order-totals`', options => map('rewrite-all', 'true'))"
    assert compaction_statements("s.order-totals", 2) == [rewrite, dangling]
    assert compaction_statements("s.order-totals", 3) == [rewrite]  # deletion vectors: rewritten with their files


def test_a_view_with_array_or_map_columns_has_every_file_rewritten_instead_of_its_position_deletes():
    # (Iceberg 1.10 fails to rewrite the position delete files of such a table: apache/iceberg#14619;
    # every data file rewritten leaves every delete file dangling, which the rewrite drops)
    from dbt_incremental_mv.layout import compaction_statements

    every = (
        "call system.rewrite_data_files(table => '`s`.`v`', options => "
        "map('delete-file-threshold', '1', 'min-file-size-bytes', '8388608', 'remove-dangling-deletes', 'true', 'rewrite-all', 'true', 'target-file-size-bytes', '67108864'))"
    )
    types = ["bigint", "array<struct<v:decimal(10,2),n:bigint>>"]
    assert compaction_statements("s.v", 2, types) == [every]
    assert compaction_statements("s.v", 2, ["map<string,int>"]) == [every]
    assert len(compaction_statements("s.v", 2, ["bigint", "struct<a:int>"])) == 2
