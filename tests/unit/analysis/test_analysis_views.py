"""Accepted views of every class: classification, occurrences, join structure, hidden columns."""

from __future__ import annotations

import pickle

import pytest
import sqlglot
from sqlglot import exp

from dbt_incremental_mv.analysis import (
    HiddenPurpose,
    JoinKind,
    OutputKind,
    UnsupportedViewError,
    ViewClass,
    render_expression,
)
from dbt_incremental_mv.analysis.render import render_select


def sql_of(expression: exp.Expression) -> str:
    return render_expression(expression)


def pairs_of(step) -> list[tuple[str, str, bool]]:
    return [(sql_of(p.left), sql_of(p.right), p.null_safe) for p in step.equi_pairs]


# -- JOIN class ------------------------------------------------------------------------------


def test_single_table_with_filter_and_expressions(view, rendered):
    definition = view(
        """
        -- one master, expressions and a filter
        select order_id,
               amount * 1.2 as gross,
               case when status = 'shipped' then 1 else 0 end as is_shipped,
               cast(order_date as string) as day,
               coalesce(status, 'unknown') as status_or_unknown,
               upper(substring(status, 1, 3)) as code,
               date_add(order_date, 7) as due
        from shop.orders
        where amount > 0 and status <> 'cancelled'
        """
    )
    assert definition.view_class is ViewClass.JOIN
    assert not definition.is_aggregate
    assert [(o.alias, o.master.name) for o in definition.occurrences] == [("orders", "shop.orders")]
    assert definition.joins == ()
    assert [o.name for o in definition.outputs] == [
        "order_id", "gross", "is_shipped", "day", "status_or_unknown", "code", "due",
    ]
    assert all(o.kind is OutputKind.PLAIN for o in definition.outputs)
    assert [sql_of(c) for c in definition.where_conjuncts] == [
        "`orders`.`amount` > 0",
        "`orders`.`status` <> 'cancelled'",
    ]
    assert [(h.name, h.purpose, h.occurrence, h.source_column) for h in definition.hidden_columns] == [
        ("_mv_orders_order_id", HiddenPurpose.ROW_KEY, "orders", "order_id")
    ]
    assert definition.stored_columns[-1] == "_mv_orders_order_id"
    assert definition.referenced_columns["orders"] == frozenset({"order_id", "amount", "status", "order_date"})
    text = rendered(definition)
    assert text.startswith("SELECT `orders`.`order_id` AS `order_id`, `orders`.`amount` * 1.2 AS `gross`")
    assert "FROM `shop`.`orders` AS `orders` WHERE `orders`.`amount` > 0 AND `orders`.`status` <> 'cancelled'" in text


def test_two_master_inner_join_on(view, rendered):
    definition = view(
        "select o.order_id, o.status, c.name as customer_name "
        "from shop.orders o join shop.customers c on o.customer_id = c.customer_id"
    )
    assert definition.view_class is ViewClass.JOIN
    assert definition.aliases == ("o", "c")
    (step,) = definition.joins
    assert step.alias == "c" and step.kind is JoinKind.INNER and step.kind == "inner"
    assert pairs_of(step) == [("`o`.`customer_id`", "`c`.`customer_id`", False)]
    assert step.residual == ()
    assert definition.null_supplying == frozenset()
    assert [h.name for h in definition.hidden_columns] == ["_mv_o_order_id", "_mv_c_customer_id"]
    assert rendered(definition) == (
        "SELECT `o`.`order_id` AS `order_id`, `o`.`status` AS `status`, `c`.`name` AS `customer_name`, "
        "`o`.`order_id` AS `_mv_o_order_id`, `c`.`customer_id` AS `_mv_c_customer_id` "
        "FROM `shop`.`orders` AS `o` JOIN `shop`.`customers` AS `c` ON `o`.`customer_id` = `c`.`customer_id`"
    )


@pytest.mark.parametrize(
    "sql",
    [
        "select o.order_id, c.name from shop.orders o join shop.customers c on o.customer_id = c.customer_id "
        "join shop.countries n on c.country = n.country where o.status = 'open'",
        "select o.order_id, c.name from shop.orders o inner join shop.customers c on c.customer_id = o.customer_id "
        "inner join shop.countries n on n.country = c.country where o.status = 'open'",
        "select o.order_id, c.name from shop.orders o, shop.customers c, shop.countries n "
        "where o.customer_id = c.customer_id and c.country = n.country and o.status = 'open'",
        "select o.order_id, c.name from shop.orders o cross join shop.customers c cross join shop.countries n "
        "where o.status = 'open' and n.country = c.country and c.customer_id = o.customer_id",
        "select o.order_id, c.name from shop.orders o join shop.customers c "
        "join shop.countries n on c.country = n.country and o.customer_id = c.customer_id where o.status = 'open'",
    ],
    ids=["join-on", "inner-join-reversed", "comma-where", "cross-join-where", "condition-on-later-join"],
)
def test_three_master_inner_join_styles_normalize_alike(view, rendered, sql):
    definition = view(sql)
    assert definition.view_class is ViewClass.JOIN
    assert definition.aliases == ("o", "c", "n")
    first, second = definition.joins
    assert (first.alias, second.alias) == ("c", "n")
    assert pairs_of(first) == [("`o`.`customer_id`", "`c`.`customer_id`", False)]
    assert pairs_of(second) == [("`c`.`country`", "`n`.`country`", False)]
    assert [sql_of(c) for c in definition.where_conjuncts] == ["`o`.`status` = 'open'"]
    assert [h.name for h in definition.hidden_columns] == ["_mv_o_order_id", "_mv_c_customer_id", "_mv_n_country"]
    assert rendered(definition).endswith(
        "FROM `shop`.`orders` AS `o` JOIN `shop`.`customers` AS `c` ON `o`.`customer_id` = `c`.`customer_id` "
        "JOIN `shop`.`countries` AS `n` ON `c`.`country` = `n`.`country` WHERE `o`.`status` = 'open'"
    )


def test_self_join_with_two_aliases(view, rendered):
    definition = view(
        "select e.name, m.name as manager_name from shop.employees e "
        "join shop.employees m on e.manager_id = m.emp_id"
    )
    assert [(o.alias, o.master.name) for o in definition.occurrences] == [
        ("e", "shop.employees"), ("m", "shop.employees"),
    ]
    assert [h.name for h in definition.hidden_columns] == ["_mv_e_emp_id", "_mv_m_emp_id"]
    assert pairs_of(definition.joins[0]) == [("`e`.`manager_id`", "`m`.`emp_id`", False)]
    assert definition.referenced_columns == {"e": {"name", "manager_id", "emp_id"}, "m": {"name", "emp_id"}}
    rendered(definition)


def test_null_safe_join_keys(view, rendered):
    definition = view(
        "select o.order_id, c.name from shop.orders o join shop.customers c on o.customer_id <=> c.customer_id"
    )
    assert pairs_of(definition.joins[0]) == [("`o`.`customer_id`", "`c`.`customer_id`", True)]
    assert isinstance(definition.joins[0].equi_pairs[0].condition, exp.NullSafeEQ)
    # sqlglot writes <=> as IS NOT DISTINCT FROM, which Spark accepts with the same meaning
    assert "ON `o`.`customer_id` IS NOT DISTINCT FROM `c`.`customer_id`" in rendered(definition)


def test_expression_join_keys_and_residual_inner_condition(view):
    definition = view(
        "select o.order_id from shop.orders o join shop.customers c "
        "on cast(o.customer_id as string) = cast(c.customer_id as string) and o.amount > length(c.name)"
    )
    (step,) = definition.joins
    assert pairs_of(step) == [
        ("CAST(`o`.`customer_id` AS STRING)", "CAST(`c`.`customer_id` AS STRING)", False)
    ]
    assert [sql_of(c) for c in step.residual] == ["`o`.`amount` > LENGTH(`c`.`name`)"]
    assert sql_of(step.condition) == (
        "CAST(`o`.`customer_id` AS STRING) = CAST(`c`.`customer_id` AS STRING) "
        "AND `o`.`amount` > LENGTH(`c`.`name`)"
    )


def test_cross_join_without_condition(view, rendered):
    definition = view("select o.order_id, n.region from shop.orders o cross join shop.countries n")
    (step,) = definition.joins
    assert step.kind is JoinKind.INNER and step.condition is None and step.equi_pairs == ()
    assert "CROSS JOIN `shop`.`countries` AS `n`" in rendered(definition)


def test_three_part_names_and_quoted_identifiers(view):
    definition = view(
        "select `o`.`order_id`, c.name from spark_catalog.shop.orders as o "
        "join `shop`.`customers` c on o.customer_id = c.customer_id"
    )
    assert [o.master.name for o in definition.occurrences] == ["shop.orders", "shop.customers"]


def test_unaliased_tables_are_named_by_table_name_and_schema_qualified_columns_resolve(view):
    definition = view(
        "select shop.orders.order_id, customers.name from shop.orders "
        "join shop.customers on orders.customer_id = customers.customer_id"
    )
    assert definition.aliases == ("orders", "customers")
    assert [sql_of(o.expression) for o in definition.outputs] == ["`orders`.`order_id`", "`customers`.`name`"]


def test_names_match_case_insensitively_and_outputs_keep_the_written_name(view):
    # Spark names the output of `select O.ORDER_ID` ORDER_ID; the column read is the master's order_id.
    definition = view("select O.ORDER_ID, Amount as AMT from SHOP.Orders o")
    assert definition.aliases == ("o",)
    assert [(o.name, sql_of(o.expression)) for o in definition.outputs] == [
        ("ORDER_ID", "`o`.`order_id`"), ("AMT", "`o`.`amount`"),
    ]


# -- OUTER_JOIN class ------------------------------------------------------------------------


def test_left_join(view, rendered):
    definition = view(
        "select l.order_id, l.line_no, p.name as product_name "
        "from shop.order_lines l left outer join shop.products p on l.product_id = p.product_id"
    )
    assert definition.view_class is ViewClass.OUTER_JOIN
    (step,) = definition.joins
    assert step.kind is JoinKind.LEFT and step.is_outer
    assert pairs_of(step) == [("`l`.`product_id`", "`p`.`product_id`", False)]
    assert definition.null_supplying == frozenset({"p"})
    assert [h.name for h in definition.hidden_columns] == ["_mv_l_order_id", "_mv_l_line_no", "_mv_p_product_id"]
    assert definition.key_columns("p")[0].name == "_mv_p_product_id"
    assert "LEFT JOIN `shop`.`products` AS `p` ON `l`.`product_id` = `p`.`product_id`" in rendered(definition)


def test_right_join_null_extends_everything_before_it(view, rendered):
    definition = view(
        "select o.order_id, l.line_no, c.name from shop.orders o "
        "join shop.order_lines l on l.order_id = o.order_id "
        "right join shop.customers c on o.customer_id = c.customer_id"
    )
    assert definition.view_class is ViewClass.OUTER_JOIN
    assert [s.kind for s in definition.joins] == [JoinKind.INNER, JoinKind.RIGHT]
    assert definition.null_supplying == frozenset({"o", "l"})
    # the inner condition stays on its step: the RIGHT JOIN null-extends what it reads
    assert pairs_of(definition.joins[0]) == [("`o`.`order_id`", "`l`.`order_id`", False)]
    assert pairs_of(definition.joins[1]) == [("`o`.`customer_id`", "`c`.`customer_id`", False)]
    assert "RIGHT JOIN `shop`.`customers` AS `c`" in rendered(definition)


def test_left_join_chain(view):
    definition = view(
        "select o.order_id, c.name, n.region from shop.orders o "
        "left join shop.customers c on o.customer_id = c.customer_id "
        "left join shop.countries n on n.country = c.country"
    )
    assert [s.kind for s in definition.joins] == [JoinKind.LEFT, JoinKind.LEFT]
    assert pairs_of(definition.joins[1]) == [("`c`.`country`", "`n`.`country`", False)]
    assert definition.null_supplying == frozenset({"c", "n"})


def test_mixed_inner_and_left_joins_pool_inner_conditions(view):
    definition = view(
        "select o.order_id, l.line_no, p.name from shop.orders o "
        "left join shop.customers c on o.customer_id = c.customer_id "
        "join shop.order_lines l on l.order_id = o.order_id and o.status = 'open' "
        "left join shop.products p on p.product_id = l.product_id and p.category = 'toys'"
    )
    assert [(s.alias, s.kind) for s in definition.joins] == [
        ("c", JoinKind.LEFT), ("l", JoinKind.INNER), ("p", JoinKind.LEFT),
    ]
    assert pairs_of(definition.joins[1]) == [("`o`.`order_id`", "`l`.`order_id`", False)]
    # a single-table filter from an inner ON is a WHERE conjunct; the outer ON keeps its own filter
    assert [sql_of(c) for c in definition.where_conjuncts] == ["`o`.`status` = 'open'"]
    assert [sql_of(c) for c in definition.joins[2].residual] == ["`p`.`category` = 'toys'"]
    assert definition.null_supplying == frozenset({"c", "p"})


def test_outer_join_filter_on_null_supplying_side_stays_in_on(view, rendered):
    definition = view(
        "select o.order_id, c.name from shop.orders o left join shop.customers c "
        "on o.customer_id = c.customer_id and c.country in ('NL', 'BE') where o.amount > 10"
    )
    (step,) = definition.joins
    assert [sql_of(c) for c in step.residual] == ["`c`.`country` IN ('NL', 'BE')"]
    assert [sql_of(c) for c in definition.where_conjuncts] == ["`o`.`amount` > 10"]
    assert "AND `c`.`country` IN ('NL', 'BE') WHERE `o`.`amount` > 10" in rendered(definition)


def test_outer_join_with_null_safe_key(view):
    definition = view(
        "select o.order_id, c.name from shop.orders o left join shop.customers c on c.customer_id <=> o.customer_id"
    )
    assert pairs_of(definition.joins[0]) == [("`o`.`customer_id`", "`c`.`customer_id`", True)]


# -- AGGREGATE class -------------------------------------------------------------------------


def test_aggregate_with_group_by_over_one_table(view, rendered):
    definition = view(
        """
        select product_id,
               count(*) as line_count,
               count(quantity) as lines_with_quantity,
               sum(quantity) as units,
               sum(quantity * unit_price) as revenue,
               avg(unit_price) as avg_unit_price,
               min(unit_price) as min_unit_price,
               max(unit_price) as max_unit_price
        from shop.order_lines
        group by product_id
        """
    )
    assert definition.view_class is ViewClass.AGGREGATE and definition.is_aggregate
    assert [(o.name, o.kind) for o in definition.outputs] == [
        ("product_id", OutputKind.PLAIN),
        ("line_count", OutputKind.COUNT_STAR),
        ("lines_with_quantity", OutputKind.COUNT),
        ("units", OutputKind.SUM),
        ("revenue", OutputKind.SUM),
        ("avg_unit_price", OutputKind.AVG),
        ("min_unit_price", OutputKind.MIN),
        ("max_unit_price", OutputKind.MAX),
    ]
    assert sql_of(definition.output("revenue").argument) == "`order_lines`.`quantity` * `order_lines`.`unit_price`"
    assert definition.output("line_count").argument is None
    assert [sql_of(g) for g in definition.group_by] == ["`order_lines`.`product_id`"]
    assert definition.group_key_columns == ("product_id",)
    assert [(h.name, sql_of(h.expression), h.purpose, h.outputs) for h in definition.hidden_columns] == [
        ("_mv_count", "COUNT(*)", HiddenPurpose.ROW_COUNT, ()),
        ("_mv_cnt_units", "COUNT(`order_lines`.`quantity`)", HiddenPurpose.NONNULL_COUNT, ("units",)),
        ("_mv_cnt_revenue", "COUNT(`order_lines`.`quantity` * `order_lines`.`unit_price`)",
         HiddenPurpose.NONNULL_COUNT, ("revenue",)),
        ("_mv_cnt_avg_unit_price", "COUNT(`order_lines`.`unit_price`)", HiddenPurpose.NONNULL_COUNT,
         ("avg_unit_price", "min_unit_price", "max_unit_price")),
        ("_mv_sum_avg_unit_price", "SUM(`order_lines`.`unit_price`)", HiddenPurpose.SUM, ("avg_unit_price",)),
        ("_mv_top_min_unit_price", "`order_lines`.`unit_price`", HiddenPurpose.RESERVE, ("min_unit_price",)),
        ("_mv_top_max_unit_price", "`order_lines`.`unit_price`", HiddenPurpose.RESERVE, ("max_unit_price",)),
    ]
    assert [h.name for h in definition.support_columns("avg_unit_price")] == [
        "_mv_cnt_avg_unit_price", "_mv_sum_avg_unit_price",
    ]
    # the reserves: its rows ranked within their group by the argument, from the extreme, then grouped
    text = rendered(definition)
    assert "DENSE_RANK() OVER (PARTITION BY `order_lines`.`product_id` ORDER BY `order_lines`.`unit_price` ASC NULLS LAST) AS `_mv_rank0`" in text
    assert "DENSE_RANK() OVER (PARTITION BY `order_lines`.`product_id` ORDER BY `order_lines`.`unit_price` DESC) AS `_mv_rank1`" in text  # (DESC: NULLS LAST by default)
    assert "STRUCT(MAX(CASE WHEN `_mv_w`.`_mv_rank1` = 4 THEN `_mv_w`.`_mv_c2` END) AS `v`, COUNT_IF(`_mv_w`.`_mv_rank1` = 4) AS `n`)" in text
    assert text.endswith("FROM `shop`.`order_lines` AS `order_lines`) AS `_mv_w` GROUP BY `_mv_w`.`_mv_c0`")
    # the visible columns alone: the query as written
    visible = rendered(definition, include_hidden=False)
    assert visible.endswith("FROM `shop`.`order_lines` AS `order_lines` GROUP BY `order_lines`.`product_id`")


def test_global_aggregate_without_group_by(view, rendered):
    definition = view("select count(*) as n, sum(amount) as total from shop.orders where status = 'shipped'")
    assert definition.view_class is ViewClass.AGGREGATE
    assert definition.is_aggregate and definition.group_by == () and definition.group_key_columns == ()
    assert [h.name for h in definition.hidden_columns] == ["_mv_count", "_mv_cnt_total"]
    assert "GROUP BY" not in rendered(definition)


def test_aggregate_over_inner_joins(view, rendered):
    definition = view(
        """
        select c.country,
               count(*) as line_count,
               sum(l.quantity * l.unit_price) as revenue,
               max(o.order_date) as last_order_date
        from shop.orders o
        join shop.customers c on o.customer_id = c.customer_id
        join shop.order_lines l on l.order_id = o.order_id
        where o.status = 'shipped'
        group by c.country
        """
    )
    assert definition.view_class is ViewClass.AGGREGATE
    assert definition.aliases == ("o", "c", "l")
    assert definition.group_key_columns == ("country",)
    assert [h.name for h in definition.hidden_columns] == [
        "_mv_count", "_mv_cnt_revenue", "_mv_cnt_last_order_date", "_mv_top_last_order_date",
    ]
    assert definition.referenced_columns["l"] == frozenset({"order_id", "quantity", "unit_price"})
    rendered(definition)


def test_group_by_without_aggregates_is_an_aggregate_view(view):
    definition = view("select status from shop.orders group by status")
    assert definition.view_class is ViewClass.AGGREGATE
    assert [h.name for h in definition.hidden_columns] == ["_mv_count"]


def test_group_by_expression_ordinal_alias_and_all(view):
    by_expression = view("select upper(status) as s, count(*) as n from shop.orders group by upper(status)")
    by_ordinal = view("select upper(status) as s, count(*) as n from shop.orders group by 1")
    by_alias = view("select upper(status) as s, count(*) as n from shop.orders group by s")
    by_all = view("select upper(status) as s, count(*) as n from shop.orders group by all")
    for definition in (by_ordinal, by_alias, by_all):
        assert definition.group_by == by_expression.group_by
        assert definition.group_key_columns == ("s",)


def test_parentheses_around_select_and_group_by_items_do_not_matter(view):
    definition = view("select (amount + 1) as a1, count(*) as n from shop.orders group by amount + 1")
    assert definition.group_key_columns == ("a1",)
    definition = view("select amount + 1 as a1, (count(*)) as n from shop.orders group by (amount + 1)")
    assert definition.group_key_columns == ("a1",)
    assert definition.output("n").kind is OutputKind.COUNT_STAR


def test_group_keys_follow_group_by_order(view):
    definition = view(
        "select status, customer_id as cust, count(*) as n from shop.orders group by customer_id, status"
    )
    assert definition.group_key_columns == ("cust", "status")


def test_a_selected_integer_constant_is_a_group_key_spark_cannot_read_as_a_position(view, rendered):
    """Spark reads ``GROUP BY 2`` and ``GROUP BY -1`` as positions in the SELECT list (acceptance:
    ``-1 as order_id`` in a UNION ALL branch failed its build with GROUP_BY_POS_OUT_OF_RANGE)."""
    definition = view(
        "select status, -1 as order_id, (-(2)) as two, 2 as plus, -3000000000 as big, count(*) as n "
        "from shop.orders group by status"
    )
    keys = [sql_of(g) for g in definition.group_by][1:]
    assert keys == ["CAST(-1 AS INT)", "CAST(-(2) AS INT)", "CAST(2 AS INT)", "-3000000000"]  # (a bigint: no position)
    query = sqlglot.parse_one(rendered(definition), read="spark")
    items = query.args["group"].expressions
    positions = [i for i in items if isinstance(i, exp.Literal) or isinstance(i, exp.Neg) and sql_of(i) != "-3000000000"]
    assert len(items) == 5 and positions == []


def test_count_of_a_constant_is_count_star(view):
    definition = view("select status, count(1) as n from shop.orders group by status")
    output = definition.output("n")
    assert output.kind is OutputKind.COUNT_STAR and sql_of(output.expression) == "COUNT(*)"


def test_hidden_aggregate_columns_are_shared(view):
    definition = view(
        "select status, sum(amount) as s1, avg(amount) as a1, sum(amount) as s2 from shop.orders group by status"
    )
    assert [(h.name, h.outputs) for h in definition.hidden_columns] == [
        ("_mv_count", ()),
        ("_mv_cnt_s1", ("s1", "a1", "s2")),
        ("_mv_sum_a1", ("a1",)),
    ]


def test_expressions_over_aggregates_are_derived_from_stored_aggregates(view, rendered):
    definition = view(
        "select status, round(sum(amount), 1) as total, sum(amount) / count(*) as mean, "
        "coalesce(max(order_date), date'2020-01-01') as last_date, count(*) as n, count(*) + 1 as n1, "
        "status || ':' || cast(count(*) as string) as label from shop.orders group by status"
    )
    kinds = {o.name: (o.kind, o.hidden) for o in definition.outputs}
    assert kinds == {
        "status": (OutputKind.PLAIN, False),
        "total": (OutputKind.DERIVED, False),
        "mean": (OutputKind.DERIVED, False),
        "last_date": (OutputKind.DERIVED, False),
        "n": (OutputKind.COUNT_STAR, False),
        "n1": (OutputKind.DERIVED, False),
        "label": (OutputKind.DERIVED, False),
        # each aggregate no output selects is stored once, hidden, named after its first reader
        "_mv_a1_total": (OutputKind.SUM, True),
        "_mv_a1_last_date": (OutputKind.MAX, True),
    }
    stored = {o.name: sql_of(o.stored) for o in definition.outputs if o.stored is not None}
    assert stored == {
        "total": "ROUND(`_mv_a1_total`, 1)",
        "mean": "`_mv_a1_total` / `n`",
        "last_date": "COALESCE(`_mv_a1_last_date`, CAST('2020-01-01' AS DATE))",
        "n1": "`n` + 1",
        "label": "`status` || ':' || CAST(`n` AS STRING)",
    }
    assert [o.name for o in definition.visible_outputs] == ["status", "total", "mean", "last_date", "n", "n1", "label"]
    # the hidden aggregates get their helpers like selected ones; the defining query is unchanged
    assert "_mv_top_a1_last_date" in definition.stored_columns
    visible = rendered(definition, include_hidden=False)
    assert "_mv_a1" not in visible and "ROUND(SUM(`orders`.`amount`), 1) AS `total`" in visible


def test_count_star_in_an_expression_reads_the_row_count(view):
    definition = view("select cast(count(*) as int) as n, sum(amount) * 2 as twice from shop.orders")
    assert sql_of(definition.output("n").stored) == "CAST(`_mv_count` AS INT)"
    assert sql_of(definition.output("twice").stored) == "`_mv_a1_twice` * 2"


def test_having_reads_aggregates_the_view_does_not_select(view):
    definition = view(
        "select status, count(*) as n from shop.orders group by status having sum(amount) > 10 and max(amount) < 5"
    )
    assert sql_of(definition.having) == "`_mv_a1_having` > 10 AND `_mv_a2_having` < 5"
    assert [(o.name, o.kind, o.hidden) for o in definition.outputs[2:]] == [
        ("_mv_a1_having", OutputKind.SUM, True),
        ("_mv_a2_having", OutputKind.MAX, True),
    ]


def test_an_expression_over_group_keys_alone_is_recomputed_from_the_stored_keys(view):
    # dbt_utils.generate_surrogate_key over the grouped columns
    definition = view(
        "select status, md5(cast(coalesce(cast(status as string), '') as string)) as id, count(*) as n "
        "from shop.orders group by status"
    )
    assert definition.output("id").kind is OutputKind.DERIVED
    assert sql_of(definition.output("id").stored) == "MD5(CAST(COALESCE(CAST(`status` AS STRING), '') AS STRING))"
    with pytest.raises(UnsupportedViewError, match="neither aggregated nor in GROUP BY"):
        view("select status, md5(cast(amount as string)) as id, count(*) as n from shop.orders group by status")


def test_having_beside_group_by_positions(view):
    # (the positions name the SELECT list, not the HAVING condition resolved beside it)
    definition = view(
        "select coalesce(status, 'none') as s, sum(amount) as total from shop.orders group by 1 having count(*) > 1"
    )
    assert [sql_of(k) for k in definition.group_by] == ["COALESCE(`orders`.`status`, 'none')"]
    assert sql_of(definition.having) == "`_mv_count` > 1"


def test_hidden_aggregates_get_distinct_names_whoever_reads_them(view):
    # a column named like HAVING's hidden outputs, and owners that end alike
    definition = view(
        'select status, round(sum(amount), 1) as `having`, max(amount) + 1 as total, min(amount) - 1 as grand_total '
        "from shop.orders group by status having avg(amount) > 1"
    )
    names = [o.name for o in definition.outputs if o.hidden]
    assert names == ["_mv_a1_having", "_mv_a1_total", "_mv_a1_grand_total", "_mv_a2_having"]


# -- the definition as a value ---------------------------------------------------------------


def test_definition_is_hashable_and_analysis_is_deterministic(view):
    sql = "select o.order_id, c.name from shop.orders o join shop.customers c on o.customer_id = c.customer_id"
    first, second = view(sql), view(sql)
    assert first == second
    assert hash(first) == hash(second)
    assert render_select(first) == render_select(second)


def test_occurrence_and_output_lookups_raise_key_error(view):
    definition = view("select order_id from shop.orders")
    with pytest.raises(KeyError):
        definition.occurrence("nope")
    with pytest.raises(KeyError):
        definition.output("nope")


def test_error_message_format_and_pickling():
    error = UnsupportedViewError("rand()", "non-deterministic functions are not supported", "Remove it")
    assert str(error) == "cannot fast refresh: rand(): non-deterministic functions are not supported. Remove it."
    assert isinstance(error, ValueError)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.construct, copy.reason, copy.hint) == (error.construct, error.reason, error.hint)
    assert str(copy) == str(error)


def test_rendered_output_round_trips_through_sqlglot(view):
    definition = view(
        "select o.order_id, c.name from shop.orders o left join shop.customers c on o.customer_id = c.customer_id"
    )
    text = render_select(definition)
    assert sqlglot.parse_one(text, read="spark").sql("spark", identify=True) == text


def test_repeated_conditions_are_kept_once(view):
    definition = view(
        "select o.order_id from shop.orders o join shop.customers c on o.customer_id = c.customer_id "
        "where c.customer_id = o.customer_id and o.status = 'x' and o.status = 'x'"
    )
    assert len(definition.joins[0].equi_pairs) == 1
    assert [sql_of(c) for c in definition.where_conjuncts] == ["`o`.`status` = 'x'"]


def test_referenced_columns_include_filters_from_ctes(view):
    definition = view(
        "with nl as (select customer_id from shop.customers where country = 'NL') "
        "select o.order_id from shop.orders o join nl on nl.customer_id = o.customer_id"
    )
    assert definition.referenced_columns == {
        "o": frozenset({"order_id", "customer_id"}),
        "nl": frozenset({"customer_id", "country"}),
    }


def test_readable_repr_shows_sql(view):
    definition = view("select o.order_id from shop.orders o join shop.customers c on o.customer_id = c.customer_id")
    assert "condition='`o`.`customer_id` = `c`.`customer_id`'" in repr(definition.joins[0])


def test_select_distinct_is_a_counted_group(view):
    """SELECT DISTINCT is a GROUP BY of its expressions without aggregates: an aggregate view whose
    hidden count is the number of master rows behind each distinct row."""
    distinct = view("select distinct o.customer_id, upper(o.status) as status from shop.orders o where o.amount > 1")
    grouped = view("select o.customer_id, upper(o.status) as status from shop.orders o where o.amount > 1 "
                   "group by o.customer_id, upper(o.status)")
    assert distinct.view_class == grouped.view_class == ViewClass.AGGREGATE
    assert [h.name for h in distinct.hidden_columns] == ["_mv_count"]
    assert render_select(distinct) == render_select(grouped)


@pytest.mark.parametrize(
    "call",
    [
        "count(distinct customer_id)",
        "count(distinct customer_id, status)",
        "sum(distinct amount)",
        "avg(distinct amount)",
        "min(distinct amount)",
        "percentile(amount, 0.9)",
        "median(amount)",
        "stddev(amount)",
        "var_pop(amount)",
        "approx_count_distinct(customer_id)",
        "corr(amount, customer_id)",
        "bit_or(customer_id)",
    ],
)
def test_an_aggregate_no_delta_maintains_is_recomputed_per_touched_group(view, rendered, call):
    definition = view(f"select status, {call} as r, sum(amount) as total from shop.orders group by status")
    kinds = {o.name: o.kind for o in definition.outputs if not o.hidden}
    assert kinds == {"status": OutputKind.PLAIN, "r": OutputKind.RECOMPUTED, "total": OutputKind.SUM}
    assert definition.view_class is ViewClass.AGGREGATE
    assert call.split("(")[0] in rendered(definition).lower()  # the complete refresh computes it as written


def test_a_sorted_collection_is_an_expression_over_a_recomputed_aggregate(view):
    definition = view(
        "select status, array_sort(collect_set(customer_id)) as buyers, count(distinct customer_id) * 2 as twice "
        "from shop.orders group by status having count(distinct order_date) > 1"
    )
    kinds = {o.name: (o.kind, o.hidden) for o in definition.outputs}
    assert kinds["buyers"] == (OutputKind.DERIVED, False)
    assert kinds["twice"] == (OutputKind.DERIVED, False)
    hidden = [o for o in definition.outputs if o.hidden]
    assert {o.kind for o in hidden} == {OutputKind.RECOMPUTED}
    assert len(hidden) == 3  # collect_set, count(distinct customer_id), the HAVING's count(distinct order_date)


@pytest.mark.parametrize(
    ("call", "stored"),
    [
        # ordered by the value: as written
        ("listagg(status, ', ') within group (order by status)", "WITHIN GROUP (ORDER BY `orders`.`status`)"),
        # ordered by another value: the value itself breaks its ties
        (
            "listagg(status, ', ') within group (order by order_date desc)",
            "WITHIN GROUP (ORDER BY `orders`.`order_date` DESC, `orders`.`status` NULLS LAST)",
        ),
        ("string_agg(status, ',') within group (order by (status))", "WITHIN GROUP (ORDER BY (`orders`.`status`))"),
        # DISTINCT: Spark orders by the value itself
        (
            "listagg(distinct status, ', ') within group (order by status)",
            "LISTAGG(DISTINCT `orders`.`status`, ', ') WITHIN GROUP (ORDER BY `orders`.`status`)",
        ),
    ],
)
def test_an_ordered_listagg_is_recomputed_per_touched_group_its_ties_ordered_by_the_value(view, rendered, call, stored):
    definition = view(f"select customer_id, {call} as statuses from shop.orders group by customer_id")
    assert {o.name: o.kind for o in definition.outputs if not o.hidden}["statuses"] is OutputKind.RECOMPUTED
    assert stored in rendered(definition)


def test_collections_the_query_leaves_unordered_are_ordered_by_value_and_explain_says_so(view, rendered):
    from dbt_incremental_mv.refresh.operations.explain import _class_of

    definition = view(
        "select customer_id, listagg(status, ', ') as statuses, listagg(distinct status) as kinds, "
        "collect_list(amount) as amounts, size(collect_set(status)) as n, "
        "array_sort(collect_set(order_date)) as days from shop.orders group by customer_id"
    )
    sql = rendered(definition)
    assert "LISTAGG(`orders`.`status`, ', ') WITHIN GROUP (ORDER BY `orders`.`status` NULLS LAST) AS `statuses`" in sql
    # (no separator: Spark's default, NULL, joins the values with none; sqlglot would write ',')
    assert "LISTAGG(DISTINCT `orders`.`status`, NULL) WITHIN GROUP (ORDER BY `orders`.`status` NULLS LAST) AS `kinds`" in sql
    assert "ARRAY_SORT(COLLECT_LIST(`orders`.`amount`)) AS `amounts`" in sql
    assert "SIZE(ARRAY_SORT(COLLECT_SET(`orders`.`status`))) AS `n`" in sql
    assert "ARRAY_SORT(COLLECT_SET(`orders`.`order_date`)) AS `days`" in sql  # (sorted already: as written)
    explained = _class_of(definition)
    assert "the view orders them by value, the same way by every build and refresh" in explained
    assert "COLLECT_SET(orders.order_date)" not in explained.split("(LISTAGG")[-1]
    # a window's collection keeps its frame's order; MAP values, which Spark cannot sort, stay refused
    with pytest.raises(UnsupportedViewError, match="the order of a collected array"):
        view("select customer_id, collect_list(map(status, amount)) as m from shop.orders group by customer_id")


def test_explain_says_a_listagg_s_ties_are_joined_in_the_values_order(view):
    from dbt_incremental_mv.refresh.operations.explain import _class_of

    tied = _class_of(view("select customer_id, listagg(status) within group (order by order_date) as s from shop.orders group by customer_id"))
    assert "values the ORDER BY of a LISTAGG leaves tied are joined in their own order" in tied
    exact = _class_of(view("select customer_id, listagg(status) within group (order by status) as s from shop.orders group by customer_id"))
    assert "leaves tied" not in exact


@pytest.mark.parametrize(
    ("call", "kind", "stored"),
    [
        ("sum(amount) filter (where status = 'open')", OutputKind.SUM, "SUM(CASE WHEN "),
        ("count(*) filter (where amount > 0)", OutputKind.COUNT, "COUNT(CASE WHEN "),
        ("count(1) filter (where amount > 0)", OutputKind.COUNT, "COUNT(CASE WHEN "),
        ("avg(amount) filter (where status <> 'void')", OutputKind.AVG, "CASE WHEN "),
        ("max(order_date) filter (where amount > 0)", OutputKind.MAX, "MAX(CASE WHEN "),
        ("count(distinct status) filter (where amount > 0)", OutputKind.RECOMPUTED, "COUNT(DISTINCT CASE WHEN "),
        ("percentile(amount, 0.5) filter (where status = 'paid')", OutputKind.RECOMPUTED, "PERCENTILE(CASE WHEN "),
        (
            "listagg(status) within group (order by status) filter (where amount > 0)",
            OutputKind.RECOMPUTED,
            "LISTAGG(CASE WHEN ",
        ),
    ],
)
def test_an_aggregate_filter_is_the_aggregate_of_case_when(view, rendered, call, kind, stored):
    definition = view(f"select customer_id, {call} as r from shop.orders group by customer_id")
    assert {o.name: o.kind for o in definition.outputs if not o.hidden}["r"] is kind
    text = rendered(definition)
    assert stored in text and "FILTER (WHERE" not in text and "FILTER(WHERE" not in text  # (FILTER(ARRAY...): MAX's reserve)


def test_a_filter_on_an_aggregate_that_does_not_ignore_nulls_alone_is_refused(view):
    with pytest.raises(UnsupportedViewError) as refused:
        view("select customer_id, first(amount) filter (where status = 'x') as f from shop.orders group by customer_id")
    assert "FILTER is maintained on an aggregate of one value that ignores NULLs" in str(refused.value)
