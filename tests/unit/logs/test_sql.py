"""The change-log SQL parses as Spark SQL, quotes identifiers and never pastes values raw."""

import pytest
import sqlglot

from dbt_incremental_mv.logs import sql
from dbt_incremental_mv.logs.contract import LogEvolution, LogSpec

SPEC = LogSpec("logs.mlog", "shop.mlog_orders", "orders", "shop.orders", ("order_id",), True)
LOGGED = ["order_id", "amount"]


def parses(statement):
    sqlglot.parse_one(statement, read="spark")
    return statement


def test_create_log_is_a_v3_iceberg_table_with_the_contract_columns():
    ddl = sql.create_log(SPEC, [("order_id", "bigint"), ("amount", "decimal(10,2)")])
    assert "create table if not exists `shop`.`mlog_orders`" in ddl
    assert "`_mv_op` string" in ddl and "`_mv_commit` bigint" in ddl
    assert "'format-version'='3'" in ddl


@pytest.mark.parametrize(
    "statement",
    [
        sql.watermark_row(SPEC, LOGGED, 42),
        sql.watermark_row(SPEC, LOGGED, None, reset=True),
        sql.capture_from_changelog(SPEC, LOGGED, "mv_changes_1", 42),
        sql.capture_by_diff(SPEC, LOGGED, 41, 42),
        sql.capture_by_diff(SPEC, LOGGED, None, 42),
        sql.capture_by_files(SPEC, LOGGED, "mv_files_removed_1", "mv_files_added_1", 42),
        sql.capture_by_files(SPEC, LOGGED, None, "mv_files_added_1", 42),
        sql.capture_by_files(SPEC, LOGGED, "mv_files_removed_1", None, 42),
        sql.capture_by_files(SPEC, LOGGED, None, None, 42),
        sql.capture_by_files(SPEC, LOGGED, "mv_files_removed_1", "mv_files_added_1", 42, lineage_since=5,
                             written_view="mv_files_added_1"),
        sql.capture_by_files(SPEC, LOGGED, None, "mv_files_added_1", 42, lineage_since=5, written_view="mv_files_added_1"),
        sql.capture_by_files(SPEC, LOGGED, "mv_files_removed_1", None, 42, lineage_since=5),
        sql.log_stats(SPEC, 7, 3),
        sql.marked_changes(SPEC, 7, 3, 9, ["order_id"]),
        sql.purge(SPEC, [(9, ())], 12),
        sql.purge(SPEC, [(9, (41,)), (5, ())], 12, as_delete=True),
    ],
)
def test_statements_parse(statement):
    parses(statement)


def test_a_capture_by_files_diffs_the_changed_files_rows_both_ways_in_one_read():
    both = sql.capture_by_files(SPEC, LOGGED, "mv_files_removed_1", "mv_files_added_1", 42, "mv_capture_x")
    assert both.startswith("insert into `shop`.`mlog_orders`.`branch_mv_capture_x`")
    # each side read once: +1 for the new rows, -1 for the old, a net count per distinct row
    assert both.count("from `mv_files_added_1`") == 1 and both.count("from `mv_files_removed_1`") == 1
    assert "select `order_id`, `amount`, 1 as `_mv_sign` from `mv_files_added_1`" in both
    assert "select `order_id`, `amount`, -1 as `_mv_sign` from `mv_files_removed_1`" in both
    assert "group by `order_id`, `amount` having sum(`_mv_sign`) <> 0" in both
    assert "case when `_mv_net` > 0 then 'I' else 'D' end, 42" in both
    assert "explode(sequence(1, abs(`_mv_net`)))" in both  # |n| copies of a row changed n times
    assert "except all" not in both and "'W', 42" in both
    # files only added (appends): every row is an insert, no difference to compute
    added = sql.capture_by_files(SPEC, LOGGED, None, "mv_files_added_1", 42)
    assert "group by" not in added and "'D'" not in added and "select `order_id`, `amount`, 'I', 42" in added
    # files only removed (whole files deleted): every row is a delete
    removed = sql.capture_by_files(SPEC, LOGGED, "mv_files_removed_1", None, 42)
    assert "group by" not in removed and "'I'" not in removed and "from `mv_files_removed_1`" in removed
    # nothing changed in any file (e.g. a commit of no rows): the watermark alone
    assert "'I'" not in sql.capture_by_files(SPEC, LOGGED, None, None, 42)


def test_a_capture_by_row_lineage_filters_the_new_rows_and_anti_joins_the_old_on_one_column():
    both = sql.capture_by_files(
        SPEC, LOGGED, "mv_files_removed_1", "mv_files_added_1", 42, "mv_capture_x", lineage_since=5,
        written_view="mv_files_added_1",
    )
    assert both.startswith("insert into `shop`.`mlog_orders`.`branch_mv_capture_x`")
    # after images: the new files' rows written after the captured snapshot's sequence number
    assert (
        "select `order_id`, `amount`, 'I', 42, current_timestamp() from `mv_files_added_1` "
        "where `_last_updated_sequence_number` > 5" in both
    )
    # before images: the old rows whose id no row copied unchanged carries (deleted or updated)
    assert "from `mv_files_removed_1` as `_mv_old`\nleft anti join (select `_row_id` from `mv_files_added_1` " \
        "where `_last_updated_sequence_number` <= 5) as `_mv_kept` on `_mv_old`.`_row_id` = `_mv_kept`.`_row_id`" in both
    assert "select `_mv_old`.`order_id`, `_mv_old`.`amount`, 'D', 42" in both
    # no comparison by value: nothing grouped by every column
    assert "group by" not in both and "_mv_sign" not in both and "'W', 42" in both
    # only added files: their new rows; only removed files: all their rows
    added = sql.capture_by_files(SPEC, LOGGED, None, "mv_files_added_1", 42, lineage_since=5, written_view="mv_files_added_1")
    assert "'D'" not in added and "`_last_updated_sequence_number` > 5" in added
    removed = sql.capture_by_files(SPEC, LOGGED, "mv_files_removed_1", None, 42, lineage_since=5)
    assert "'I'" not in removed and "anti join" not in removed and "from `mv_files_removed_1` as `_mv_old`" in removed
    # merge-on-read: a file whose deletes changed is on the new side for its kept rows' ids only;
    # after images come from the files written since
    mor = sql.capture_by_files(SPEC, LOGGED, "mv_files_removed_1", "mv_files_added_1", 42, lineage_since=5,
                               written_view="mv_files_written_1")
    assert "from `mv_files_written_1` where `_last_updated_sequence_number` > 5" in mor
    assert "(select `_row_id` from `mv_files_added_1` where `_last_updated_sequence_number` <= 5)" in mor
    assert mor.count("mv_files_written_1") == 1 and mor.count("mv_files_added_1") == 1
    # few rows gone: their ids found first (ids only), then the old rows read through a broadcast
    few = sql.capture_by_files(SPEC, LOGGED, "mv_files_removed_1", "mv_files_added_1", 42, lineage_since=5,
                               written_view="mv_files_added_1", gone_ids_broadcast=True)
    assert (
        "from `mv_files_removed_1` as `_mv_old`\nleft semi join (select /*+ BROADCAST */ * from (\n"
        "select `_mv_ids`.`_row_id` from `mv_files_removed_1` as `_mv_ids` left anti join (select `_row_id` "
        "from `mv_files_added_1` where `_last_updated_sequence_number` <= 5) as `_mv_kept` on "
        "`_mv_ids`.`_row_id` = `_mv_kept`.`_row_id`\n)) as `_mv_gone` on `_mv_old`.`_row_id` = `_mv_gone`.`_row_id`"
    ) in few
    parses(few)
    # only deletes (no file written since): no after image is read at all
    deletes = sql.capture_by_files(SPEC, LOGGED, "mv_files_removed_1", "mv_files_added_1", 42, lineage_since=5)
    assert "'I'" not in deletes and "left anti join (select `_row_id` from `mv_files_added_1`" in deletes


def test_reset_watermark_is_flagged():
    assert "'R'" in sql.watermark_row(SPEC, LOGGED, 5, reset=True)
    assert "'W'" in sql.watermark_row(SPEC, LOGGED, 5)


def test_purge_keeps_unconsumed_rows_and_the_newest_watermark():
    purge = sql.purge(SPEC, [(9, ())], 12)
    assert "`_last_updated_sequence_number` <= 9" in purge
    assert "`_last_updated_sequence_number` < 12" in purge
    assert "merge into `shop`.`mlog_orders`" in purge


def test_the_purge_as_a_delete_selects_the_same_rows_by_row_id():
    """Spark 4.1's form (a copy-on-write MERGE reading the log's metadata columns fails analysis
    there): the same condition, the rows it selects deleted by row id."""
    merge = sql.purge(SPEC, [(9, (41,)), (5, ())], 12)
    delete = sql.purge(SPEC, [(9, (41,)), (5, ())], 12, as_delete=True)
    condition = merge.split(" from `shop`.`mlog_orders` where ", 1)[1].split(") as consumed", 1)[0]
    assert delete == (
        "delete from `shop`.`mlog_orders`\n"
        f"where `_row_id` in (select `_row_id` from `shop`.`mlog_orders` where {condition})"
    )
    assert "`_last_updated_sequence_number` <= 5" in condition and "`_mv_commit` in (41)" in condition


def test_identifiers_with_backticks_are_escaped():
    odd = LogSpec("l.x", "sh`op.lo`g", "m", "sh`op.ma`ster", ("k`ey",), True)
    statement = sql.marked_changes(odd, 1, None, 2, ["k`ey"])
    assert "`sh``op`.`lo``g`" in statement and "`k``ey`" in statement
    parses(statement)


def test_values_must_be_integers():
    with pytest.raises(TypeError):
        sql.log_stats(SPEC, "7; drop table x", 1)


def test_purge_honours_commits_consumed_on_commit_by_every_view():
    purge = sql.purge(SPEC, [(9, (41, 42)), (5, (42,))], None)
    assert "(`_last_updated_sequence_number` <= 9 or `_mv_commit` in (41, 42))" in purge
    assert "(`_last_updated_sequence_number` <= 5 or `_mv_commit` in (42))" in purge
    parses(purge)


def test_on_commit_selection_restricts_to_the_commits():
    statement = sql.marked_changes(SPEC, 7, 3, 9, ["order_id"], excluded=(40,), only=(41,))
    assert "`_mv_commit` not in (40)" in statement and "`_mv_commit` in (41)" in statement
    parses(statement)


def test_a_log_evolves_by_schema_changes_or_is_recreated():
    evolution = LogEvolution(dropped=("channel",), widened=(("amount", "decimal(10,2)", "decimal(12, 2)"),))
    assert [parses(s) for s in sql.evolve_log(SPEC, evolution)] == [
        "alter table `shop`.`mlog_orders` alter column `amount` type decimal(12,2)",
        "alter table `shop`.`mlog_orders` drop column `channel`",
    ]
    recreate = LogEvolution(incompatible=(("amount", "decimal(10,2)", "string"),))
    assert sql.evolve_log(SPEC, recreate) == ["drop table if exists `shop`.`mlog_orders`"]
