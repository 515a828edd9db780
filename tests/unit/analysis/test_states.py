"""Intermediate states: a refused query split into views the analysis accepts (analysis/states.py)."""

from __future__ import annotations

import pytest
import sqlglot

from dbt_incremental_mv.analysis import UnsupportedViewError, ViewClass, analyze_view
from dbt_incremental_mv.analysis.states import STATE_SCHEMA, _Splitter, key_of, split_into_states
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
    assert key_of(analyze_view(sql, MASTERS)) == key


# the latest order of each customer with the customer's name (a ranking of a join: recomputed per
# partition, no table key), counted by amount: the ranked CTE is a state keyed by its PARTITION BY
LATEST_NAMED_BY_AMOUNT = """
with latest as (
  select customer_id, name, amount from (
    select o.customer_id, c.name, o.amount,
           row_number() over (partition by o.customer_id order by o.order_date desc, o.order_id desc) as _w
    from shop.orders o left join shop.customers c on o.customer_id = c.customer_id
  ) _t
  where _w = 1
)
select l.amount, count(*) as customers
from latest l join shop.customers c on l.name = c.name
group by l.amount
"""


@pytest.mark.parametrize(
    "latest",
    [
        pytest.param(None, id="numbered in a subquery, kept outside (Spark 3)"),
        pytest.param(
            "select o.customer_id as buyer, c.name, o.amount from shop.orders o left join shop.customers c "
            "on o.customer_id = c.customer_id "
            "qualify row_number() over (partition by o.customer_id order by o.order_date desc, o.order_id desc) = 1",
            id="QUALIFY",
        ),
        pytest.param(
            "select customer_id, name, amount from numbered where 1 = numbered.rn",
            id="numbered in a CTE",
        ),
    ],
)
def test_a_latest_row_per_key_of_a_join_is_a_state_keyed_by_its_partition(latest):
    sql = LATEST_NAMED_BY_AMOUNT
    key = ("customer_id",)
    if latest is not None and "qualify" in latest:
        start, end = sql.index("select customer_id, name, amount from ("), sql.index("where _w = 1") + len("where _w = 1")
        sql = sql[:start] + latest + sql[end:]
        key = ("buyer",)
    elif latest is not None:
        numbered = (
            "numbered as (select o.customer_id, c.name, o.amount, row_number() over (partition by o.customer_id "
            "order by o.order_date desc, o.order_id desc) as rn from shop.orders o left join shop.customers c "
            "on o.customer_id = c.customer_id), "
        )
        start, end = sql.index("select customer_id, name, amount from ("), sql.index("where _w = 1") + len("where _w = 1")
        sql = sql.replace("with latest as (", "with " + numbered + "latest as (")
        start, end = sql.index("select customer_id, name, amount from ("), sql.index("where _w = 1") + len("where _w = 1")
        sql = sql[:start] + latest + sql[end:]
    _refused(sql)
    split = split_into_states(sql, MASTERS)
    assert split is not None
    (state,) = split.states
    assert (state.name, state.key, state.view_class) == ("latest", key, ViewClass.PER_PARTITION)
    assert state.log_key == ("mv_state_key",)  # a customer_id may be NULL: the log is keyed by its text
    assert split.view_class is ViewClass.AGGREGATE


@pytest.mark.parametrize(
    "kept",
    [
        pytest.param("_w = 2", id="the second row"),
        pytest.param("_w <= 2", id="two rows"),
        pytest.param("_w = 1 or o_amount > 0", id="or"),
    ],
)
def test_rows_other_than_the_first_per_key_give_no_key(kept):
    sql = LATEST_NAMED_BY_AMOUNT.replace("where _w = 1", f"where {kept}").replace("o.amount,\n", "o.amount, o.amount as o_amount,\n")
    sql = sql.replace("select customer_id, name, amount from (", "select customer_id, name, amount, o_amount from (")
    _refused(sql)
    assert split_into_states(sql, MASTERS) is None


def test_a_rank_keeps_ties_so_gives_no_key():
    sql = LATEST_NAMED_BY_AMOUNT.replace("row_number()", "rank()")
    _refused(sql)
    assert split_into_states(sql, MASTERS) is None


# the orders of each customer and day, grouped by position and by an expression it selects, over a
# window (so recomputed per customer: no group keys of an aggregate view to key it by)
BY_DAY = """
with per_day as (
  select w.customer_id, cast(w.order_date as date) as day, count(*) as orders, sum(w.previous) as previous
  from (
    select o.customer_id, o.order_date, o.status,
           lag(o.amount) over (partition by o.customer_id order by o.order_id) as previous
    from shop.orders o
  ) w
  group by {group}
)
select p.day, sum(p.orders) as orders, count(c.customer_id) as customers
from per_day p join shop.customers c on p.customer_id = c.customer_id
group by p.day
"""


@pytest.mark.parametrize("group", ["1, 2", "w.customer_id, cast(w.order_date as date)", "customer_id, 2"])
def test_a_per_partition_aggregate_is_keyed_by_the_group_keys_it_selects_by_position_or_expression(group):
    sql = BY_DAY.format(group=group)
    _refused(sql)
    split = split_into_states(sql, MASTERS)
    assert split is not None
    assert [(s.name, s.key, s.view_class) for s in split.states] == [
        ("per_day", ("customer_id", "day"), ViewClass.PER_PARTITION)
    ]


def test_a_group_key_it_does_not_select_gives_no_key():
    assert split_into_states(BY_DAY.format(group="1, 2, w.status"), MASTERS) is None


def test_a_distinct_of_expressions_is_keyed_by_every_column():
    sql = BY_DAY.replace(
        "select w.customer_id, cast(w.order_date as date) as day, count(*) as orders, sum(w.previous) as previous",
        "select distinct w.customer_id, cast(w.order_date as date) as day, w.previous + 1 as orders",
    ).replace("group by {group}\n", "")
    _refused(sql)
    split = split_into_states(sql, MASTERS)
    assert split is not None
    assert [(s.name, s.key) for s in split.states] == [("per_day", ("customer_id", "day", "orders"))]


# money moved per country: paid orders, a credit per customer and each customer's total, in one
# UNION ALL (dbt_utils.union_relations writes each branch in parentheses) joined to the customers
MOVES = """
with moves as (
  ({orders}) union all
  (select c.customer_id, c.customer_id + 0, 1 from shop.customers c) union all
  (select o.customer_id, max(o.customer_id), sum(o.amount) from shop.orders o group by o.customer_id)
)
select c.country, sum(m.amount) as amount, count(*) as n
from moves m join shop.customers c on m.customer = c.customer_id
group by c.country
"""
PAID = "select o.order_id as id, o.customer_id as customer, o.amount from shop.orders o where o.status = 'paid'"


def test_a_union_all_is_a_state_keyed_by_each_branch_s_number_and_own_key():
    sql = MOVES.format(orders=PAID)
    _refused(sql)
    split = split_into_states(sql, MASTERS)
    assert split is not None
    (state,) = split.states
    assert (state.name, state.key, state.log_key) == ("moves", (), ("mv_state_key",))
    assert "each branch keyed by its number and its own key" in split.described()
    keys = sorted(
        node.sql(dialect="spark")
        for node in sqlglot.parse_one(state.sql, read="spark").find_all(sqlglot.exp.Alias)
        if node.alias == "mv_state_key"
    )
    assert keys == [  # (every branch's own table key or group key, after its number)
        "TO_JSON(ARRAY(CAST(1 AS STRING), CAST(o.order_id AS STRING))) AS mv_state_key",
        "TO_JSON(ARRAY(CAST(2 AS STRING), CAST(c.customer_id AS STRING))) AS mv_state_key",
        "TO_JSON(ARRAY(CAST(3 AS STRING), CAST(o.customer_id AS STRING))) AS mv_state_key",
    ]
    assert split.view_class is ViewClass.AGGREGATE


def test_a_union_all_with_a_branch_without_a_key_gives_no_state():
    # the lines of orders without their line number: a branch whose rows have no key
    sql = MOVES.format(
        orders="select l.order_id as id, o.customer_id as customer, l.quantity as amount "
        "from shop.order_lines l join shop.orders o on l.order_id = o.order_id"
    )
    _refused(sql)
    assert split_into_states(sql, MASTERS) is None


@pytest.mark.parametrize("function", ["rank", "dense_rank"])
def test_a_rank_of_one_table_keeps_ties_so_its_state_is_keyed_by_the_table_s_key(function):
    # two orders of a customer on its latest date both rank 1: the customer is no key of the rows
    sql = LATEST_BY_AMOUNT.replace("row_number()", f"{function}()").replace(", o.order_id desc", "")
    _refused(sql)
    split = split_into_states(sql, MASTERS)
    assert split is not None
    assert [(s.name, s.key, s.view_class) for s in split.states] == [("latest", ("order_id",), ViewClass.RANKED)]


def test_derived_tables_are_cut_when_the_ctes_give_no_split():
    # LATEST_BY_AMOUNT written with subqueries in FROM (no CTE): the latest row per customer is the state
    sql = """
    select l.amount, count(*) as customers
    from (
      select customer_id, order_id, amount from (
        select o.customer_id, o.order_id, o.amount,
               row_number() over (partition by o.customer_id order by o.order_date desc, o.order_id desc) as rn
        from shop.orders o
      ) ranked where rn = 1
    ) l join shop.customers c on l.customer_id = c.customer_id
    group by l.amount
    """
    _refused(sql)
    split = split_into_states(sql, MASTERS)
    assert split is not None
    assert [(s.name, s.key, s.view_class) for s in split.states] == [("l", ("customer_id",), ViewClass.RANKED)]
    assert "FROM mv_state.l AS l" in split.sql


FULL_BY_STATUS = (
    "select o.status, c.country, count(*) as n, sum(o.amount) as amount from shop.orders o "
    "full outer join shop.customers c on o.customer_id = c.customer_id where o.amount > 0 or c.segment = 'x' "
    "group by o.status, c.country"
)


def test_the_join_of_a_grouped_query_becomes_a_state_keyed_by_its_tables_keys():
    # a FULL JOIN grouped by columns of each side: neither is in every row, so the aggregate alone is
    # refused; the join (its WHERE applied) is a state of the columns read, keyed by both keys, NULL
    # where a side matched nothing (so its log is keyed by their JSON text), the grouping over it
    _refused(FULL_BY_STATUS)
    split = split_into_states(FULL_BY_STATUS, MASTERS)
    assert split is not None and split.view_class is ViewClass.AGGREGATE
    (state,) = split.states
    assert (state.name, state.key, state.log_key) == ("joined", ("o__order_id", "c__customer_id"), ("mv_state_key",))
    assert state.view_class is ViewClass.PER_PARTITION  # partitioned by the join key, the sides' COALESCE
    assert state.sql == (
        "SELECT o.status AS o__status, c.country AS c__country, o.amount AS o__amount, o.order_id AS o__order_id, "
        "c.customer_id AS c__customer_id, TO_JSON(ARRAY(CAST(o.order_id AS STRING), CAST(c.customer_id AS STRING))) "
        "AS mv_state_key FROM shop.orders AS o FULL OUTER JOIN shop.customers AS c ON o.customer_id = c.customer_id "
        "WHERE o.amount > 0 OR c.segment = 'x'"
    )
    assert split.sql == (
        "SELECT joined.o__status AS status, joined.c__country AS country, COUNT(*) AS n, SUM(joined.o__amount) "
        "AS amount FROM mv_state.joined AS joined GROUP BY joined.o__status, joined.c__country"
    )


@pytest.mark.parametrize(
    "sql, key",
    [
        # unqualified columns, told apart by the tables' columns; a window over the join
        (
            "select status, name, row_number() over (partition by name order by amount, order_id) as n "
            "from shop.orders o full join shop.customers c on o.customer_id = c.customer_id",
            ("o__order_id", "c__customer_id"),
        ),
        # a CTE read by the join, keyed by what its shape makes unique (its group key)
        (
            "with spend as (select customer_id, sum(amount) as spent from shop.orders group by customer_id) "
            "select c.country, max(s.spent) as top from shop.customers c full join spend s "
            "on s.customer_id = c.customer_id group by c.country",
            ("c__customer_id", "s__customer_id"),
        ),
        # a CTE that groups a FULL JOIN, joined again: its join is the state <cte>_joined
        (
            "with f as (select o.status, count(*) as n from shop.orders o full join shop.customers c "
            "on o.customer_id = c.customer_id group by o.status) select p.name, f.n from shop.products p "
            "join f on f.status = p.name",
            ("o__order_id", "c__customer_id"),
        ),
    ],
)
def test_a_join_taken_apart_is_keyed_by_each_item_s_key(sql, key):
    _refused(sql)
    split = split_into_states(sql, MASTERS)
    assert split is not None
    name = "f_joined" if sql.startswith("with f ") else "joined"
    assert [s.key for s in split.states if s.name == name] == [key]


@pytest.mark.parametrize(
    "sql",
    [
        # a value Spark names itself: the query over the state could not name it the same
        "select o.status, count(*) from shop.orders o full join shop.customers c on o.customer_id = c.customer_id "
        "group by o.status",
        # a subquery above the join
        "select o.status, count(*) as n from shop.orders o full join shop.customers c on o.customer_id = c.customer_id "
        "group by o.status having count(*) > (select count(*) from shop.products)",
        # a CTE whose shape gives no key
        "with s as (select amount from shop.orders) select c.country, count(*) as n from shop.customers c "
        "full join s on s.amount = c.customer_id group by c.country",
    ],
)
def test_a_join_is_not_taken_apart_where_the_query_over_it_could_differ_or_it_has_no_key(sql):
    _refused(sql)
    assert split_into_states(sql, MASTERS) is None
