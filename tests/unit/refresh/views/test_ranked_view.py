"""RANKED views' refresh (refresh/views/ranked_view.py): which partitions a change touches, read
from the log's images or, when the log lacks the partition columns, from the view and the master."""

from __future__ import annotations

import dataclasses

from dbt_incremental_mv.analysis import analyze_view
from dbt_incremental_mv.refresh.views import ranked_view, view_classes
from tests.unit.refresh.views.test_refresh_sql_golden import MASTERS, ORDERS, VIEWS, log

LATEST = analyze_view(VIEWS["latest"], MASTERS)
FILTERED = analyze_view(VIEWS["top_ranked"], MASTERS)


def statement(view, **fields):
    marked = {m.name: log(m, view) for m in MASTERS.values()}
    marked[ORDERS.name] = dataclasses.replace(log(ORDERS, view), **fields)
    return view_classes.refresh_statement(view, "shop.v", marked, {}, "mv_write_t")


def test_nothing_marked_writes_nothing():
    assert statement(LATEST) is None


def test_partitions_from_the_images_when_the_log_carries_their_columns():
    found = statement(LATEST, inserts=1, deletes=1, key_values=((4,),), insert_key_values=((4,),))
    (cached,) = found.cached
    assert "`logs`.`mlog_orders`" in cached.sql and "`shop`.`v`" not in cached.sql
    assert [w.kind for w in found.writes] == ["delete", "insert"] and found.branch == "mv_write_t"


def test_partitions_from_the_view_and_the_master_when_it_does_not():
    found = statement(LATEST, inserts=1, deletes=1, key_values=((4,),), insert_key_values=((4,),), logged=("order_id",))
    (cached,) = found.cached
    # the old partitions: the view's rows of the changed keys; the new: the master's
    assert "from `shop`.`v` where `_mv_latest_order_id` in (4)" in cached.sql
    assert "from `shop`.`orders` version as of 123 where `order_id` in (4)" in cached.sql
    assert "`logs`.`mlog_orders`" not in cached.sql


def test_filters_on_the_ranked_rows_need_the_images():
    assert ranked_view.blocker(FILTERED, {ORDERS.name: ("order_id", "amount")}) is not None
    assert "does not carry day, status" in ranked_view.blocker(FILTERED, {ORDERS.name: ("order_id",)})
    assert ranked_view.blocker(FILTERED, {ORDERS.name: ("order_id", "status", "day")}) is None
    assert ranked_view.blocker(LATEST, {ORDERS.name: ("order_id",)}) is None


def test_only_new_rows_are_ranked_among_the_views_own_and_the_master_is_not_read():
    found = statement(LATEST, inserts=2, key_values=((4,), (5,)), insert_key_values=((4,), (5,)),
                      netted_by=("customer_id", "day", "order_id", "status", "amount"))
    assert found.steps_run[0] == "MERGE latest"
    insert = found.writes[-1].sql
    assert "`shop`.`orders`" not in insert and "`logs`.`mlog_orders`" in insert
    # ranked again on the stored columns, the tie broken by the stored key, the rank recomputed
    assert "order by `day` desc nulls last, `_mv_latest_order_id` nulls first" in insert
    assert "`_mv_rank` as `rn`" in insert


def test_deletes_or_filters_on_the_ranked_rows_recompute_from_the_master():
    netted = ("customer_id", "day", "order_id", "status", "amount")
    mixed = statement(LATEST, inserts=2, deletes=1, key_values=((4,), (5,)), netted_by=netted)
    assert mixed.steps_run[0] == "PARTITIONS latest" and "`shop`.`orders` VERSION AS OF 123" in mixed.writes[-1].sql
    filtered = statement(FILTERED, inserts=2, key_values=((4,), (5,)), insert_key_values=((4,), (5,)), netted_by=netted)
    assert filtered.steps_run[0] == "PARTITIONS r"
