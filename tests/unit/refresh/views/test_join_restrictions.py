"""Where a refresh restricts what it reads, without Spark: key links through joins (one scan of a
fact for its dimensions' INS steps, outer-join slices that read only the affected inner rows, the
affected anchors read from the log's images), and the marked keys' range from log statistics."""

from __future__ import annotations

import dataclasses
import datetime

import sqlglot

from dbt_incremental_mv.analysis import MasterTable, analyze_view
from dbt_incremental_mv.analysis.links import KeyLink, key_links
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh.views import aggregate_view, join_view, outer_join_view
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.views.statement import WriteKind

ORDERS = MasterTable(
    "shop.orders",
    (("order_id", "bigint"), ("customer_id", "bigint"), ("product_id", "bigint"), ("ref", "string"),
     ("amount", "decimal(10,2)")),
    ("order_id",),
)
CUSTOMERS = MasterTable("shop.customers", (("customer_id", "bigint"), ("name", "string")), ("customer_id",))
PRODUCTS = MasterTable("shop.products", (("product_id", "bigint"), ("category", "string")), ("product_id",))
LINES = MasterTable(
    "shop.lines", (("order_id", "bigint"), ("line_no", "int"), ("qty", "int")), ("order_id", "line_no")
)
MASTERS = {m.name: m for m in (ORDERS, CUSTOMERS, PRODUCTS, LINES)}

STAR = (
    "select o.order_id, o.amount, c.name, p.category from shop.orders o "
    "join shop.customers c on o.customer_id = c.customer_id join shop.products p on p.product_id = o.product_id"
)
OUTER = (
    "select c.customer_id, c.name, o.order_id, o.amount from shop.customers c "
    "left join shop.orders o on o.customer_id = c.customer_id"
)


def marked(master: MasterTable, inserts: int = 1, deletes: int = 1, **fields) -> MarkedLog:
    spec = LogSpec("logs", f"logs.mlog_{master.name.split('.')[1]}", master.name, master.name, master.key, True)
    return dataclasses.replace(MarkedLog(spec, 11, 5, 9, inserts, deletes, 123), **fields)


def scans_of(sql: str, table: str) -> int:
    """How many times a statement reads ``table`` (sqlglot: every table reference)."""
    return sum(1 for t in sqlglot.parse_one(sql, read="spark").find_all(sqlglot.exp.Table)
               if f"{t.db}.{t.name}" == table)


def test_key_links_follow_equalities_that_cover_a_whole_key_of_the_same_type():
    view = analyze_view(STAR, MASTERS)
    assert key_links(view) == (
        KeyLink("c", "o", ("customer_id",), True),
        KeyLink("p", "o", ("product_id",), True),
    )
    # part of a composite key is no link; nor is a null-safe equality, nor a type mismatch
    partial = analyze_view(
        "select o.order_id, l.qty from shop.orders o join shop.lines l on l.order_id = o.order_id", MASTERS
    )
    assert key_links(partial) == (KeyLink("o", "l", ("order_id",), True),)
    null_safe = analyze_view(
        "select o.order_id, c.name from shop.orders o join shop.customers c on o.customer_id <=> c.customer_id", MASTERS
    )
    assert key_links(null_safe) == ()
    mistyped = analyze_view(
        "select o.order_id, c.name from shop.orders o join shop.customers c on o.ref = c.name", MASTERS
    )
    assert key_links(mistyped) == ()
    assert key_links(analyze_view(OUTER, MASTERS)) == (KeyLink("c", "o", ("customer_id",), False),)


def test_the_ins_steps_of_a_fact_and_its_dimensions_read_the_fact_once():
    view = analyze_view(STAR, MASTERS)
    literal = {"key_values": ((7,),), "insert_key_values": ((7,),)}
    logs = {m: marked(MASTERS[m], **literal) for m in ("shop.orders", "shop.customers", "shop.products")}
    insert = join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    assert scans_of(insert, "shop.orders") == 1  # was one per INS step: 3
    assert " union" not in insert.lower()  # one query: no duplicate to remove
    assert "WHERE `order_id` IN (7) OR `customer_id` IN (7) OR `product_id` IN (7)" in insert
    # keys read from the logs: the fact's own ones a query of their own (an IN of a subquery in
    # an OR would keep Spark from pushing its ranges to the scan), its dimensions' together
    logs = {m: marked(MASTERS[m]) for m in ("shop.orders", "shop.customers", "shop.products")}
    insert = join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    assert scans_of(insert, "shop.orders") == 2 and insert.lower().count("\nunion all\n") == 1
    where = insert[insert.index("`shop`.`orders` VERSION AS OF"):]
    for column, log in (("order_id", "mlog_orders"), ("customer_id", "mlog_customers"), ("product_id", "mlog_products")):
        assert f"(`{column}`) IN (SELECT /*+ BROADCAST */ * FROM (SELECT DISTINCT `{column}` FROM (SELECT * FROM (SELECT `{column}`, `_mv_op` FROM `logs`.`{log}`" in where
    # only dimensions changed: the fact is still read once, its own keys not among the filters
    logs["shop.orders"] = marked(ORDERS, 0, 0)
    insert = join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    assert scans_of(insert, "shop.orders") == 1 and "mlog_orders" not in insert
    # one dimension changed: its INS step as written (the dimension restricted)
    logs["shop.products"] = marked(PRODUCTS, 0, 0)
    insert = join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    assert "JOIN (SELECT * FROM `shop`.`customers` VERSION AS OF 123 WHERE (`customer_id`) IN" in insert


def test_a_fact_of_two_masters_is_restricted_by_a_changed_dimensions_literal_keys():
    # no semi join (a broadcast join already), but the literals: they prune the fact's files and
    # row groups where it is sorted by them (an indexed join state)
    view = analyze_view(
        "select o.order_id, o.amount, c.name from shop.orders o join shop.customers c on o.customer_id = c.customer_id",
        MASTERS,
    )
    logs = {"shop.orders": marked(ORDERS, 0, 0)}
    logs["shop.customers"] = marked(CUSTOMERS, key_values=((7,), (9,)), insert_key_values=((7,), (9,)))
    insert = join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    assert "FROM `shop`.`orders` VERSION AS OF 123 AS `_mv_y` WHERE `_mv_y`.`customer_id` IN (7, 9)" in insert
    assert " semi join " not in insert.lower()
    # keys read from the log: the customers' rows joined to the fact as they are
    logs["shop.customers"] = marked(CUSTOMERS)
    insert = join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    assert "`_mv_y`" not in insert and " semi join " not in insert.lower()


def test_an_outer_join_reads_the_inner_rows_of_the_affected_anchors_only():
    view = analyze_view(OUTER, MASTERS)
    logs = {"shop.orders": marked(ORDERS), "shop.customers": marked(CUSTOMERS)}
    statement = outer_join_view.refresh_statement(view, "shop.v", logs)
    insert = statement.writes[-1].sql
    assert "LEFT JOIN (SELECT * FROM `shop`.`orders` VERSION AS OF 123 WHERE (`customer_id`) IN (SELECT /*+ BROADCAST */ * FROM (SELECT `customer_id` FROM `mv_write_keys`)))" in insert
    # without the log's columns known: the old slices from the view, the new ones from the
    # changed orders' own customer_id (no join with customers)
    keys = statement.cached[0].sql
    assert scans_of(keys, "shop.v") == 1 and scans_of(keys, "shop.orders") == 1
    assert scans_of(keys, "shop.customers") == 0


def test_an_outer_join_takes_the_affected_anchors_from_the_images_when_the_log_carries_the_join_column():
    view = analyze_view(OUTER, MASTERS)
    logs = {
        "shop.orders": marked(ORDERS, logged=("order_id", "customer_id", "product_id", "ref", "amount")),
        "shop.customers": marked(CUSTOMERS),
    }
    keys = outer_join_view.refresh_statement(view, "shop.v", logs).cached[0].sql
    assert scans_of(keys, "shop.v") == 0 and scans_of(keys, "shop.orders") == 0
    assert "select `customer_id` as `customer_id`, `order_id` as `_mv_o_order_id` from (\nselect `customer_id`, `order_id`, `_mv_op` from `logs`.`mlog_orders`" in keys
    # a log that does not carry the join column: read as before
    logs["shop.orders"] = marked(ORDERS, logged=("order_id", "amount"))
    keys = outer_join_view.refresh_statement(view, "shop.v", logs).cached[0].sql
    assert scans_of(keys, "shop.v") == 1


def test_the_marked_keys_range_joins_the_filters_of_the_writes():
    view = analyze_view("select order_id, amount from shop.orders where amount > 0", MASTERS)
    logs = {"shop.orders": marked(ORDERS, key_ranges=((1000, 2000),))}
    statement = join_view.refresh_statement(view, "shop.v", logs)
    delete, insert = statement.writes
    assert "where ((`_mv_orders_order_id` between 1000 and 2000 and (`_mv_orders_order_id`) in (" in delete.sql
    assert "WHERE (`order_id` BETWEEN 1000 AND 2000 AND (`order_id`) IN (" in insert.sql
    # changes at both ends of the keys: two ranges, not one spanning the table between them
    logs = {"shop.orders": marked(ORDERS, key_ranges=((1, 50), (9000, 9100)))}
    delete = join_view.refresh_statement(view, "shop.v", logs).writes[0].sql
    assert "where (((`_mv_orders_order_id` between 1 and 50 or `_mv_orders_order_id` between 9000 and 9100) and (" in delete
    # nothing known (SQL mode): the IN alone
    logs = {"shop.orders": marked(ORDERS)}
    assert "between" not in join_view.refresh_statement(view, "shop.v", logs).sql.lower()


def test_few_marked_keys_are_literals_and_no_write_reads_the_log_for_them():
    view = analyze_view("select order_id, amount from shop.orders where amount > 0", MASTERS)
    logs = {"shop.orders": marked(ORDERS, key_values=((7,), (9,), (12,)), insert_key_values=((9,),))}
    delete, insert = join_view.refresh_statement(view, "shop.v", logs).writes
    # (a subquery that reads nothing keeps it a row-level delete, staged: statement.ROW_LEVEL)
    assert delete.sql == "delete from `shop`.`v`.`branch_mv_write`\nwhere (`_mv_orders_order_id` in (7, 9, 12))\nand exists (select 1 from values (1))"
    assert "WHERE `order_id` IN (9)" in insert.sql and "mlog_orders" not in insert.sql + delete.sql
    # no after image: nothing to insert from that log
    logs = {"shop.orders": marked(ORDERS, key_values=((7,),), insert_key_values=())}
    statement = join_view.refresh_statement(view, "shop.v", logs)
    assert "WHERE FALSE" in statement.writes[-1].sql


def test_key_literals_and_ranges_are_rendered_as_literals_of_their_type():
    spec = LogSpec("logs", "logs.mlog_x", "shop.x", "shop.x", ("day", "name", "n"), True)
    keys = ((datetime.date(2024, 1, 31), "a'b", -5), (datetime.date(2024, 2, 2), "c", None), (datetime.date(2024, 2, 2), "c", 7))
    log = MarkedLog(spec, 1, 0, 1, 1, 0, 1, key_values=keys)
    # the first column's values (what Iceberg prunes by) and the tuples, compared as structs named as
    # Spark names a literal tuple's fields (a tuple of BIGINT columns among INT literals failed to
    # resolve: Spark widens no struct to one named otherwise); a key with a NULL matches nothing
    assert log.key_condition(["`d`", "`s`", "`i`"]) == (
        "(`d` in (date '2024-01-31', date '2024-02-02') and named_struct('col1', `d`, 'col2', `s`, 'col3', `i`) in "
        "((date '2024-01-31', 'a\\'b', -5), (date '2024-02-02', 'c', 7)))"
    )
    ranged = MarkedLog(spec, 1, 0, 1, 1, 0, 1, key_ranges=((datetime.date(2024, 1, 31), datetime.date(2024, 2, 2)),))
    assert ranged.key_range(["d", "s", "i"]) == "`d` between date '2024-01-31' and date '2024-02-02'"
    assert MarkedLog(spec, 1, 0, 1, 1, 0, 1).key_range() is None


def test_an_outer_join_applies_its_inner_rows_changes_row_by_row():
    """Oracle's outer-join refresh: a changed order deletes and inserts its own view rows; its
    customer's slice is not rewritten, only the null-extended row is fixed; a changed customer
    still recomputes its whole slice."""
    view = analyze_view(OUTER, MASTERS)
    logs = {
        "shop.orders": marked(ORDERS, logged=("order_id", "customer_id", "product_id", "ref", "amount")),
        "shop.customers": marked(CUSTOMERS, 0, 0),
    }
    statement = outer_join_view.refresh_statement(view, "shop.v", logs)
    assert statement.steps_run == ("ROWS o", "DEL+INS rows")
    # the affected pairs (customer, order) from the images: no read of the view or the masters
    pairs = statement.cached[0].sql
    assert pairs.startswith("select `customer_id`, `_mv_o_order_id` from (\nselect `customer_id` as `customer_id`, `order_id` as `_mv_o_order_id` from (\nselect `customer_id`, `order_id`, `_mv_op` from `logs`.`mlog_orders`")
    assert scans_of(pairs, "shop.v") == 0 and scans_of(pairs, "shop.orders") == 0
    # one semi join on the anchor key: the changed orders' rows and the affected anchors' null rows
    rows_of = (
        "exists (select /*+ BROADCAST */ 1 from (\nselect * from `mv_write_keys`\n) as `_mv_k` where "
        "`_mv_k`.`customer_id` = `_mv_v`.`_mv_c_customer_id` and ((`_mv_v`.`_mv_o_order_id` is null) or "
        "(`_mv_v`.`_mv_o_order_id` = `_mv_k`.`_mv_o_order_id`)))"
    )
    delete, insert = (w.sql for w in statement.writes)
    assert delete == f"delete from `shop`.`v`.`branch_mv_write` as `_mv_v`\nwhere ({rows_of})\nand exists (select 1 from values (1))"
    # the new rows: the affected slices, read once, less the rows of unchanged orders
    assert scans_of(insert, "shop.orders") == 1 and insert.endswith(f") as `_mv_v`\nwhere {rows_of}")
    # a changed customer too: its slice is recomputed whole, flagged in the affected keys
    logs["shop.customers"] = marked(CUSTOMERS)
    statement = outer_join_view.refresh_statement(view, "shop.v", logs)
    assert statement.steps_run == ("ROWS o", "SLICES c", "DEL+INS rows")
    assert "select `customer_id`, null as `_mv_o_order_id`, true as `_mv_whole` from (\nselect distinct `customer_id` from (\nselect `customer_id`, `_mv_op` from `logs`.`mlog_customers`" in statement.cached[0].sql
    for write in statement.writes:
        assert "`_mv_c_customer_id` and (`_mv_k`.`_mv_whole` or (`_mv_v`.`_mv_o_order_id` is null) or" in write.sql
    # a log without the join column: the old pairs from the view, the new from the changed orders
    logs["shop.orders"] = marked(ORDERS, logged=("order_id", "amount"))
    pairs = outer_join_view.refresh_statement(view, "shop.v", logs).cached[0].sql
    assert scans_of(pairs, "shop.v") == 1 and scans_of(pairs, "shop.orders") == 1


def test_an_outer_join_recomputes_slices_for_inner_rows_not_joined_on_the_anchor_key():
    # joined on a column that is not the anchor's key: no row-by-row rule, the slices as before
    view = analyze_view(
        "select c.customer_id, c.name, o.order_id from shop.customers c left join shop.orders o on o.ref = c.name",
        MASTERS,
    )
    logs = {"shop.orders": marked(ORDERS), "shop.customers": marked(CUSTOMERS, 0, 0)}
    statement = outer_join_view.refresh_statement(view, "shop.v", logs)
    assert statement.steps_run == ("SLICES o", "DEL+INS slices")
    assert statement.writes[0].sql.endswith("where ((`_mv_c_customer_id`) in (select /*+ BROADCAST */ * from (\nselect `customer_id` from `mv_write_keys`\n)))\nand exists (select 1 from values (1))")


CHAIN = (
    "select c.name, o.order_id, l.line_no, l.qty from shop.customers c "
    "join shop.orders o on o.customer_id = c.customer_id join shop.lines l on l.order_id = o.order_id"
)


def _from_clause_of(sql: str, alias: str) -> str:
    """The source a rendered query reads for ``alias`` (sqlglot: the subquery or table so aliased)."""
    for node in sqlglot.parse_one(sql, read="spark").find_all(sqlglot.exp.Subquery, sqlglot.exp.Table):
        if node.alias == alias:
            return node.sql(dialect="spark")
    raise AssertionError(f"no source aliased {alias}")


def test_the_rows_joining_a_changed_dimension_are_found_without_shuffling_the_masters_beyond_it():
    """Semi-join reduction (refresh/views/semijoin.py): the INS step of changed customers restricts the
    orders to theirs, and the line items to those orders' (a broadcast IN) instead of joining all
    line items with the restricted orders (a sort-merge join that shuffles every line item)."""
    view = analyze_view(CHAIN, MASTERS)
    logs = {
        "shop.customers": marked(CUSTOMERS, key_ranges=((7, 9),)),
        "shop.orders": marked(ORDERS, 0, 0),
        "shop.lines": marked(LINES, 0, 0),
    }
    insert = join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    lines = _from_clause_of(insert, "l")
    assert lines.startswith("(SELECT `_mv_y`.* FROM `shop`.`lines` VERSION AS OF 123 AS `_mv_y` LEFT SEMI JOIN (SELECT /*+ BROADCAST */ * FROM (SELECT DISTINCT `order_id` FROM (SELECT `_mv_y`.* FROM `shop`.`orders`")
    assert lines.endswith("ON `_mv_y`.`order_id` = `_mv_r`.`order_id`) AS `l`")
    # the orders of the changed customers, within their range (a filter Iceberg prunes files by)
    assert "`_mv_y`.`customer_id` = `_mv_r`.`customer_id` WHERE `_mv_y`.`customer_id` BETWEEN 7 AND 9" in lines
    # the customers themselves are the changed ones: not reduced again
    assert "mlog_lines" not in insert


def test_a_dimension_is_reduced_by_its_facts_changes_only_where_their_range_prunes_its_files():
    view = analyze_view(CHAIN, MASTERS)
    logs = {
        "shop.customers": marked(CUSTOMERS, 0, 0),
        "shop.orders": marked(ORDERS, 0, 0),
        "shop.lines": marked(LINES, key_ranges=((100, 120),)),
    }
    insert = join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    # the orders of the changed lines, within the lines' order_id range (Iceberg skips the other
    # files); their order_id values read from the log's keys (order_id is part of a line's key),
    # not from the lines again: the INS query reads the lines once
    orders = _from_clause_of(insert, "o")
    assert orders.startswith("(SELECT `_mv_y`.* FROM `shop`.`orders` VERSION AS OF 123 AS `_mv_y` LEFT SEMI JOIN (SELECT /*+ BROADCAST */ * FROM (SELECT DISTINCT `order_id` FROM (SELECT DISTINCT `order_id`, `line_no` FROM (SELECT * FROM (SELECT `order_id`, `line_no`, `_mv_op` FROM `logs`.`mlog_lines`")
    assert insert.count("`shop`.`lines` VERSION") == 1
    assert orders.endswith("ON `_mv_y`.`order_id` = `_mv_r`.`order_id` WHERE `_mv_y`.`order_id` BETWEEN 100 AND 120) AS `o`")
    # no range known for the customers the orders hold: the customers are read as they are
    assert _from_clause_of(insert, "c") == "`shop`.`customers` VERSION AS OF 123 AS `c`"
    # no statistics at all: nothing reduced but the changed master (an extra IN would only add a job)
    logs["shop.lines"] = marked(LINES)
    insert = join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    assert _from_clause_of(insert, "o") == "`shop`.`orders` VERSION AS OF 123 AS `o`"


def test_an_aggregates_delta_term_reads_the_fact_of_a_changed_dimension_through_its_keys():
    view = analyze_view(
        "select c.name, count(*) as n, sum(l.qty) as qty from shop.lines l "
        "join shop.orders o on l.order_id = o.order_id join shop.customers c on o.customer_id = c.customer_id "
        "group by c.name",
        MASTERS,
    )
    logs = {
        "shop.customers": marked(CUSTOMERS),
        "shop.orders": marked(ORDERS, 0, 0),
        "shop.lines": marked(LINES, 0, 0),
    }
    delta = aggregate_view.refresh_statement(view, "shop.v", logs).cached[0].sql
    lines = _from_clause_of(delta, "l")
    assert lines.startswith("(SELECT `_mv_y`.* FROM `shop`.`lines` VERSION AS OF 123 AS `_mv_y` LEFT SEMI JOIN (SELECT /*+ BROADCAST */ * FROM (SELECT DISTINCT `order_id` FROM (SELECT `_mv_y`.* FROM `shop`.`orders` VERSION AS OF 123 AS `_mv_y` LEFT SEMI JOIN")
    assert _from_clause_of(delta, "o").startswith("(SELECT `_mv_y`.* FROM `shop`.`orders` VERSION AS OF 123 AS `_mv_y` LEFT SEMI JOIN (SELECT /*+ BROADCAST */ * FROM (SELECT DISTINCT `customer_id` FROM (SELECT `customer_id`, `name`, CASE `_mv_op`")
    # two masters: the one join is a broadcast of the change already, nothing is reduced
    two = analyze_view(
        "select c.name, sum(o.amount) as amount from shop.orders o join shop.customers c "
        "on o.customer_id = c.customer_id group by c.name",
        MASTERS,
    )
    assert "SEMI" not in aggregate_view.refresh_statement(two, "shop.v", logs).cached[0].sql


def test_literal_keys_move_to_the_neighbours_of_a_changed_master_as_literals():
    view = analyze_view(CHAIN, MASTERS)
    logs = {
        "shop.customers": marked(CUSTOMERS, 0, 0),
        "shop.orders": marked(ORDERS, 0, 0),
        "shop.lines": marked(LINES, key_values=((100, 1), (100, 2), (120, 1)), insert_key_values=((100, 1),)),
    }
    insert = join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    orders = _from_clause_of(insert, "o")
    assert orders.endswith("WHERE `_mv_y`.`order_id` IN (100, 120)) AS `o`")
    assert "mlog_lines" not in insert


def test_a_delete_by_keys_read_from_a_log_is_a_statement_of_its_own_that_spark_prunes():
    """Spark 3.5 pushes nothing of a condition with an IN of a subquery inside an OR, not even
    the conjuncts beside it: literal keys are deleted together, each log read for its keys alone,
    where those keys are clustered (scattered: one DELETE, see the next test)."""
    view = analyze_view(CHAIN, MASTERS)
    logs = {
        "shop.customers": marked(CUSTOMERS, key_values=((7,), (9,)), insert_key_values=((9,),)),
        "shop.orders": marked(ORDERS, key_ranges=((100, 200),)),
        "shop.lines": marked(LINES, key_values=((100, 1),), insert_key_values=()),
    }
    statement = join_view.refresh_statement(view, "shop.v", logs)
    assert [w.kind for w in statement.writes] == ["delete", "delete", "insert"] and statement.branch == "mv_write"
    literal, ranged = (w.sql for w in statement.writes[:2])
    assert literal.startswith("delete from `shop`.`v`.`branch_mv_write`\nwhere (`_mv_c_customer_id` in (7, 9)\n   or (`_mv_l_order_id` in (100)")
    assert "select" not in literal.split("\nand exists")[0].lower()  # no subquery: all of it pushed
    assert ranged.startswith("delete from `shop`.`v`.`branch_mv_write`\nwhere ((`_mv_o_order_id` between 100 and 200 and (`_mv_o_order_id`) in (")
    # every deleted row is one of them (a view keeping its own log reads these rows)
    assert statement.deleted.count("`_mv_c_customer_id` in (7, 9)") == 1 and "`_mv_o_order_id` between 100 and 200" in statement.deleted


def test_an_outer_joins_row_by_row_delete_reads_only_the_views_null_rows_and_the_marked_keys_ranges():
    """The view is written sorted by the orders' hidden key (layout.py): its null-extended rows
    come first, the changed orders' rows lie in their ranges; the DELETE says so in a conjunct
    Spark pushes to the view's scan, so the files between are not planned."""
    view = analyze_view(OUTER, MASTERS)
    logs = {
        "shop.orders": marked(ORDERS, logged=("order_id", "customer_id", "product_id", "ref", "amount"),
                              key_ranges=((1, 50), (9000, 9100))),
        "shop.customers": marked(CUSTOMERS, 0, 0),
    }
    delete = outer_join_view.refresh_statement(view, "shop.v", logs).writes[0].sql
    assert delete.startswith(
        "delete from `shop`.`v`.`branch_mv_write` as `_mv_v`\nwhere (((`_mv_v`.`_mv_o_order_id` is null) or "
        "(`_mv_v`.`_mv_o_order_id` between 1 and 50 or `_mv_v`.`_mv_o_order_id` between 9000 and 9100))\nand exists ("
    ), delete
    # literal keys: the list
    logs["shop.orders"] = dataclasses.replace(logs["shop.orders"], key_values=((7,), (8,)), key_ranges=())
    delete = outer_join_view.refresh_statement(view, "shop.v", logs).writes[0].sql
    assert "where (((`_mv_v`.`_mv_o_order_id` is null) or `_mv_v`.`_mv_o_order_id` in (7, 8))\nand exists (" in delete, delete
    # a changed customer's slice is recomputed whole: its orders are anywhere, nothing to push
    logs["shop.customers"] = marked(CUSTOMERS)
    delete = outer_join_view.refresh_statement(view, "shop.v", logs).writes[0].sql
    assert "is null) or (" not in delete.split("exists")[0], delete


LINE_COLUMNS = tuple(c for c, _ in LINES.columns)  # what a log of the lines carries (plan.logged_columns)


def test_the_ins_steps_of_a_fact_its_dimension_and_its_children_are_one_query_reading_each_master_once():
    """A changed customer's INS step reads the orders and the lines whole (its orders are
    anywhere): the INS steps of changed orders and lines are folded into that query instead of
    reading the lines again, each within its keys' ranges."""
    view = analyze_view(CHAIN, MASTERS)
    logs = {
        "shop.customers": marked(CUSTOMERS, key_values=((7,), (9,)), insert_key_values=((9,),)),
        "shop.orders": marked(ORDERS, key_ranges=((100, 200), (210, 300))),  # scattered: 192 of 201 keys
        "shop.lines": marked(LINES, key_ranges=((150, 300),), logged=LINE_COLUMNS),
    }
    insert = join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    assert "union all" not in insert.lower()
    assert scans_of(insert, "shop.lines") == 1 and scans_of(insert, "shop.customers") == 1
    assert scans_of(insert, "shop.orders") == 2  # the hub, and its keys the lines are reduced to
    orders = _from_clause_of(insert, "o")
    # the orders: changed, of a changed customer, or holding a changed line
    assert "WHERE (((`order_id` BETWEEN 100 AND 200 OR `order_id` BETWEEN 210 AND 300) AND (`order_id`) IN (SELECT /*+ BROADCAST */" in orders
    assert "OR (`customer_id` IN (9)) OR ((`order_id`) IN (SELECT /*+ BROADCAST */ * FROM (SELECT DISTINCT `order_id` FROM (SELECT * FROM (SELECT `order_id`, `_mv_op` FROM `logs`.`mlog_lines`" in orders
    assert _from_clause_of(insert, "l").startswith("(SELECT `_mv_y`.* FROM `shop`.`lines` VERSION AS OF 123 AS `_mv_y` LEFT SEMI JOIN (SELECT /*+ BROADCAST */ * FROM (SELECT DISTINCT `order_id` FROM (SELECT * FROM `shop`.`orders` VERSION AS OF 123 WHERE (((`order_id` BETWEEN 100 AND 200")
    # of the rows so read, those of an inserted key of a changed master (the rest are unchanged)
    where = insert[insert.rindex(") as `_mv_i`\nwhere "):]
    assert "`_mv_c_customer_id` in (9)" in where
    assert "((`_mv_o_order_id` between 100 and 200 or `_mv_o_order_id` between 210 and 300) and (`_mv_o_order_id`) in (" in where
    assert "(`_mv_l_order_id` between 150 and 300 and (`_mv_l_order_id`, `_mv_l_line_no`) in (" in where
    # clustered keys (two narrow ranges far apart, one range, literals): each INS step reads within
    # its own keys' ranges, the customers' alone reads the facts whole (measured: folding them was
    # slower there)
    for clustered in ({"key_ranges": ((1, 10), (10_000, 10_010))}, {"key_ranges": ((1, 10_000),)},
                      {"key_values": ((7,), (8,)), "insert_key_values": ((7,),)}):
        logs["shop.orders"] = marked(ORDERS, **clustered)
        insert = join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
        assert "_mv_i" not in insert and scans_of(insert, "shop.lines") >= 2, clustered
    # ... or the lines' keys scattered (dates too)
    logs["shop.lines"] = marked(LINES, key_ranges=((1, 10), (12, 20)), logged=LINE_COLUMNS)
    assert "_mv_i" in join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    logs["shop.lines"] = marked(LINES, key_ranges=((datetime.date(2026, 1, 1), datetime.date(2026, 1, 2)), (datetime.date(2026, 1, 4), datetime.date(2026, 1, 4))), logged=LINE_COLUMNS)
    assert "_mv_i" in join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    logs["shop.orders"] = marked(ORDERS, key_ranges=((100, 200), (210, 300)))
    logs["shop.lines"] = marked(LINES, key_ranges=((150, 300),), logged=LINE_COLUMNS)
    # no dimension changed: the orders' and the lines' INS steps keep their own ranges
    logs["shop.customers"] = marked(CUSTOMERS, 0, 0)
    insert = join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    assert "_mv_i" not in insert and scans_of(insert, "shop.lines") == 2
    # a second dimension of the orders (products) is folded too
    view = analyze_view(CHAIN + " join shop.products p on p.product_id = o.product_id", MASTERS)
    logs["shop.customers"] = marked(CUSTOMERS, key_values=((7,),), insert_key_values=((7,),))
    logs["shop.products"] = marked(PRODUCTS)
    insert = join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql
    assert "_mv_i" in insert and scans_of(insert, "shop.lines") == 1 and "union all" not in insert.lower()


def _netted(master: MasterTable, *columns: str, **fields) -> MarkedLog:
    """A log whose images the mark step netted by ``columns`` (it carries every master column)."""
    return marked(master, logged=tuple(c for c, _ in master.columns), netted_by=columns, **fields)


def test_an_ins_step_reads_its_masters_changed_rows_from_the_after_images_when_the_log_carries_them():
    """A master's own INS step reads its rows of the marked keys from the log's after images
    (netted as the mark step netted them, so each key keeps its last one), not from the master
    within the keys' ranges: with scattered keys those ranges are the whole table."""
    view = analyze_view("select l.order_id, l.line_no, l.qty from shop.lines l where l.qty > 2", MASTERS)
    log = _netted(LINES, "line_no", "order_id", "qty", key_ranges=((1, 10), (12, 20)))
    delete, insert = (w.sql for w in join_view.refresh_statement(view, "shop.v", {"shop.lines": log}).writes)
    assert scans_of(insert, "shop.lines") == 0 and scans_of(insert, "logs.mlog_lines") == 1
    assert (
        "FROM (SELECT `line_no`, `order_id`, `qty`, SUM(CASE WHEN `_mv_op` = 'I' THEN 1 ELSE -1 END) AS `_mv_net` "
        "FROM (SELECT `line_no`, `order_id`, `qty`, `_mv_op` FROM `logs`.`mlog_lines` VERSION AS OF 11 "
        "WHERE `_mv_op` IN ('I', 'D') AND `_last_updated_sequence_number` <= 9 AND `_last_updated_sequence_number` > 5) "
        "GROUP BY `line_no`, `order_id`, `qty` HAVING"
    ) in insert
    # its after images, a key with a NULL left out (no restriction by key matches it); a type that
    # may have been widened (bigint) cast to the master's
    assert "WHERE `_mv_op` = 'I' AND NOT `order_id` IS NULL AND NOT `line_no` IS NULL) AS `l` WHERE `l`.`qty` > 2" in insert
    assert "CAST(`order_id` AS BIGINT) AS `order_id`" in insert
    assert delete == join_view.refresh_statement(view, "shop.v", {"shop.lines": marked(LINES, key_ranges=((1, 10), (12, 20)))}).writes[0].sql
    # not netted (the log lacks a column the view reads): the master, restricted to the keys
    insert = join_view.refresh_statement(view, "shop.v", {"shop.lines": marked(LINES)}).writes[-1].sql
    assert scans_of(insert, "shop.lines") == 1 and "(`order_id`, `line_no`) IN (SELECT /*+ BROADCAST */" in insert
    # netted by columns that are not all the ones this view reads of it: the master
    partial = _netted(LINES, "line_no", "order_id")
    insert = join_view.refresh_statement(view, "shop.v", {"shop.lines": partial}).writes[-1].sql
    assert scans_of(insert, "shop.lines") == 1


def test_in_a_join_only_the_changed_masters_own_ins_step_reads_its_after_images():
    """The lines' own INS step reads their after images (joined with the orders they hold); the
    step of the changed orders still reads the lines (those of the changed orders), leaving out
    the keys the first step inserted from its images."""
    view = analyze_view(CHAIN, MASTERS)
    logs = {
        "shop.customers": marked(CUSTOMERS, 0, 0),
        "shop.orders": marked(ORDERS, key_ranges=((100, 200),)),
        "shop.lines": _netted(LINES, "line_no", "order_id", "qty", key_ranges=((150, 300),)),
    }
    made = join_view.refresh_statement(view, "shop.v", logs)
    insert = made.writes[-1].sql
    # the steps' rows in one INSERT, rebalanced: each step's rows come from its own scan tasks
    assert insert.endswith(f"\nselect /*+ REBALANCE */ * from (\n{made.inserted}\n) as `_mv_rebalanced`")
    lines_step, orders_step = made.inserted.split("\nunion all\n")
    assert scans_of(lines_step, "shop.lines") == 0 and "GROUP BY `line_no`, `order_id`, `qty` HAVING" in lines_step
    # the orders the changed lines hold: within the lines' ranges, among their keys
    assert "AS `_mv_r` ON `_mv_y`.`order_id` = `_mv_r`.`order_id` WHERE `_mv_y`.`order_id` BETWEEN 150 AND 300) AS `o`" in lines_step
    assert scans_of(orders_step, "shop.lines") == 1 and "GROUP BY" not in orders_step
    assert (
        "FROM `shop`.`lines` VERSION AS OF 123 AS `_mv_x` LEFT ANTI JOIN (SELECT /*+ BROADCAST */ * FROM (SELECT DISTINCT "
        "`order_id`, `line_no` FROM (SELECT * FROM (SELECT `order_id`, `line_no`, `_mv_op` FROM `logs`.`mlog_lines`"
    ) in orders_step
    assert "_mv_i" not in insert  # nothing scattered: not folded
    assert insert == join_view.refresh_statement(view, "shop.v", logs).writes[-1].sql  # deterministic


def test_a_union_branch_nets_the_images_by_every_column_the_union_reads_of_the_master():
    """The mark step nets by the columns the whole view reads: a branch reading fewer nets by
    the same ones, or a key whose update changed only a column the other branch reads would be
    deleted by the branch and not inserted again."""
    view = analyze_view(
        "select l.order_id, l.qty from shop.lines l union all select l2.order_id, 0 as qty from shop.lines l2 "
        "where l2.line_no = 1", MASTERS,
    )
    from dbt_incremental_mv.refresh.views import union_view
    from dbt_incremental_mv.refresh.phases.mark import netted_columns

    log = _netted(LINES, *netted_columns(view, marked(LINES).spec), key_ranges=((1, 10), (12, 20)))
    assert log.netted_by == ("line_no", "order_id", "qty")
    insert = union_view.refresh_statement(view, "shop.v", {"shop.lines": log}, {}).writes[-1].sql
    assert scans_of(insert, "shop.lines") == 0
    assert insert.count("GROUP BY `line_no`, `order_id`, `qty` HAVING") == 2


def test_keys_are_scattered_when_their_ranges_fill_their_span_sparsely():
    """Ranges covering most of their span prune little unless they are dense (about a changed
    value per value of their width: the newest keys, most of them changed), which is a stretch
    of the master's keys however it fills its own span."""
    sparse = marked(ORDERS, key_ranges=((100, 200), (210, 300)), key_range_values=5)
    assert join_view._scattered(sparse)
    assert join_view._scattered(marked(ORDERS, key_ranges=((100, 200), (210, 300))))  # not counted
    dense = dataclasses.replace(sparse, key_range_values=120)  # 120 values in 192: a stretch
    assert not join_view._scattered(dense)
    apart = dataclasses.replace(sparse, key_ranges=((1, 10), (1000, 1010)))  # a small share of the span
    assert not join_view._scattered(apart)
    assert not join_view._scattered(dataclasses.replace(sparse, key_ranges=((100, 300),)))  # one range
    days = ((datetime.date(2024, 1, 1), datetime.date(2024, 6, 30)), (datetime.date(2024, 7, 2), datetime.date(2024, 12, 31)))
    assert join_view._scattered(dataclasses.replace(sparse, key_ranges=days, key_range_values=20))
    assert not join_view._scattered(dataclasses.replace(sparse, key_ranges=days, key_range_values=300))
    # dense keys: a DELETE per master, each pruned to its ranges
    view = analyze_view(CHAIN, MASTERS)
    logs = {
        "shop.customers": marked(CUSTOMERS, key_values=((7,), (9,)), insert_key_values=((9,),)),
        "shop.orders": dense,
        "shop.lines": marked(LINES, key_ranges=((150, 300),)),
    }
    deletes = [w for w in join_view.refresh_statement(view, "shop.v", logs).writes if w.kind is WriteKind.DELETE]
    assert len(deletes) == 3


def test_the_del_steps_are_one_delete_behind_the_or_of_their_ranges_when_some_keys_are_scattered():
    """A master's scattered keys make its DELETE read the view whole: then every DEL step is one
    DELETE. Spark 3.5 pushes nothing of an OR holding a log's key set, so the OR of their ranges
    and literals (no subquery) goes in front of it, where Spark pushes it."""
    view = analyze_view(CHAIN, MASTERS)
    logs = {
        "shop.customers": marked(CUSTOMERS, key_values=((7,), (9,)), insert_key_values=((9,),)),
        "shop.orders": marked(ORDERS, key_ranges=((100, 200), (210, 300))),  # scattered
        "shop.lines": marked(LINES, key_ranges=((150, 300),)),
    }
    statement = join_view.refresh_statement(view, "shop.v", logs)
    deletes = [w.sql for w in statement.writes if w.kind is WriteKind.DELETE]
    assert len(deletes) == 1 and len(statement.writes) == 2
    assert deletes[0].startswith(
        "delete from `shop`.`v`.`branch_mv_write`\nwhere ((`_mv_c_customer_id` in (7, 9)\n"
        "   or (`_mv_o_order_id` between 100 and 200 or `_mv_o_order_id` between 210 and 300)\n"
        "   or `_mv_l_order_id` between 150 and 300)\nand (`_mv_c_customer_id` in (7, 9)\n"
        "   or (`_mv_o_order_id`) in ("
    ), deletes[0]
    # behind them each key set without its ranges again (evaluated twice, and a stage's generated
    # code past what the JVM compiles)
    assert deletes[0].count("between 100 and 200") == 1 and deletes[0].count("between 150 and 300") == 1
    assert statement.deleted is not None and statement.deleted.startswith("`_mv_c_customer_id` in (7, 9)\n   or ((`_mv_o_order_id` between")
    # a master whose keys have no range (nothing known of them): nothing to push, the OR alone
    logs["shop.lines"] = marked(LINES)
    delete = join_view.refresh_statement(view, "shop.v", logs).writes[0].sql
    assert delete.startswith("delete from `shop`.`v`.`branch_mv_write`\nwhere (`_mv_c_customer_id` in (7, 9)\n   or ((`_mv_o_order_id` between")
    # every deleted row is one of them, the literal keys' too (a view keeping its own log reads these rows)
    assert "select" not in deletes[0].split("\nand (")[0].lower()  # the pushed part holds no subquery
    # literal keys alone: their OR is pushed as it is
    logs = {m: marked(MASTERS[m], 0, 1, key_values=((7,),), insert_key_values=()) for m in ("shop.customers", "shop.orders")}
    logs["shop.lines"] = marked(LINES, 0, 0)
    delete = join_view.refresh_statement(view, "shop.v", logs).writes[0].sql
    assert delete == "delete from `shop`.`v`\nwhere (`_mv_c_customer_id` in (7)\n   or `_mv_o_order_id` in (7))\nand exists (select 1 from values (1))"


def test_the_rows_a_join_view_deletes_are_its_query_over_the_masters_previous_snapshots():
    """A view keeping its own log logs the rows its DELETEs delete: computed from the masters as
    the view reflected them (their previous snapshots), restricted to the marked keys, each master
    by its own keys or through the fact a dimension is linked to, in disjoint queries; not read
    back from the view (whose files hold every key of a fact, sorted by another)."""
    view = analyze_view(STAR, MASTERS)
    previous = {"shop.orders": 101, "shop.customers": 102, "shop.products": 103}
    logs = {
        m.name: marked(m, key_values=((7,), (8,)), insert_key_values=((8,),), previous_master_snapshot=previous[m.name])
        for m in (ORDERS, CUSTOMERS, PRODUCTS)
    }
    logs["shop.products"] = dataclasses.replace(logs["shop.products"], inserts=0, deletes=0, key_values=())
    statement = join_view.refresh_statement(view, "v.star", logs)
    rows = statement.deleted_rows
    assert rows is not None
    # every master read at the snapshot the view reflected, none at the marked one
    read = {
        f"{t.db}.{t.name}": t.args["version"].expression.name
        for t in sqlglot.parse_one(rows, read="spark").find_all(sqlglot.exp.Table)
    }
    assert read == {master: str(snapshot) for master, snapshot in previous.items()}, rows
    # the view's stored columns, by name
    assert [e.alias_or_name for e in sqlglot.parse_one(rows, read="spark").expressions] == list(view.stored_columns)
    # the orders of all their marked keys (a deleted key has no after image) and of the customers'
    assert "WHERE `order_id` IN (7, 8) OR `customer_id` IN (7, 8)" in rows, rows
    # the INSERT still takes the after images only
    assert "IN (8)" in statement.inserted.upper() and "IN (7, 8)" not in statement.inserted.upper()
    # keys read from the logs (not literals): disjoint queries, each later one without the earlier one's rows
    ranged = {
        name: dataclasses.replace(log, key_values=None, insert_key_values=None, key_ranges=((1, 9),))
        for name, log in logs.items()
    }
    rows = join_view.refresh_statement(view, "v.star", ranged).deleted_rows
    tree = sqlglot.parse_one(rows, read="spark")
    assert isinstance(tree, sqlglot.exp.Union), rows
    assert "LEFT ANTI JOIN" in rows.upper() and "version as of 123" not in rows.lower(), rows
    # a master whose previous snapshot is not known: read back from the view
    logs["shop.products"] = dataclasses.replace(logs["shop.products"], previous_master_snapshot=None)
    assert join_view.refresh_statement(view, "v.star", logs).deleted_rows is None


def test_a_dimensions_updates_are_patched_from_the_views_rows_before_the_refresh():
    view = analyze_view(STAR + " where c.name like 'a%'", MASTERS)
    quiet = {m: marked(MASTERS[m], inserts=0, deletes=0) for m in ("shop.orders", "shop.products")}
    # customer 7 updated (patched), 9 deleted
    customers = marked(CUSTOMERS, inserts=1, deletes=2, key_values=((7,), (9,)), insert_key_values=((7,),),
                       patch_key_values=((7,),), netted_by=("customer_id", "name"))
    logs = {**quiet, "shop.customers": customers, "shop.orders": marked(ORDERS, key_values=((1,),), insert_key_values=((1,),))}
    statement = join_view.refresh_statement(view, "shop.v", logs, view_snapshot=99)
    assert statement.steps_run == ("DEL o", "DEL c", "INS o", "PATCH c")
    delete, insert = statement.writes
    assert "`_mv_c_customer_id` in (7, 9)" in delete.sql  # the patched keys' rows are deleted and inserted again
    ins, patch = statement.inserted.split("\nunion all\n")
    assert "`customer_id` IN" not in ins  # no customer's orders read from the masters
    # the customer's rows as the refresh read the view, but those of changed orders (made by INS o)
    # and of the deleted customer, with the customer's columns from its new row (which passes the
    # view's filters, as its after image did)
    assert patch == (
        "select `_mv_v`.`order_id`, `_mv_v`.`amount`, case when `c`.`customer_id` is not null then `c`.`name` else "
        "`_mv_v`.`name` end as `name`, `_mv_v`.`category`, `_mv_v`.`_mv_o_order_id`, `_mv_v`.`_mv_c_customer_id`, "
        "`_mv_v`.`_mv_p_product_id`\n"
        "from (select * from (select * from (select * from `shop`.`v` version as of 99\nwhere `_mv_c_customer_id` in (7)) "
        "where not coalesce(`_mv_o_order_id` in (1), false)) where not coalesce(`_mv_c_customer_id` in (9), false)) as `_mv_v`\n"
        "left join (select * from `shop`.`customers` version as of 123 as `c`\n"
        "where `c`.`customer_id` in (7) and `c`.`name` LIKE 'a%') as `c`\n"
        "on `_mv_v`.`_mv_c_customer_id` = `c`.`customer_id`\n"
        "where (not coalesce(`_mv_v`.`_mv_c_customer_id` in (7), false) or `c`.`customer_id` is not null)"
    )
    sqlglot.parse_one(insert.sql, read="spark")
    # a new customer too (8): its orders are read from the masters, and the update's with them (no patch)
    logs["shop.customers"] = dataclasses.replace(customers, inserts=2, key_values=((7,), (8,), (9,)),
                                                 insert_key_values=((7,), (8,)))
    statement = join_view.refresh_statement(view, "shop.v", logs, view_snapshot=99)
    assert statement.steps_run == ("DEL o", "DEL c", "INS o", "INS c")
    assert "`customer_id` IN (7, 8)" in statement.writes[-1].sql
    # every update patched, nothing else changed: no read of the orders
    logs["shop.customers"] = dataclasses.replace(customers, deletes=1, key_values=((7,),))
    logs["shop.orders"] = marked(ORDERS, inserts=0, deletes=0)
    statement = join_view.refresh_statement(view, "shop.v", logs, view_snapshot=99)
    assert statement.steps_run == ("DEL c", "PATCH c") and scans_of(statement.writes[-1].sql, "shop.orders") == 0
    # not knowing the snapshot the refresh read (on commit): not patched
    assert join_view.refresh_statement(view, "shop.v", logs).steps_run == ("DEL c", "INS c")


def test_rows_holding_the_patched_keys_of_two_dimensions_are_made_once_with_both_new_rows():
    view = analyze_view(STAR, MASTERS)
    logs = {
        "shop.orders": marked(ORDERS, inserts=0, deletes=0),
        "shop.customers": marked(CUSTOMERS, key_values=((7,),), insert_key_values=((7,),), patch_key_values=((7,),)),
        # product 3 updated, 4 deleted
        "shop.products": marked(PRODUCTS, inserts=1, deletes=2, key_values=((3,), (4,)), insert_key_values=((3,),),
                                patch_key_values=((3,),)),
    }
    statement = join_view.refresh_statement(view, "shop.v", logs, view_snapshot=99)
    assert statement.steps_run == ("DEL c", "DEL p", "PATCH c", "PATCH p")
    [patch] = statement.writes[-1].sql.split("\nunion all\n")
    assert "where `_mv_c_customer_id` in (7) or `_mv_p_product_id` in (3))" in patch  # one read of the view
    assert "case when `p`.`product_id` is not null then `p`.`category` else `_mv_v`.`category` end" in patch
    assert "where not coalesce(`_mv_p_product_id` in (4), false)" in patch  # the deleted product's rows are gone
    assert scans_of(patch, "shop.orders") == 0
    sqlglot.parse_one(patch, read="spark")


def test_new_dimension_rows_in_no_view_row_need_no_ins_step():
    view = analyze_view(STAR, MASTERS)
    quiet = {m: marked(MASTERS[m], inserts=0, deletes=0) for m in ("shop.orders", "shop.products")}
    # customer 7 updated (patched), 8 new and held by no order (the mark step's unreferenced keys)
    customers = marked(CUSTOMERS, inserts=2, deletes=1, key_values=((7,), (8,)), insert_key_values=((7,), (8,)),
                       patch_key_values=((7,),), unreferenced_key_values=((8,),))
    statement = join_view.refresh_statement(view, "shop.v", {**quiet, "shop.customers": customers}, view_snapshot=99)
    assert statement.steps_run == ("DEL c", "PATCH c")
    assert scans_of(statement.writes[-1].sql, "shop.orders") == 0
    # only new customers without orders: nothing to write (the refresh records its position)
    new = marked(CUSTOMERS, inserts=1, deletes=0, key_values=((8,),), insert_key_values=((8,),), patch_key_values=(),
                 unreferenced_key_values=((8,),))
    assert join_view.refresh_statement(view, "shop.v", {**quiet, "shop.customers": new}, view_snapshot=99) is None
