"""Which rows of a master can take part in a view (analysis/relevance.py): its filters of that
master's rows alone, as a predicate over the change log's columns; no Spark."""

from __future__ import annotations

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
    # a stack of queries recomputed by partition drops nothing
    stacked = (
        "select o.order_id from shop.orders o join shop.customers c on c.customer_id = o.customer_id "
        "where o.status in (select status from shop.orders where amount > 1) and c.segment = 'x'"
    )
    assert relevant(stacked, O) is None and relevant(stacked, C) is None
    # a master the view does not read
    assert relevant("select order_id from shop.orders where status = 'a'", C) is None
