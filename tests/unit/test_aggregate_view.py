"""The aggregate refresh statement, generated without Spark: shape, determinism, step skipping."""

import pytest
import sqlglot

from dbt_incremental_mv.analysis import MasterTable, analyze_view
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh import aggregate_view, view_classes
from dbt_incremental_mv.refresh.marked import MarkedLog

LINES = MasterTable(
    "shop.lines",
    (("line_id", "bigint"), ("order_id", "bigint"), ("product_id", "bigint"), ("qty", "int"), ("price", "decimal(10,2)")),
    ("line_id",),
)
ORDERS = MasterTable("shop.orders", (("order_id", "bigint"), ("status", "string"), ("day", "date")), ("order_id",))
MASTERS = {m.name: m for m in (LINES, ORDERS)}

BY_PRODUCT = (
    "select product_id, count(*) as n, count(qty) as n_qty, sum(qty * price) as revenue, avg(price) as avg_price, "
    "min(qty) as min_qty, max(price) as max_price from shop.lines group by product_id"
)
BY_STATUS = (
    "select o.status, count(*) as n, sum(l.qty) as qty, max(o.day) as last_day "
    "from shop.orders o join shop.lines l on l.order_id = o.order_id where l.qty > 0 group by o.status"
)
GLOBAL = "select count(*) as n, sum(qty) as qty from shop.lines"


def marked(master, inserts=0, deletes=0):
    spec = LogSpec("logs", f"logs.mlog_{master.name.split('.')[1]}", master.name, master.name, master.key, True)
    return MarkedLog(spec, 11, 5, 9, inserts, deletes, 123)


def statement(sql, **changes):
    view = analyze_view(sql, MASTERS)
    logs = {name: marked(MASTERS[name], *changes.get(name, (0, 0))) for name in {o.master.name for o in view.occurrences}}
    return aggregate_view.refresh_statement(view, "shop.v", logs, {"n": "bigint", "avg_price": "decimal(14,6)"})


def test_nothing_marked_means_no_statement():
    assert statement(BY_PRODUCT) is None


def test_delete_of_the_changed_groups_then_insert_of_their_new_rows_deterministic_and_parseable():
    first = statement(BY_PRODUCT, **{"shop.lines": (2, 1)})
    second = statement(BY_PRODUCT, **{"shop.lines": (2, 1)})
    assert first.sql == second.sql
    delete, insert = first.writes
    assert isinstance(sqlglot.parse_one(delete.sql, read="spark"), sqlglot.exp.Delete)
    assert isinstance(sqlglot.parse_one(insert.sql, read="spark"), sqlglot.exp.Insert)
    # both go to the write branch; the second one is staged on it and published
    assert first.branch == "mv_write"
    assert delete.sql.startswith("delete from `shop`.`v`.`branch_mv_write` as `_mv_v`\nwhere exists (select /*+ BROADCAST */ 1")
    assert insert.sql.startswith("insert into `shop`.`v`.`branch_mv_write` (")
    # groups are matched null-safely; the delta is broadcast wherever it filters the view
    assert delete.sql.endswith("as `_mv_k` where `_mv_k`.`product_id` <=> `_mv_v`.`product_id`)")
    stored = insert.sql.split("`_mv_stored` as (", 1)[1].split("\n)", 1)[0]
    assert stored.startswith("\nselect * from `shop`.`v` as `_mv_v`\nwhere exists (select /*+ BROADCAST */ 1 from (")
    assert "left join `_mv_stored` as `_mv_t` on `_mv_s`.`product_id` <=> `_mv_t`.`product_id`" in insert.sql
    # a group whose rows all went is not inserted again
    assert insert.sql.endswith(
        "else (coalesce(`_mv_t`.`_mv_count`, 0) + coalesce(`_mv_s`.`_mv_d__mv_count`, 0)) end > 0"
    )
    # AVG is stored in its own type, from the hidden sum and count
    assert "as decimal(14,6)) as `avg_price`" in insert.sql
    assert "merge into" not in first.sql  # Spark takes no join hint in a MERGE


def test_single_master_reads_only_its_log():
    delta = statement(BY_PRODUCT, **{"shop.lines": (3, 0)}).cached[0].sql
    assert "`logs`.`mlog_lines` VERSION AS OF 11" in delta
    assert "`shop`.`lines`" not in delta


def test_insert_only_never_recomputes_min_max():
    insert_only = statement(BY_PRODUCT, **{"shop.lines": (3, 0)})
    assert "`_mv_recompute` as (" not in insert_only.sql
    assert "MIN/MAX recompute (insert-only)" in insert_only.steps_skipped
    assert "greatest(`_mv_t`.`max_price`" in insert_only.sql and "least(`_mv_t`.`min_qty`" in insert_only.sql
    mixed = statement(BY_PRODUCT, **{"shop.lines": (3, 2)})
    assert "`_mv_recompute` as (" in mixed.sql
    assert "MIN/MAX recompute of groups whose extreme was removed" in mixed.steps_run
    # only groups where a removed value reaches the stored extreme are recomputed: the others
    # (every removed value beyond the stored extreme) are safe
    # (every removed value beyond the stored extreme, or a new value beyond every removed one) are safe
    assert (
        "(`_mv_d`.`_mv_dn_max_price` is null or (`_mv_v`.`max_price` is not null and `_mv_d`.`_mv_dn_max_price` < "
        "`_mv_v`.`max_price`) or `_mv_d`.`_mv_dn_max_price` < `_mv_d`.`_mv_dp_max_price`)"
    ) in mixed.sql
    assert (
        "(`_mv_d`.`_mv_dn_min_qty` is null or (`_mv_v`.`min_qty` is not null and `_mv_d`.`_mv_dn_min_qty` > "
        "`_mv_v`.`min_qty`) or `_mv_d`.`_mv_dn_min_qty` > `_mv_d`.`_mv_dp_min_qty`)"
    ) in mixed.sql
    # recomputed from the flagged groups' rows only (a semi join below the aggregation)
    recompute = mixed.sql.split("`_mv_recompute` as (", 1)[1]
    assert (
        "WHERE EXISTS(SELECT 1 FROM `_mv_flagged` AS `_mv_f` WHERE `_mv_f`.`product_id` IS NOT DISTINCT FROM "
        "(`lines`.`product_id`)) GROUP BY `lines`.`product_id`"
    ) in recompute


def test_no_min_max_no_recompute_even_with_deletes():
    sql = statement("select product_id, count(*) as n, sum(qty) as q from shop.lines group by product_id",
                    **{"shop.lines": (1, 4)}).sql
    assert "`_mv_recompute` as (" not in sql


def test_join_terms_only_for_changed_masters():
    only_orders = statement(BY_STATUS, **{"shop.orders": (1, 1)})
    assert only_orders.steps_run[0] == "DELTA o" and "DELTA l" in only_orders.steps_skipped
    both = statement(BY_STATUS, **{"shop.orders": (1, 1), "shop.lines": (2, 0)})
    assert both.steps_run[:2] == ("DELTA o", "DELTA l")
    delta = both.cached[0].sql
    assert delta.count("UNION ALL") + delta.count("union all") >= 1
    # the term for lines reads orders in its new state; the term for orders reads lines in its
    # old state: new rows minus the inserted keys (insert-only log)
    assert "LEFT ANTI JOIN" in delta.upper()
    assert "WHERE `l`.`qty` > 0" in delta


def test_global_aggregate_keeps_its_row():
    for changes in ((0, 3), (2, 1)):
        only = statement(GLOBAL, **{"shop.lines": changes})
        delete, insert = only.writes
        assert delete.sql.endswith("as `_mv_k` where true)")  # its one row is replaced
        assert "> 0" not in insert.sql.rsplit("left join `_mv_stored`", 1)[1]  # ... even at count 0


def test_global_min_max_is_recomputed_only_when_flagged():
    sql = statement("select count(*) as n, max(qty) as top from shop.lines", **{"shop.lines": (1, 1)}).sql
    recompute = sql.split("`_mv_recompute` as (", 1)[1]
    # over no rows a global aggregate still has a row: the flag filters after the aggregation
    assert ") as `_mv_q`\nwhere exists (select 1 from `_mv_flagged`)" in recompute


def test_unlogged_column_blocks_fast_refresh():
    view = analyze_view(BY_PRODUCT, MASTERS)
    reason = view_classes.blocker(view, {"shop.lines": ["line_id", "product_id", "qty"]})
    assert reason is not None and "does not log price" in reason
    assert view_classes.blocker(view, {"shop.lines": [c for c, _ in LINES.columns]}) is None


@pytest.mark.parametrize("sql", [BY_PRODUCT, BY_STATUS, GLOBAL])
def test_identifiers_quoted_values_literal(sql):
    made = statement(sql, **{"shop.lines": (1, 1), "shop.orders": (1, 0)})
    text = "\n".join([*(c.sql for c in made.cached), made.sql])
    assert "VERSION AS OF 11" in text  # the marked log snapshot, as an integer literal
    for word in ("_mv_sign", "_mv_op", "_mv_action"):
        assert f" {word}" not in text.replace(f"`{word}`", "")


def test_the_delta_is_computed_once_and_both_writes_read_it():
    """Spark inlines a CTE at each reference: the delta (a union of joins of logs and masters) is
    cached once instead of being evaluated by the DELETE and five times by the INSERT."""
    made = statement(BY_STATUS, **{"shop.orders": (1, 1), "shop.lines": (2, 0)})
    (cached,) = made.cached
    assert cached.name == "mv_write_delta"
    delete, insert = made.writes
    for write in (delete.sql, insert.sql):
        assert "`mv_write_delta`" in write
        assert "VERSION AS OF" not in write.split("`_mv_recompute`")[0]  # no log or master read before the recompute
    assert "union all" in cached.sql.lower()
    # statistics are read before the writes: they compute the delta themselves
    assert "`mv_write_delta`" not in made.stats_sql and cached.sql in made.stats_sql

