"""Which rows of a master can take part in a view (analysis/relevance.py): its filters of that
master's rows alone, as a predicate over the change log's columns; no Spark."""

from __future__ import annotations

from dataclasses import replace

import sqlglot

from dbt_incremental_mv.analysis import analyze_view
from dbt_incremental_mv.analysis.relevance import relevant_rows
from tests.unit.analysis.conftest import MASTERS

O, C = "shop.orders", "shop.customers"


def relevant(sql: str, master: str) -> str | None:
    found = relevant_rows(analyze_view(sql, MASTERS), master)
    if found is not None:
        sqlglot.parse_one(f"select * from t where {found}", read="spark")  # a valid predicate
    return found


def test_an_inner_join_keeps_each_masters_own_conjuncts_over_its_unqualified_columns():
    sql = (
        "select c.name, o.amount from shop.customers c join shop.orders o on o.customer_id = c.customer_id "
        "and o.status <> 'x' where c.segment = 'B' and o.amount > 3 and (c.name like 'a%' or c.name is null) "
        "and o.amount < length(c.name)"
    )
    assert relevant(sql, C) == "`segment` = 'B' AND (`name` LIKE 'a%' OR `name` IS NULL)"
    # the join condition and the conjunct reading both masters filter neither alone
    assert relevant(sql, O) == "`status` <> 'x' AND `amount` > 3"


def test_a_null_extended_master_is_filtered_by_its_outer_join_condition_alone():
    sql = (
        "select c.name, o.amount from shop.customers c left join shop.orders o "
        "on o.customer_id = c.customer_id and o.status = 'open' where c.country = 'FR'"
    )
    assert relevant(sql, O) == "`status` = 'open'"  # a row failing it matches nothing: as if absent
    assert relevant(sql, C) == "`country` = 'FR'"
    # a WHERE conjunct of a null-extended master is not a filter of its rows (here NULL passes it)
    kept = (
        "select c.name, o.amount from shop.customers c left join shop.orders o on o.customer_id = c.customer_id "
        "where o.status is null or o.status = 'open'"
    )
    assert relevant(kept, O) is None


def test_a_master_read_twice_keeps_the_rows_either_occurrence_keeps():
    union = "select order_id from shop.orders where status = 'a' union all select order_id from shop.orders where status = 'b'"
    assert relevant(union, O) == "(`status` = 'a') OR (`status` = 'b')"
    # one occurrence unfiltered: every row counts
    assert relevant("select order_id from shop.orders where status = 'a' union all select order_id from shop.orders", O) is None
    self_join = (
        "select a.order_id, b.order_id as other from shop.orders a join shop.orders b on a.customer_id = b.customer_id "
        "where a.status = 'open' and b.amount > 10"
    )
    assert relevant(self_join, O) == "(`status` = 'open') OR (`amount` > 10)"


def test_aggregates_keep_their_where_and_nothing_else_drops_rows():
    assert relevant("select status, count(*) as n from shop.orders where amount > 0 group by status having count(*) > 1", O) == "`amount` > 0"
    assert relevant("select status, count(*) as n from shop.orders group by status", O) is None
    assert relevant("select o.order_id, c.name from shop.orders o join shop.customers c on c.customer_id = o.customer_id", C) is None
    # a ranked view: its WHERE filters the rows before the window, not its filters of the ranked rows
    ranked = (
        "select order_id, customer_id from (select order_id, customer_id, amount, row_number() over "
        "(partition by customer_id order by order_date desc) as rn from shop.orders where status = 'open') "
        "where rn = 1 and amount > 5"
    )
    assert relevant(ranked, O) == "`status` = 'open'"

def test_a_stack_of_queries_keeps_the_rows_the_select_reading_each_table_item_keeps():
    # the latest row per key of the orders not cancelled, then aggregated: the CTE's WHERE, before its window
    latest = (
        "with latest as (select customer_id, order_id, amount, row_number() over (partition by customer_id "
        "order by order_date desc) as rn from shop.orders where status <> 'cancelled') "
        "select customer_id, sum(amount) as total from latest where rn = 1 group by customer_id"
    )
    assert relevant(latest, O) == "`status` <> 'cancelled'"
    # a table read in an EXISTS: its own conjuncts there (not the correlation)
    exists = (
        "select o.customer_id, o.order_id from shop.orders o where exists (select 1 from shop.customers c "
        "where c.customer_id = o.customer_id and c.segment = 'retail') and o.status = 'open'"
    )
    assert relevant(exists, O) == "`status` = 'open'" and relevant(exists, C) == "`segment` = 'retail'"
    # the orders read twice, once unfiltered (a subquery's IN filters no row of theirs alone): every row counts
    twice = (
        "select o.order_id from shop.orders o join shop.customers c on c.customer_id = o.customer_id "
        "where o.status in (select status from shop.orders where amount > 1) and c.segment = 'x'"
    )
    assert relevant(twice, O) is None and relevant(twice, C) == "`segment` = 'x'"
    # a null-extended table's WHERE conjunct filters none of its rows
    outer = (
        "with s as (select c.customer_id, o.order_id, row_number() over (partition by c.customer_id "
        "order by o.order_id desc) as rn from shop.customers c left join shop.orders o "
        "on o.customer_id = c.customer_id where o.status is null or o.status = 'open') "
        "select customer_id, order_id from s where rn = 1"
    )
    assert relevant(outer, O) is None
    # a master the view does not read
    assert relevant("select order_id from shop.orders where status = 'a'", C) is None


def test_only_conjuncts_no_value_can_make_fail_are_filters():
    # an image may hold a row's passing state the query never sees: under ANSI a cast, an
    # overflow or a string compared as a number could fail the refresh, so such conjuncts drop nothing
    for unsafe in (
        "cast(o.status as int) <> 0",  # a cast of a column
        "o.amount * 100 > 5",  # arithmetic
        "o.status = 1",  # a string compared as a number
        "upper(o.status) = 'OPEN'",  # a function
        "o.order_date > o.status",  # a date against a string
    ):
        sql = f"select o.order_id from shop.orders o where {unsafe}"
        assert relevant(sql, O) is None, unsafe
    safe = (
        "select o.order_id from shop.orders o where o.status in ('open', 'shipped') and o.amount between -1 and 2.5 "
        "and o.order_date >= date '2024-01-01' and not (o.status like 'x%') and o.customer_id is not null"
    )
    assert relevant(safe, O) == (
        "`status` IN ('open', 'shipped') AND `amount` BETWEEN -1 AND 2.5 AND `order_date` >= CAST('2024-01-01' AS DATE) "
        "AND NOT (`status` LIKE 'x%') AND NOT `customer_id` IS NULL"
    )
    flags = dict(MASTERS)
    flags[O] = replace(MASTERS[O], columns=(*MASTERS[O].columns, ("is_deleted", "boolean")))
    flagged = analyze_view("select o.order_id from shop.orders o where not o.is_deleted and o.is_deleted = false", flags)
    assert relevant_rows(flagged, O) == "NOT `is_deleted` AND `is_deleted` = FALSE"
    # the safe conjuncts are kept beside an unsafe one
    assert relevant("select o.order_id from shop.orders o where o.amount * 2 > 1 and o.status = 'open'", O) == (
        "`status` = 'open'"
    )
