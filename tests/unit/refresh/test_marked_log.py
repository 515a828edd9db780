"""A pinned build reads each master at its snapshot, cast to the master's current column types."""

from dbt_incremental_mv.analysis import MasterTable, analyze_view
from dbt_incremental_mv.analysis.render import render_select
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh.marked_log import MarkedLog

ORDERS = MasterTable("shop.orders", (("order_id", "bigint"), ("amount", "decimal(12,2)"), ("note", "string")), ("order_id",))
SPEC = LogSpec("logs.mlog_orders", "logs.mlog_orders", "orders", "shop.orders", ("order_id",), True)
MARKED = MarkedLog(SPEC, 11, 5, 9, 1, 0, 123)


def test_widenable_columns_are_cast_to_their_current_type():
    source = MARKED.master_as_of_current_types({"amount": "decimal(12, 2)", "order_id": "bigint", "note": "string"})
    assert source == (
        "(select cast(`amount` as decimal(12,2)) as `amount`, `note`, cast(`order_id` as bigint) as `order_id` "
        "from `shop`.`orders` version as of 123)"
    )


def test_no_widenable_column_reads_the_snapshot_as_is():
    assert MARKED.master_as_of_current_types({"note": "string"}) == "`shop`.`orders` version as of 123"
    assert MARKED.master_as_of_current_types({}) == "`shop`.`orders` version as of 123"


def test_the_cast_source_renders_into_the_defining_query():
    view = analyze_view("select o.order_id, o.amount from shop.orders o where o.amount > 6", {"shop.orders": ORDERS})
    types = dict(ORDERS.columns)
    source = MARKED.master_as_of_current_types({c: types[c] for c in view.referenced_columns["o"]})
    query = render_select(view, {"o": source})
    assert query == (
        "SELECT `o`.`order_id` AS `order_id`, `o`.`amount` AS `amount`, `o`.`order_id` AS `_mv_o_order_id` "
        "FROM (SELECT CAST(`amount` AS DECIMAL(12, 2)) AS `amount`, CAST(`order_id` AS BIGINT) AS `order_id` "
        "FROM `shop`.`orders` VERSION AS OF 123) AS `o` WHERE `o`.`amount` > 6"
    )


def test_a_log_whose_after_images_are_all_patched_updates_reads_no_other_master():
    from dataclasses import replace

    patched = replace(MARKED, insert_key_values=((7,),), patch_key_values=((7,), (8,)))
    assert patched.inserts_patched
    assert replace(patched, insert_key_values=(), patch_key_values=()).inserts_patched  # deletes alone
    assert not replace(patched, insert_key_values=((7,), (9,))).inserts_patched  # 9 is new
    assert not MARKED.inserts_patched  # not known: the view patches nothing of it
