"""Normalizations users write constantly: stars, unqualified columns, dbt-style CTEs, derived
tables, and a ``select * from final`` over a joining or aggregating CTE."""

from __future__ import annotations

import pytest

from dbt_incremental_mv.analysis import (
    JoinKind,
    MasterTable,
    OutputKind,
    UnsupportedViewError,
    ViewClass,
    analyze_view,
    render_expression,
)
from dbt_incremental_mv.analysis.render import render_select


def sql_of(expression) -> str:
    return render_expression(expression)


def outputs_of(definition) -> list[tuple[str, str]]:
    return [(o.name, sql_of(o.expression)) for o in definition.outputs]


# -- stars -----------------------------------------------------------------------------------


def test_select_star_expands_in_table_order(view, rendered):
    definition = view("select * from shop.customers")
    assert [o.name for o in definition.outputs] == ["customer_id", "name", "country", "segment"]
    assert rendered(definition).startswith("SELECT `customers`.`customer_id` AS `customer_id`, `customers`.`name`")


def test_qualified_stars_expand_per_occurrence(view):
    definition = view(
        "select o.*, c.name as customer_name from shop.orders o join shop.customers c on o.customer_id = c.customer_id"
    )
    assert [o.name for o in definition.outputs] == [
        "order_id", "customer_id", "order_date", "status", "amount", "customer_name",
    ]


def test_star_over_a_join_expands_every_occurrence_in_from_order(view):
    definition = view("select * from shop.products p join shop.countries n on n.country = p.category")
    assert [o.name for o in definition.outputs] == ["product_id", "name", "category", "country", "region"]


def test_star_except_drops_columns(view):
    definition = view("select * except (segment, country) from shop.customers")
    assert [o.name for o in definition.outputs] == ["customer_id", "name"]


def test_star_of_a_cte_expands_its_columns(view):
    definition = view("with c as (select customer_id, upper(name) as uname from shop.customers) select * from c")
    assert outputs_of(definition) == [("customer_id", "`c`.`customer_id`"), ("uname", "UPPER(`c`.`name`)")]


# -- unqualified and nested columns ----------------------------------------------------------


def test_unqualified_columns_resolve_to_their_only_occurrence(view):
    definition = view(
        "select order_id, name, region from shop.orders o join shop.customers c on o.customer_id = c.customer_id "
        "join shop.countries n on c.country = n.country where amount > 5"
    )
    assert outputs_of(definition) == [
        ("order_id", "`o`.`order_id`"), ("name", "`c`.`name`"), ("region", "`n`.`region`"),
    ]
    assert [sql_of(c) for c in definition.where_conjuncts] == ["`o`.`amount` > 5"]


def test_struct_field_access(view):
    definition = view("select e.address.city, address.zip as zip, e.name from shop.employees e")
    assert outputs_of(definition) == [
        ("city", "`e`.`address`.`city`"), ("zip", "`e`.`address`.`zip`"), ("name", "`e`.`name`"),
    ]
    assert definition.referenced_columns["e"] == frozenset({"address", "name", "emp_id"})


def test_higher_order_function_lambda_variables_are_not_columns(view):
    definition = view("select order_id, transform(array(amount, amount), x -> x * 2) as doubled from shop.orders")
    assert sql_of(definition.output("doubled").expression) == (
        "TRANSFORM(ARRAY(`orders`.`amount`, `orders`.`amount`), `x` -> `x` * 2)"
    )


# -- CTEs and derived tables merged into the query -------------------------------------------


def test_dbt_style_import_ctes_merge_into_one_join(view, rendered):
    definition = view(
        """
        with orders as (
            select order_id, customer_id, amount * 100 as amount_cents
            from shop.orders
            where status <> 'cancelled'
        ),
        customers as (
            select customer_id, upper(name) as customer_name from shop.customers
        )
        select orders.order_id, orders.amount_cents, customers.customer_name
        from orders
        join customers on orders.customer_id = customers.customer_id
        where orders.amount_cents > 1000
        """
    )
    assert definition.view_class is ViewClass.JOIN
    assert [(o.alias, o.master.name) for o in definition.occurrences] == [
        ("orders", "shop.orders"), ("customers", "shop.customers"),
    ]
    assert outputs_of(definition) == [
        ("order_id", "`orders`.`order_id`"),
        ("amount_cents", "`orders`.`amount` * 100"),
        ("customer_name", "UPPER(`customers`.`name`)"),
    ]
    assert [sql_of(c) for c in definition.where_conjuncts] == [
        "`orders`.`status` <> 'cancelled'",
        "(`orders`.`amount` * 100) > 1000",
    ]
    assert "FROM `shop`.`orders` AS `orders` JOIN `shop`.`customers` AS `customers`" in rendered(definition)


def test_cte_referenced_twice_becomes_two_occurrences(view):
    definition = view(
        """
        with staff as (select emp_id, manager_id, name from shop.employees where name is not null)
        select e.name, m.name as manager_name from staff e join staff m on e.manager_id = m.emp_id
        """
    )
    assert definition.aliases == ("e", "m")
    assert [sql_of(c) for c in definition.where_conjuncts] == [
        "NOT `e`.`name` IS NULL", "NOT `m`.`name` IS NULL",
    ]


def test_nested_ctes_merge_through_every_level(view):
    definition = view(
        """
        with base as (select order_id, amount, status from shop.orders where amount > 0),
             paid as (select order_id, amount * 2 as doubled from base where status = 'paid')
        select p.order_id, p.doubled + 1 as bumped from paid p
        """
    )
    assert definition.aliases == ("p",)
    assert outputs_of(definition) == [("order_id", "`p`.`order_id`"), ("bumped", "(`p`.`amount` * 2) + 1")]
    assert [sql_of(c) for c in definition.where_conjuncts] == ["`p`.`amount` > 0", "`p`.`status` = 'paid'"]


def test_derived_table_in_join_merges(view):
    definition = view(
        "select o.order_id, nl.name from shop.orders o "
        "join (select customer_id, name from shop.customers where country = 'NL') nl on nl.customer_id = o.customer_id"
    )
    assert [(o.alias, o.master.name) for o in definition.occurrences] == [
        ("o", "shop.orders"), ("nl", "shop.customers"),
    ]
    assert [sql_of(c) for c in definition.where_conjuncts] == ["`nl`.`country` = 'NL'"]
    assert [sql_of(c) for c in definition.joins[0].residual] == []


def test_a_joining_cte_joined_to_more_tables_is_spliced_into_the_chain(view, rendered):
    definition = view(
        """
        with order_customers as (
            select o.order_id, o.customer_id, c.country, c.name
            from shop.orders o join shop.customers c on o.customer_id = c.customer_id
            where o.status <> 'cancelled' and c.name <> c.country
        )
        select oc.order_id, n.region, upper(oc.name) as who
        from shop.countries n join order_customers oc on oc.country = n.country
        where n.region = 'EU'
        """
    )
    assert definition.view_class is ViewClass.JOIN
    assert [(o.alias, o.master.name) for o in definition.occurrences] == [
        ("n", "shop.countries"), ("oc_o", "shop.orders"), ("oc_c", "shop.customers"),
    ]
    assert [(s.alias, s.kind) for s in definition.joins] == [("oc_o", JoinKind.INNER), ("oc_c", JoinKind.INNER)]
    # a cross join to its first table, its own join, then the ON of the join to it where it can be evaluated
    assert definition.joins[0].condition is None
    assert sql_of(definition.joins[1].condition) == (
        "`oc_o`.`customer_id` = `oc_c`.`customer_id` AND `n`.`country` = `oc_c`.`country`"
    )
    assert [sql_of(c) for c in definition.where_conjuncts] == [
        "`oc_o`.`status` <> 'cancelled'", "`oc_c`.`name` <> `oc_c`.`country`", "`n`.`region` = 'EU'",
    ]
    assert outputs_of(definition) == [
        ("order_id", "`oc_o`.`order_id`"), ("region", "`n`.`region`"), ("who", "UPPER(`oc_c`.`name`)"),
    ]
    rendered(definition)


@pytest.mark.parametrize(
    "nested, flat",
    [
        (
            "with x as (select o.order_id, o.customer_id, c.country from shop.orders o join shop.customers c "
            "on o.customer_id = c.customer_id where o.status = 'open') "
            "select x.order_id, n.region from x join shop.countries n on n.country = x.country",
            "select x_o.order_id, n.region from shop.orders x_o join shop.customers x_c "
            "on x_o.customer_id = x_c.customer_id join shop.countries n on n.country = x_c.country "
            "where x_o.status = 'open'",
        ),
        (
            "select n.region, count(*) as orders from shop.countries n join (select o.order_id, c.country "
            "from shop.orders o join shop.customers c on o.customer_id = c.customer_id) x on x.country = n.country "
            "group by n.region",
            "select n.region, count(*) as orders from shop.countries n, shop.orders x_o join shop.customers x_c "
            "on x_o.customer_id = x_c.customer_id where x_c.country = n.country group by n.region",
        ),
        (
            "with x as (select o.order_id, l.line_no, p.name from shop.orders o join shop.order_lines l "
            "on l.order_id = o.order_id left join shop.products p on p.product_id = l.product_id) "
            "select x.order_id, x.name, c.country from x left join shop.customers c on c.customer_id = x.order_id",
            "select x_o.order_id, x_p.name, c.country from shop.orders x_o join shop.order_lines x_l "
            "on x_l.order_id = x_o.order_id left join shop.products x_p on x_p.product_id = x_l.product_id "
            "left join shop.customers c on c.customer_id = x_o.order_id",
        ),
    ],
    ids=["filtered", "derived table under an aggregate", "first, with outer joins inside and after"],
)
def test_a_spliced_cte_is_the_join_written_flat(view, rendered, nested, flat):
    """The view a joining CTE joined again defines is the one its flat join defines: the same
    occurrences, steps, filters and outputs, so the same refresh statements."""
    spliced, written = view(nested), view(flat)
    assert rendered(spliced) == rendered(written)
    assert spliced == written


@pytest.mark.parametrize(
    "nested",
    [
        "with d as (select distinct o.customer_id, c.country from shop.orders o join shop.customers c "
        "on o.customer_id = c.customer_id) select * from d",
        "select d.customer_id, d.country from (select distinct o.customer_id, c.country from shop.orders o "
        "join shop.customers c on o.customer_id = c.customer_id) as d",
    ],
    ids=["cte", "derived table"],
)
def test_a_select_distinct_read_alone_is_the_distinct_view(view, rendered, nested):
    flat = (
        "select distinct o.customer_id, c.country from shop.orders o join shop.customers c "
        "on o.customer_id = c.customer_id"
    )
    assert view(nested).view_class is ViewClass.AGGREGATE
    assert rendered(view(nested)) == rendered(view(flat))


@pytest.mark.parametrize(
    "wrapped",
    [
        "with paid as (select * from shop.orders where status = 'paid'), final as (select customer_id, "
        "count(*) as n from paid group by 1 having count(*) > 2) select * from final",
        "select * from (select customer_id, count(*) as n from shop.orders where status = 'paid' "
        "group by customer_id having count(*) > 2) as final",
    ],
    ids=["closing cte", "derived table"],
)
def test_select_star_over_a_grouping_cte_with_having_is_that_query(view, rendered, wrapped):
    flat = (
        "select customer_id, count(*) as n from shop.orders where status = 'paid' group by customer_id "
        "having count(*) > 2"
    )
    assert sql_of(view(wrapped).having) == "`n` > 2"  # over the stored COUNT(*) it selects
    assert rendered(view(wrapped)).replace("`paid`", "`orders`") == rendered(view(flat))


PER_CUSTOMER = (
    "with per as (select customer_id, count(*) as n, sum(amount) as total, coalesce(max(amount), 0) as biggest "
    "from shop.orders where status <> 'x' group by customer_id) "
)


@pytest.mark.parametrize(
    "nested, flat",
    [
        (
            PER_CUSTOMER + "select c.customer_id, c.name, per.n, per.total from shop.customers c "
            "join per on per.customer_id = c.customer_id",
            "select c.customer_id, c.name, count(*) as n, sum(per_orders.amount) as total from shop.customers c "
            "join shop.orders per_orders on per_orders.customer_id = c.customer_id where per_orders.status <> 'x' "
            "group by c.customer_id, c.name",
        ),
        (
            # after a LEFT JOIN a customer without orders has NULL in every column of the CTE
            PER_CUSTOMER + "select c.customer_id, per.n, per.biggest, per.customer_id as same from shop.customers c "
            "left join per on per.customer_id = c.customer_id",
            "select c.customer_id, case when count(per_orders.customer_id) = 0 then null else count(*) end as n, "
            "case when count(per_orders.customer_id) = 0 then null else coalesce(max(per_orders.amount), 0) end "
            "as biggest, case when count(per_orders.customer_id) = 0 then null else max(per_orders.customer_id) end "
            "as same from shop.customers c left join shop.orders per_orders on per_orders.customer_id = "
            "c.customer_id and per_orders.status <> 'x' group by c.customer_id",
        ),
        (
            # a SELECT DISTINCT of keys joined as a filter (what IN (select ...) means)
            "with buyers as (select distinct customer_id from shop.orders) select c.customer_id, c.name "
            "from shop.customers c join buyers b on b.customer_id = c.customer_id",
            "select c.customer_id, c.name from shop.customers c join shop.orders b_orders "
            "on b_orders.customer_id = c.customer_id group by c.customer_id, c.name",
        ),
        (
            # an inner join's sides swapped: the SELECT list keeps its order
            PER_CUSTOMER + "select per.n, per.total, c.customer_id, c.name from per join shop.customers c "
            "on per.customer_id = c.customer_id",
            "select count(*) as n, sum(per_orders.amount) as total, c.customer_id, c.name "
            "from shop.customers c join shop.orders per_orders on per_orders.customer_id = c.customer_id "
            "where per_orders.status <> 'x' group by c.customer_id, c.name",
        ),
    ],
    ids=["inner join", "left join", "distinct keys", "first, inner joined"],
)
def test_an_aggregating_cte_joined_on_its_group_keys_is_the_aggregate_over_the_join(view, rendered, nested, flat):
    pulled, written = view(nested), view(flat)
    assert pulled.view_class is ViewClass.AGGREGATE
    assert rendered(pulled) == rendered(written)


@pytest.mark.parametrize(
    "outer, message",
    [
        ("select c.customer_id, per.n from shop.customers c join per on per.n = c.customer_id",
         "is not an equality of one of its group keys"),
    ],
    ids=["not on its group key"],
)
def test_an_aggregating_cte_joined_otherwise_is_refused_naming_it(view, outer, message):
    with pytest.raises(UnsupportedViewError, match=message) as caught:
        view(PER_CUSTOMER + outer)
    assert caught.value.construct in ("per", "p2")


def test_a_joining_cte_with_a_left_join_keeps_it_where_it_is_joined_on_its_preserved_side(view):
    definition = view(
        """
        with lines as (
            select l.order_id, l.line_no, p.name as product
            from shop.order_lines l left join shop.products p on p.product_id = l.product_id and p.category = 'x'
        )
        select o.order_id, lines.line_no, lines.product
        from shop.orders o join lines on lines.order_id = o.order_id
        """
    )
    assert definition.view_class is ViewClass.OUTER_JOIN
    assert [(s.alias, s.kind) for s in definition.joins] == [
        ("lines_l", JoinKind.INNER), ("lines_p", JoinKind.LEFT),
    ]
    assert [sql_of(c) for c in definition.joins[1].residual] == ["`lines_p`.`category` = 'x'"]


def test_a_joining_cte_first_keeps_its_own_joins_and_the_outer_joins_follow(view):
    definition = view(
        """
        with j as (select o.order_id, o.customer_id from shop.orders o left join shop.customers c
                   on o.customer_id = c.customer_id where o.status = 'open')
        select j.order_id, l.line_no from j right join shop.order_lines l on l.order_id = j.order_id
        """
    )
    assert [(s.alias, s.kind) for s in definition.joins] == [("j_c", JoinKind.LEFT), ("l", JoinKind.RIGHT)]
    # its WHERE filters its orders before the RIGHT JOIN null-extends them: a condition of that join
    assert [sql_of(c) for c in definition.joins[1].residual] == ["`j_o`.`status` = 'open'"]
    assert definition.where_conjuncts == ()


def test_spliced_occurrences_are_renamed_apart_from_the_other_from_items(view):
    definition = view(
        """
        with j as (select o.order_id, c.customer_id from shop.orders o join shop.customers c
                   on o.customer_id = c.customer_id)
        select a.order_id, b.order_id as other, j_o.name
        from j a join j b on a.customer_id = b.customer_id join shop.customers j_o on j_o.customer_id = a.customer_id
        """
    )
    assert definition.aliases == ("a_o", "a_c", "b_o", "b_c", "j_o")
    definition = view(
        """
        with j as (select o.order_id, c.customer_id from shop.orders o join shop.customers c
                   on o.customer_id = c.customer_id)
        select x.order_id, x_o.name from j x join shop.customers x_o on x_o.customer_id = x.customer_id
        """
    )
    assert definition.aliases == ("x_o_2", "x_c", "x_o")


def test_cte_filter_of_a_null_supplying_occurrence_goes_into_the_on_clause(view, rendered):
    definition = view(
        """
        with dutch as (select * from shop.customers where country = 'NL')
        select o.order_id, d.name from shop.orders o left join dutch d on o.customer_id = d.customer_id
        where o.status = 'open'
        """
    )
    (step,) = definition.joins
    assert step.kind is JoinKind.LEFT
    assert [sql_of(c) for c in step.residual] == ["`d`.`country` = 'NL'"]
    assert [sql_of(c) for c in definition.where_conjuncts] == ["`o`.`status` = 'open'"]
    assert (
        "LEFT JOIN `shop`.`customers` AS `d` ON `o`.`customer_id` = `d`.`customer_id` AND `d`.`country` = 'NL' "
        "WHERE `o`.`status` = 'open'"
    ) in rendered(definition)


def test_cte_filter_of_the_preserved_side_stays_in_where(view):
    definition = view(
        """
        with open_orders as (select * from shop.orders where status = 'open')
        select o.order_id, c.name from open_orders o left join shop.customers c on o.customer_id = c.customer_id
        """
    )
    assert [sql_of(c) for c in definition.where_conjuncts] == ["`o`.`status` = 'open'"]
    assert definition.joins[0].residual == ()


def test_cte_filter_of_an_occurrence_null_extended_by_a_right_join(view):
    definition = view(
        """
        with open_orders as (select * from shop.orders where status = 'open')
        select o.order_id, c.customer_id as cid from open_orders o
        right join shop.customers c on o.customer_id = c.customer_id
        """
    )
    assert definition.where_conjuncts == ()
    assert [sql_of(c) for c in definition.joins[0].residual] == ["`o`.`status` = 'open'"]


def test_cte_and_alias_column_lists_rename(view):
    definition = view(
        "with c(id, label) as (select customer_id, name from shop.customers) "
        "select x.ident, x.lbl from c as x(ident, lbl)"
    )
    assert outputs_of(definition) == [("ident", "`x`.`customer_id`"), ("lbl", "`x`.`name`")]


def test_table_alias_column_list_renames_master_columns(view):
    definition = view("select p.pid from shop.products as p(pid, pname, pcat)")
    assert outputs_of(definition) == [("pid", "`p`.`product_id`")]


# -- a query over a single joining or aggregating CTE (dbt's "final" CTE) --------------------


def test_select_star_from_final_cte_is_the_final_query(view):
    definition = view(
        """
        with orders as (select * from shop.orders),
             customers as (select * from shop.customers),
             final as (
                 select orders.order_id, customers.name as customer_name
                 from orders left join customers on orders.customer_id = customers.customer_id
             )
        select * from final
        """
    )
    assert definition.view_class is ViewClass.OUTER_JOIN
    assert definition.aliases == ("orders", "customers")
    assert outputs_of(definition) == [("order_id", "`orders`.`order_id`"), ("customer_name", "`customers`.`name`")]


def test_aggregation_over_a_joining_cte(view):
    definition = view(
        """
        with joined as (
            select c.country, o.amount from shop.orders o join shop.customers c on o.customer_id = c.customer_id
        )
        select country, sum(amount) as total, count(*) as n from joined where amount > 0 group by country
        """
    )
    assert definition.view_class is ViewClass.AGGREGATE
    assert outputs_of(definition) == [
        ("country", "`c`.`country`"), ("total", "SUM(`o`.`amount`)"), ("n", "COUNT(*)"),
    ]
    assert [sql_of(c) for c in definition.where_conjuncts] == ["`o`.`amount` > 0"]
    assert definition.group_key_columns == ("country",)


def test_projection_and_group_key_filter_over_an_aggregating_cte(view):
    definition = view(
        """
        with by_country as (select country, count(*) as n from shop.customers group by country)
        select country as ctry, n from by_country where country <> 'XX'
        """
    )
    assert definition.view_class is ViewClass.AGGREGATE
    assert [(o.name, o.kind) for o in definition.outputs] == [("ctry", OutputKind.PLAIN), ("n", OutputKind.COUNT_STAR)]
    # a filter on group-by values is the same filter before grouping
    assert [sql_of(c) for c in definition.where_conjuncts] == ["`customers`.`country` <> 'XX'"]
    assert definition.group_key_columns == ("ctry",)


def test_unaliased_derived_table_as_the_only_from_item(view):
    definition = view(
        "select country, count(*) as n from "
        "(select c.country from shop.orders o join shop.customers c on o.customer_id = c.customer_id) "
        "group by country"
    )
    assert definition.view_class is ViewClass.AGGREGATE
    assert definition.aliases == ("o", "c")


def test_parenthesised_statement_and_trailing_semicolon(view):
    definition = view("(select order_id from shop.orders);")
    assert [o.name for o in definition.outputs] == ["order_id"]


def test_spark_hints_are_accepted_and_dropped(view):
    definition = view(
        "select /*+ BROADCAST(c) */ o.order_id from shop.orders o "
        "join shop.customers c on o.customer_id = c.customer_id"
    )
    assert "BROADCAST" not in render_select(definition)


def test_masters_keyed_in_mixed_case_are_found():
    master = MasterTable("shop.orders", (("order_id", "bigint"),), ("order_id",))
    definition = analyze_view("select order_id from shop.orders", {"Shop.Orders": master})
    assert definition.occurrences[0].master is master


@pytest.mark.parametrize(
    "written, expected",
    [
        ("a.x = 1 and (b.y = 2 or b.z = 3)", ["`a`.`x` = 1", "(`b`.`y` = 2 OR `b`.`z` = 3)"]),
        ("(a.x = 1 and b.y = 2)", ["`a`.`x` = 1", "`b`.`y` = 2"]),
        ("a.x = 1 and true", ["`a`.`x` = 1"]),
    ],
)
def test_where_is_split_into_conjuncts(written, expected):
    masters = {
        "s.a": MasterTable("s.a", (("k", "int"), ("x", "int")), ("k",)),
        "s.b": MasterTable("s.b", (("k", "int"), ("y", "int"), ("z", "int")), ("k",)),
    }
    definition = analyze_view(f"select a.k, b.k as bk from s.a a join s.b b on a.k = b.k where {written}", masters)
    rendered_where = render_select(definition).split(" WHERE ", 1)[1]
    assert rendered_where == " AND ".join(expected)
    assert len(definition.where_conjuncts) == len(expected)


# ---------------------------------------------------------------- JOIN ... USING
@pytest.mark.parametrize("side", ["", "left "])
def test_join_using_is_the_join_on_the_earlier_tables_column(side, masters):
    on = analyze_view(
        f"select o.order_id, o.customer_id, c.name from shop.orders o {side}join shop.customers c "
        "on o.customer_id = c.customer_id",
        masters,
    )
    using = analyze_view(
        f"select o.order_id, customer_id, c.name from shop.orders o {side}join shop.customers c using (customer_id)",
        masters,
    )
    assert render_select(using) == render_select(on)


def test_join_using_in_a_chain_takes_the_column_from_the_table_that_has_it(masters):
    on = analyze_view(
        "select o.order_id, l.line_no, c.name from shop.orders o join shop.order_lines l on o.order_id = l.order_id "
        "join shop.customers c on o.customer_id = c.customer_id",
        masters,
    )
    using = analyze_view(
        "select order_id, l.line_no, c.name from shop.orders o join shop.order_lines l using (order_id) "
        "join shop.customers c using (customer_id)",
        masters,
    )
    assert render_select(using) == render_select(on)


@pytest.mark.parametrize(
    "sql, message",
    [
        (
            "select *, max(o.order_id) over (partition by o.status) as m from shop.orders o "
            "join shop.customers c using (customer_id) join shop.countries k on k.region <> o.status",
            "SELECT \\* over JOIN ... USING",
        ),
        (
            "select o.order_id from shop.orders o right join shop.customers c using (customer_id)",
            "a RIGHT JOIN with USING is not supported",
        ),
        (
            "select o.order_id from shop.orders o join shop.order_lines l on o.order_id = l.order_id "
            "join shop.orders o2 using (order_id)",
            "several tables joined before it have a column order_id",
        ),
        ("select o.order_id from shop.orders o join shop.customers c using (order_id)", "c has no column order_id"),
    ],
)
def test_join_using_that_cannot_be_read_as_an_on_is_refused_saying_how_to_write_it(sql, message, masters):
    with pytest.raises(UnsupportedViewError, match=message):
        analyze_view(sql, masters)


# ---------------------------------------------------------------- ORDER BY inside a CTE or subquery
@pytest.mark.parametrize(
    "ordered",
    [
        "with paid as (select * from shop.orders where status = 'paid' order by order_date desc) "
        "select p.order_id, c.name from paid p join shop.customers c on p.customer_id = c.customer_id",
        "select p.order_id, c.name from (select * from shop.orders where status = 'paid' order by 1) p "
        "join shop.customers c on p.customer_id = c.customer_id",
    ],
)
def test_an_order_by_inside_without_limit_is_dropped(ordered, masters):
    plain = analyze_view(
        "select p.order_id, c.name from (select * from shop.orders where status = 'paid') p "
        "join shop.customers c on p.customer_id = c.customer_id",
        masters,
    )
    assert render_select(analyze_view(ordered, masters)) == render_select(plain)


@pytest.mark.parametrize(
    "sql",
    [
        "select o.order_id from shop.orders o order by o.order_id limit 3",
        "with top as (select * from shop.orders order by amount desc limit 10) select top.order_id from top",
    ],
)
def test_an_order_by_with_a_limit_stays_refused(sql, masters):
    with pytest.raises(UnsupportedViewError):
        analyze_view(sql, masters)


@pytest.mark.parametrize(
    "ordered, plain, order",
    [
        ("select o.order_id, o.amount from shop.orders o order by o.amount desc nulls last, 1",
         "select o.order_id, o.amount from shop.orders o", "ORDER BY o.amount DESC, 1"),
        ("select o.status, count(*) as n from shop.orders o group by o.status order by n desc",
         "select o.status, count(*) as n from shop.orders o group by o.status", "ORDER BY n DESC"),
        ("select order_id from shop.orders union all select customer_id from shop.customers order by 1",
         "select order_id from shop.orders union all select customer_id from shop.customers", "ORDER BY 1"),
    ],
)
def test_the_outermost_order_by_without_a_limit_is_ignored_and_said_so(ordered, plain, order, masters):
    # (a table keeps no order; Oracle uses a materialized view's ORDER BY at its creation only)
    from dbt_incremental_mv.analysis.analyze import ignored_order

    assert render_select(analyze_view(ordered, masters)) == render_select(analyze_view(plain, masters))
    assert ignored_order(ordered) == order
    assert ignored_order(plain) is None
    assert ignored_order(ordered + " limit 3") is None


# ---------------------------------------------------------------- aggregates equal to maintained ones
@pytest.mark.parametrize(
    "written, maintained",
    [
        ("count_if(o.amount > 10)", "count(case when o.amount > 10 then 1 end)"),
        ("bool_or(o.amount > 10)", "max(o.amount > 10)"),
        ("any(o.amount > 10)", "max(o.amount > 10)"),
        ("some(o.amount > 10)", "max(o.amount > 10)"),
        ("bool_and(o.amount > 10)", "min(o.amount > 10)"),
        ("every(o.amount > 10)", "min(o.amount > 10)"),
    ],
)
def test_an_aggregate_equal_to_a_maintained_one_is_maintained_as_it(written, maintained, masters):
    sql = "select o.status, {} as flag from shop.orders o group by o.status"
    assert render_select(analyze_view(sql.format(written), masters)) == render_select(
        analyze_view(sql.format(maintained), masters)
    )


@pytest.mark.parametrize(
    "outer",
    [
        "select c.name, per.n from shop.customers c join per on per.customer_id = c.customer_id",
        "select c.customer_id, per.n from shop.customers c left join per on per.customer_id = c.customer_id "
        "where per.n > 1",
        "select c.customer_id, count(*) as k from shop.customers c join per on per.customer_id = c.customer_id "
        "group by c.customer_id",
        "select per.n, c.customer_id from per left join shop.customers c on per.customer_id = c.customer_id",
        "select c.customer_id, per.n, p2.n as m from shop.customers c join per on per.customer_id = c.customer_id "
        "join per p2 on p2.customer_id = c.customer_id",
        "select c.customer_id, per.n from shop.customers c right join per on per.customer_id = c.customer_id",
    ],
    ids=["key not selected", "filtered", "aggregated again", "first", "two", "right join"],
)
def test_an_aggregating_cte_joined_on_its_group_key_otherwise_is_recomputed_by_partition(view, outer):
    # no aggregate over the join equals it, but every table is joined on the customer: per customer
    definition = view(PER_CUSTOMER + outer)
    assert definition.view_class is ViewClass.PER_PARTITION
    assert {p.name for e in definition.partition_query.partitions.values() for p in e} == {"customer_id"}
