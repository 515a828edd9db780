"""Intermediate states: a refused query split into views the analysis accepts (analysis/states.py)."""

from __future__ import annotations

import pytest
import sqlglot

from dbt_incremental_mv.analysis import UnsupportedViewError, ViewClass, analyze_view
from dbt_incremental_mv.analysis.states import STATE_SCHEMA, _key, _Splitter, split_into_states
from tests.unit.analysis.conftest import MASTERS

# the items per customer (jaffle_shop's customers read from the other side): an aggregate over a
# LEFT JOIN whose group key comes from its null-supplying side (the lines of no order make a group
# of NULL key), first in FROM
CUSTOMERS = """
with customer_orders as (
  select customer_id, min(order_date) as first_order, count(order_id) as orders from shop.orders group by customer_id
), customer_items as (
  select o.customer_id, sum(l.quantity) as items
  from shop.order_lines l left join shop.orders o on l.order_id = o.order_id
  group by o.customer_id
)
select ci.customer_id, c.name, co.first_order, co.orders, ci.items
from customer_items ci
left join shop.customers c on c.customer_id = ci.customer_id
left join customer_orders co on ci.customer_id = co.customer_id
"""

# the latest order of each customer, aggregated by another column
LATEST_BY_AMOUNT = """
with ranked as (
  select o.customer_id, o.order_id, o.amount,
         row_number() over (partition by o.customer_id order by o.order_date desc, o.order_id desc) as rn
  from shop.orders o
), latest as (
  select customer_id, order_id, amount from ranked where rn = 1
)
select l.amount, count(*) as customers
from latest l join shop.customers c on l.customer_id = c.customer_id
group by l.amount
"""


def _refused(sql: str) -> None:
    with pytest.raises(UnsupportedViewError):
        analyze_view(sql, MASTERS)


def test_an_aggregating_cte_the_query_cannot_maintain_becomes_a_state_keyed_by_its_group_keys():
    _refused(CUSTOMERS)
    split = split_into_states(CUSTOMERS, MASTERS)
    assert split is not None
    (state,) = split.states  # the one it needs (customer_orders stays in the query)
    assert (state.name, state.key, state.view_class) == ("customer_items", ("customer_id",), ViewClass.AGGREGATE)
    assert split.view_class is ViewClass.PER_PARTITION
    assert analyze_view(state.sql, MASTERS).view_class is ViewClass.AGGREGATE  # the state alone is a view
    assert split.advice() == (
        "It can be fast refreshed in 2 steps: make the CTE customer_items (an aggregate view, key customer_id) "
        "a fast_refresh model of its own with mv_log=true, declare its change log as a source (meta.mv_log "
        "with that key) and read it here with ref(): the query over it is then a per partition view"
    )


def test_a_latest_row_per_key_becomes_a_state_keyed_by_its_partition_with_the_cte_it_reads_inlined():
    _refused(LATEST_BY_AMOUNT)
    split = split_into_states(LATEST_BY_AMOUNT, MASTERS)
    assert split is not None
    (state,) = split.states
    assert (state.name, state.key, state.view_class) == ("latest", ("customer_id",), ViewClass.RANKED)
    assert "ranked" in state.sql.lower() and "row_number" in state.sql.lower()
    assert split.view_class is ViewClass.AGGREGATE


def test_every_part_of_a_split_is_checked_by_the_analysis():
    # the query over the states still reads a non-deterministic function: no split helps
    sql = LATEST_BY_AMOUNT.replace("count(*) as customers", "count(*) as customers, max(rand()) as r")
    _refused(sql)
    assert split_into_states(sql, MASTERS) is None


def test_a_window_over_one_table_is_a_state_keyed_by_that_table_s_key():
    # without the customer the latest row has no key; the rows it ranks do (one per order)
    sql = LATEST_BY_AMOUNT.replace("select customer_id, order_id, amount from ranked", "select amount from ranked")
    sql = sql.replace("on l.customer_id = c.customer_id", "on l.amount = c.customer_id")
    _refused(sql)
    split = split_into_states(sql, MASTERS)
    assert split is not None
    assert [(s.name, s.key, s.view_class) for s in split.states] == [("ranked", ("order_id",), ViewClass.WINDOWED)]


def test_a_state_needs_a_key_its_shape_gives():
    # ranked without the order's key: neither it nor the latest row per customer has a key
    sql = LATEST_BY_AMOUNT.replace("select o.customer_id, o.order_id, o.amount,", "select o.amount,")
    sql = sql.replace("partition by o.customer_id", "partition by o.status")
    sql = sql.replace("select customer_id, order_id, amount from ranked", "select amount from ranked")
    sql = sql.replace("on l.customer_id = c.customer_id", "on l.amount = c.customer_id")
    _refused(sql)
    assert split_into_states(sql, MASTERS) is None


def test_no_ctes_no_split():
    sql = "select o.order_id, rand() as r from shop.orders o"
    _refused(sql)
    assert split_into_states(sql, MASTERS) is None


def test_the_query_over_the_states_reads_them_as_tables():
    tree = sqlglot.parse_one(CUSTOMERS, read="spark")
    ctes = {c.alias_or_name: c.this for c in tree.args["with_"].expressions}
    query = _Splitter(tree, ctes, list(ctes), MASTERS, None).query(tree, {"customer_items"})
    assert f"{STATE_SCHEMA}.customer_items AS ci" in query
    assert "customer_orders AS (" in query and "customer_items AS (" not in query


@pytest.mark.parametrize(
    ("sql", "key"),
    [
        # the customer joined on its whole key: one per order, the order's key alone
        ("select o.order_id, o.amount, c.country from shop.orders o join shop.customers c "
         "on c.customer_id = o.customer_id", ("order_id",)),
        # joined on another column: a row per order and customer
        ("select o.order_id, c.customer_id, c.country from shop.orders o join shop.customers c "
         "on c.country = o.status", ("order_id", "customer_id")),
        # ... which must both be selected
        ("select o.order_id, c.country from shop.orders o join shop.customers c on c.country = o.status", ()),
        # null-extended rows: no key from the shape
        ("select o.order_id, c.customer_id from shop.orders o left join shop.customers c "
         "on c.customer_id = o.customer_id", ()),
    ],
)
def test_a_join_state_is_keyed_by_the_keys_of_the_tables_its_rows_combine(sql, key):
    assert _key(analyze_view(sql, MASTERS)) == key
