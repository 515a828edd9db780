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


def test_a_view_is_due_for_compaction_by_its_delete_files_or_its_many_small_files():
    from dbt_incremental_mv.layout import COMPACT_DATA_FILES, COMPACT_DELETE_FILES, ViewFiles

    assert not ViewFiles(12, 0, 3 * 1024**2).compaction_due  # as a build leaves it
    assert ViewFiles(42, COMPACT_DELETE_FILES, 3 * 1024**2).compaction_due
    assert ViewFiles(COMPACT_DATA_FILES, 0, 3 * 1024**2).compaction_due  # many small files
    assert not ViewFiles(COMPACT_DATA_FILES, 0, COMPACT_DATA_FILES * 128 * 1024**2).compaction_due  # many big ones
    # partitioned: a file per partition however small (a compaction leaves them): its delete files only
    assert not ViewFiles(365, 0, 3 * 1024**2, partitioned=True).compaction_due
    assert ViewFiles(365, COMPACT_DELETE_FILES, 3 * 1024**2, partitioned=True).compaction_due
    assert ViewFiles(202, 49, 3_355_443).describe() == "202 data files and 49 delete files, 3.2 MB"


def test_the_view_is_compacted_by_icebergs_procedures_its_deletes_applied():
    from dbt_incremental_mv.layout import compaction_statements

    rewrite = (
        "call system.rewrite_data_files(table => '`s`.`order-totals`', options => "
        "map('delete-file-threshold', '1', 'min-file-size-bytes', '8388608', 'remove-dangling-deletes', 'true'))"
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
        "map('delete-file-threshold', '1', 'min-file-size-bytes', '8388608', 'remove-dangling-deletes', 'true', 'rewrite-all', 'true'))"
    )
    types = ["bigint", "array<struct<v:decimal(10,2),n:bigint>>"]
    assert compaction_statements("s.v", 2, types) == [every]
    assert compaction_statements("s.v", 2, ["map<string,int>"]) == [every]
    assert len(compaction_statements("s.v", 2, ["bigint", "struct<a:int>"])) == 2
