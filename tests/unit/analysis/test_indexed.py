"""Indexed join states: a join view as its facts' join sorted by a dimension's key and the
dimension joined to it (analysis/indexed.py)."""

from __future__ import annotations

import pytest

from dbt_incremental_mv.analysis import ViewClass, analyze_view
from dbt_incremental_mv.analysis.indexed import indexed_split
from dbt_incremental_mv.layout import indexed_layout
from tests.unit.analysis.conftest import MASTERS

# the lines of the orders of customers of one segment: customers is the dimension, the state the
# orders' lines sorted by the orders' customer_id
LINES = """
select c.name, o.order_id, o.order_date, l.line_no, l.quantity
from shop.customers c
join shop.orders o on c.customer_id = o.customer_id
join shop.order_lines l on l.order_id = o.order_id and l.quantity > 0
where c.segment = 'retail' and o.status <> 'cancelled'
"""


def split(sql, rows=None):
    return indexed_split(sql, analyze_view(sql, MASTERS), MASTERS, rows)


def test_the_state_is_the_facts_join_sorted_by_the_dimensions_key():
    found = split(LINES)
    assert found is not None and found.view_class is ViewClass.JOIN
    (state,) = found.states
    assert state.name == "by_customer_id" and state.view_class is ViewClass.JOIN
    assert state.sql == (
        "SELECT o.order_id AS o__order_id, o.order_date AS o__order_date, l.line_no AS l__line_no, "
        "l.quantity AS l__quantity, o.customer_id AS o__customer_id, l.order_id AS l__order_id "
        "FROM shop.orders AS o JOIN shop.order_lines AS l ON l.order_id = o.order_id AND l.quantity > 0 "
        "WHERE o.status <> 'cancelled'"
    )
    assert state.key == ("o__order_id", "l__order_id", "l__line_no") and state.log_key == state.key
    assert state.sort_by == ("o__customer_id",)
    # the dimension joined to the state; its own filter stays on it
    assert found.sql == (
        "SELECT c.name AS name, mv_indexed.o__order_id AS order_id, mv_indexed.o__order_date AS order_date, "
        "mv_indexed.l__line_no AS line_no, mv_indexed.l__quantity AS quantity FROM shop.customers AS c "
        "JOIN mv_state.by_customer_id AS mv_indexed ON c.customer_id = mv_indexed.o__customer_id "
        "WHERE c.segment = 'retail'"
    )
    assert "indexed by customers's key: the join of orders, order_lines sorted by orders.customer_id" in (
        found.described()
    )


def test_the_dimension_with_the_fewest_rows_is_indexed():
    sql = (
        "select p.category, c.name, o.order_id, l.quantity from shop.order_lines l "
        "join shop.orders o on l.order_id = o.order_id join shop.customers c on o.customer_id = c.customer_id "
        "join shop.products p on p.product_id = l.product_id"
    )
    assert split(sql, {"shop.customers": 1000, "shop.products": 50}).states[0].name == "by_product_id"
    assert split(sql, {"shop.customers": 10, "shop.products": 50}).states[0].name == "by_customer_id"
    # unknown sizes: the first in join order whose removal leaves the others joined (not orders: the
    # lines would no longer be joined to the customers)
    assert split(sql).states[0].name == "by_customer_id"


def test_the_state_of_a_two_table_join_is_the_fact_alone():
    found = split("select o.order_id, o.amount, c.name from shop.orders o join shop.customers c on o.customer_id = c.customer_id")
    assert found.states[0].sql == (
        "SELECT o.order_id AS o__order_id, o.amount AS o__amount, o.customer_id AS o__customer_id FROM shop.orders AS o"
    )
    assert found.sql.endswith("FROM shop.customers AS c JOIN mv_state.by_customer_id AS mv_indexed ON mv_indexed.o__customer_id = c.customer_id")


def test_the_layout_sorts_by_the_looked_up_column_and_blooms_every_key():
    found = split(LINES)
    state = analyze_view(found.states[0].sql, MASTERS)
    layout = indexed_layout(state, found.states[0].sort_by)
    assert layout.sort_by == ("o__customer_id",)
    assert set(layout.bloom) == {h.name for h in state.hidden_columns if h.occurrence is not None}
    assert layout.sorted_query("select 1").endswith("order by `o__customer_id`")
    # row groups small enough for an IN of scattered keys to skip most of them (the view's are larger)
    assert layout.properties()["write.parquet.row-group-size-bytes"] == str(1024 * 1024)
    # read in Iceberg's fixed splits, not one task per row group (a DELETE writes a delete file per task)
    assert layout.properties()["read.split.adaptive-size.enabled"] == "false"
    from dbt_incremental_mv.layout import ViewLayout

    assert "read.split.adaptive-size.enabled" not in ViewLayout(("k",)).properties()  # a view users read keeps them


@pytest.mark.parametrize(
    "sql",
    [
        # an outer join (the outer-join class)
        "select o.order_id, c.name from shop.orders o left join shop.customers c on o.customer_id = c.customer_id",
        # the only dimension joins the others to one another: without it they are not joined
        "select c.name, o.order_id, l.line_no from shop.customers c join shop.orders o on o.customer_id = c.customer_id "
        "join shop.order_lines l on l.product_id = c.customer_id",
        # no key of one table equated by another's columns
        "select o.order_id, c.name from shop.orders o join shop.customers c on o.status = c.segment",
        # an aggregate (not a join view)
        "select c.name, count(*) as n from shop.orders o join shop.customers c on o.customer_id = c.customer_id group by c.name",
        # a CTE
        "with o as (select * from shop.orders) select o.order_id, c.name from o join shop.customers c on o.customer_id = c.customer_id",
    ],
)
def test_no_indexed_state(sql):
    try:
        view = analyze_view(sql, MASTERS)
    except Exception:  # noqa: BLE001 - refused as a view: no split either
        return
    assert indexed_split(sql, view, MASTERS) is None


def test_the_view_over_the_state_is_sorted_by_the_dimensions_key():
    # its refreshes look up the dimension's changed keys (a DELETE by them); the state's by a bloom filter
    from dbt_incremental_mv.analysis.model import MasterTable
    from dbt_incremental_mv.analysis.states import state_columns
    from dbt_incremental_mv.layout import view_layout

    found = split(LINES)
    assert found.indexed_alias == "c"
    state = found.states[0]
    table = MasterTable("mv_state.by_customer_id", state_columns(analyze_view(state.sql, MASTERS)), state.key)
    top = analyze_view(found.sql, {**MASTERS, table.name: table})
    rows = {"shop.customers": 10, "mv_state.by_customer_id": 1000}
    assert view_layout(top, rows).sort_by[0].startswith("_mv_mv_indexed_")
    layout = view_layout(top, rows, found.indexed_alias)
    assert layout.sort_by == ("_mv_c_customer_id",) and all(b.startswith("_mv_mv_indexed_") for b in layout.bloom)
