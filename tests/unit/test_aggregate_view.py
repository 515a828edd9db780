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


def test_one_merge_deterministic_and_parseable():
    first = statement(BY_PRODUCT, **{"shop.lines": (2, 1)})
    second = statement(BY_PRODUCT, **{"shop.lines": (2, 1)})
    assert first.sql == second.sql
    parsed = sqlglot.parse(first.sql, read="spark")
    assert len(parsed) == 1 and isinstance(parsed[0], sqlglot.exp.Merge)
    assert first.sql.startswith("merge into `shop`.`v` as `_mv_t`")
    # groups are matched null-safely; a group reaching zero rows is deleted
    assert "on `_mv_t`.`product_id` <=> `_mv_s`.`product_id`" in first.sql
    assert "when matched and `_mv_s`.`_mv_action` = 'D' then delete" in first.sql
    # AVG is stored in its own type, from the hidden sum and count
    assert "as decimal(14,6)) as `avg_price`" in first.sql


def test_single_master_reads_only_its_log():
    sql = statement(BY_PRODUCT, **{"shop.lines": (3, 0)}).sql
    delta = sql.split("`_mv_delta` as (", 1)[1].split("\n)", 1)[0]
    assert "`logs`.`mlog_lines` VERSION AS OF 11" in delta
    assert "`shop`.`lines`" not in delta


def test_insert_only_never_recomputes_min_max():
    insert_only = statement(BY_PRODUCT, **{"shop.lines": (3, 0)})
    assert "`_mv_recompute` as (" not in insert_only.sql
    assert "MIN/MAX recompute (insert-only)" in insert_only.steps_skipped
    assert "greatest(`_mv_v`.`max_price`" in insert_only.sql and "least(`_mv_v`.`min_qty`" in insert_only.sql
    mixed = statement(BY_PRODUCT, **{"shop.lines": (3, 2)})
    assert "`_mv_recompute` as (" in mixed.sql
    assert "MIN/MAX recompute of groups whose extreme was removed" in mixed.steps_run
    # only groups where a removed value reaches the stored extreme are recomputed
    assert "`_mv_d`.`_mv_dn_max_price` >= `_mv_v`.`max_price`" in mixed.sql
    assert "`_mv_d`.`_mv_dn_min_qty` <= `_mv_v`.`min_qty`" in mixed.sql


def test_no_min_max_no_recompute_even_with_deletes():
    sql = statement("select product_id, count(*) as n, sum(qty) as q from shop.lines group by product_id",
                    **{"shop.lines": (1, 4)}).sql
    assert "`_mv_recompute` as (" not in sql


def test_join_terms_only_for_changed_masters():
    only_orders = statement(BY_STATUS, **{"shop.orders": (1, 1)})
    assert only_orders.steps_run[0] == "DELTA o" and "DELTA l" in only_orders.steps_skipped
    both = statement(BY_STATUS, **{"shop.orders": (1, 1), "shop.lines": (2, 0)})
    assert both.steps_run[:2] == ("DELTA o", "DELTA l")
    delta = both.sql.split("`_mv_delta` as (", 1)[1].split("\n), `_mv_flagged`", 1)[0]
    assert delta.count("UNION ALL") + delta.count("union all") >= 1
    # the term for lines reads orders in its new state; the term for orders reads lines in its
    # old state: new rows minus the inserted keys (insert-only log)
    assert "LEFT ANTI JOIN" in delta.upper()
    assert "WHERE `l`.`qty` > 0" in delta


def test_global_aggregate_keeps_its_row():
    sql = statement(GLOBAL, **{"shop.lines": (0, 3)}).sql
    assert "\non true\n" in sql
    assert "then 'D'" not in sql.split("when matched", 1)[0]


def test_unlogged_column_blocks_fast_refresh():
    view = analyze_view(BY_PRODUCT, MASTERS)
    reason = view_classes.blocker(view, {"shop.lines": ["line_id", "product_id", "qty"]})
    assert reason is not None and "does not log price" in reason
    assert view_classes.blocker(view, {"shop.lines": [c for c, _ in LINES.columns]}) is None


@pytest.mark.parametrize("sql", [BY_PRODUCT, BY_STATUS, GLOBAL])
def test_identifiers_quoted_values_literal(sql):
    text = statement(sql, **{"shop.lines": (1, 1), "shop.orders": (1, 0)}).sql
    assert "VERSION AS OF 11" in text  # the marked log snapshot, as an integer literal
    for word in ("_mv_sign", "_mv_op", "_mv_action"):
        assert f" {word}" not in text.replace(f"`{word}`", "")
