"""Stacked queries over one master recomputed by partition (analysis/partitionwise.py): the shapes
the other classes refuse that are maintained so, the common partition found through the levels,
ties broken by the rows' key, the hidden partition column, and the refusals."""

from __future__ import annotations

import pytest

import sqlglot

from dbt_incremental_mv.analysis import UnsupportedViewError, ViewClass
from dbt_incremental_mv.analysis.analyze import parsed_query
from dbt_incremental_mv.analysis.partitionwise import NotPartitionwise, analyze_partitionwise
from dbt_incremental_mv.analysis.resolver import Resolver
from tests.unit.analysis.conftest import MASTERS
from dbt_incremental_mv.analysis.model import HiddenPurpose, Lookup
from dbt_incremental_mv.analysis.resolved import column_node

O = "shop.orders"

ACCEPTED = [
    # "latest row per key", then aggregated per a column of the key's partition
    (
        f"with latest as (select *, row_number() over (partition by customer_id, order_date order by order_id desc) as rn "
        f"from {O}) select customer_id, count(*) as n, sum(amount) as amount from latest where rn = 1 group by customer_id",
        ["customer_id"],
    ),
    # a window over another window's result
    (
        f"select order_id, customer_id, sum(prev) over (partition by customer_id) as s from (select order_id, customer_id, "
        f"lag(amount) over (partition by customer_id order by order_id) as prev from {O}) as t",
        ["customer_id"],
    ),
    # a window over the groups of an aggregate
    (
        f"select customer_id, sum(sum(amount)) over (partition by customer_id) as s from {O} group by customer_id",
        ["customer_id"],
    ),
    # an aggregating CTE aggregated again, and filtered like HAVING
    (
        "with a as (select customer_id, status, count(*) as n from shop.orders group by customer_id, status) "
        "select customer_id, max(n) as most from a where n > 1 group by customer_id",
        ["customer_id"],
    ),
    (
        "with a as (select status, count(*) as n from shop.orders group by status) select status, n from a where n > 1",
        ["status"],
    ),
    # DISTINCT of whole rows; DISTINCT in a CTE filtered again
    (f"select distinct * from {O}", ["amount", "customer_id", "order_date", "order_id", "status"]),
    (
        f"with d as (select distinct customer_id, status from {O}) select customer_id, count(*) as statuses "
        "from d group by customer_id",
        ["customer_id"],
    ),
    # GROUP BY ALL (every selected expression that aggregates nothing), under a running total
    (
        f"with a as (select customer_id, order_date, count(*) as n from {O} group by all) "
        "select customer_id, order_date, sum(n) over (partition by customer_id order by order_date) as running from a",
        ["customer_id"],
    ),
    # parenthesised set-operation operands (dbt_utils.union_relations writes them so), aggregated
    (
        f"select status, count(*) as n from ((select order_id, status from {O}) union all "
        "(select customer_id, name from shop.customers)) u group by status",
        ["status"],
    ),
]


@pytest.mark.parametrize("sql, partition", ACCEPTED)
def test_stacked_queries_over_one_table_partitioned_alike_are_recomputed_by_partition(view, rendered, sql, partition):
    definition = view(sql)
    assert definition.view_class is ViewClass.PER_PARTITION
    assert [p.name for p in definition.partition_query.partition_by] == partition
    assert len(definition.partition_query.partition_columns) == len(partition)
    rendered(definition)


def test_group_by_all_is_written_out_in_the_query_recomputed(view, rendered):
    definition = view(
        f"with a as (select customer_id, order_date, count(*) as n, max(amount) as most from {O} group by all) "
        "select customer_id, order_date, n, sum(n) over (partition by customer_id order by order_date) as running from a"
    )
    sql = rendered(definition)
    assert "GROUP BY ALL" not in sql.upper()
    assert "GROUP BY `customer_id`, `order_date`)" in sql, sql


def test_group_by_all_beside_a_star_keeps_the_other_classes_answer():
    statement = sqlglot.parse_one(
        f"select *, count(*) over (partition by customer_id) as n from (select *, count(*) as c from {O} group by all) a",
        read="spark",
    )
    with pytest.raises(NotPartitionwise):
        analyze_partitionwise(statement, Resolver(MASTERS).master)


def test_the_template_reads_the_source_given_and_breaks_ties_by_the_key(view, rendered):
    definition = view(ACCEPTED[0][0])
    sql = rendered(definition, sources={"orders": "(select * from shop.orders where x)"})
    # the master's rows come from the source, under the alias the query reads them by
    assert "FROM (SELECT * FROM `shop`.`orders` WHERE `x`) AS `orders`" in sql
    # ROW_NUMBER's ties are broken by the master's key
    assert "ORDER BY `order_id` DESC, `order_id`" not in sql  # (already the key: nothing appended)
    assert definition.partition_query.tie_broken is False
    tied = view(ACCEPTED[0][0].replace("order by order_id desc", "order by amount desc"))
    assert "ORDER BY `amount` DESC, `orders`.`order_id`)" in rendered(tied)
    assert tied.partition_query.tie_broken is True


def test_ties_over_grouped_rows_are_broken_by_the_group_keys(view, rendered):
    definition = view(
        f"select customer_id, status, row_number() over (partition by customer_id order by count(*) desc) as r "
        f"from {O} group by customer_id, status"
    )
    assert "ORDER BY COUNT(*) DESC, `customer_id`, `status`)" in rendered(definition)


def test_a_table_joined_on_its_whole_key_adds_no_key_to_the_rows_of_the_join(view, rendered):
    # each order matches one row of its lines' summary at most: the orders' key tells the joined
    # rows apart (jaffle-shop's orders model), though the summary's key is not selected
    definition = view(
        "with per as (select order_id, count(*) as n from shop.order_lines group by order_id), "
        "b as (select o.*, per.n from shop.orders o left join per on o.order_id = per.order_id) "
        "select *, row_number() over (partition by customer_id order by order_date) as k from b"
    )
    assert "ORDER BY `order_date`, `b`.`order_id`) AS `k`" in rendered(definition)
    # joined on part of its key (the lines of each order): no key known, the ties broken by every
    # column of the rows (rows equal in all of them are interchangeable to the window)
    lines = view(
        "with b as (select o.*, l.quantity from shop.orders o left join shop.order_lines l on l.order_id = o.order_id) "
        "select *, row_number() over (partition by customer_id order by order_date) as k from b"
    )
    assert (
        "ORDER BY `order_date`, `b`.`order_id`, `b`.`customer_id`, `b`.`status`, `b`.`amount`, `b`.`quantity`) AS `k`"
        in rendered(lines)
    )


def test_a_partition_column_the_outer_query_does_not_select_is_stored_hidden(view, rendered):
    definition = view(f"select count(*) as n from {O} group by status")
    assert definition.view_class is ViewClass.PER_PARTITION
    (hidden,) = definition.hidden_columns
    assert hidden.purpose is HiddenPurpose.PARTITION and definition.partition_query.partition_columns == (hidden.name,)
    assert definition.stored_columns == ("n", hidden.name)
    assert f"`status` AS `{hidden.name}`" in rendered(definition)
    assert f"`{hidden.name}`" not in rendered(definition, include_hidden=False)


def test_a_partition_column_no_level_above_selects_is_selected_up_from_where_it_is(view, rendered):
    # the column added to each level between the outer query and one that reads it (a window's level
    # reading it from a derived table; a grouped level by its group key; a star carries it up)
    definition = view(
        f"select n from (select n, sum(n) over (partition by customer_id) as s from (select customer_id, "
        f"count(*) over (partition by customer_id) as n from {O}) as a) as b where s > 0"
    )
    (hidden,) = definition.hidden_columns
    assert definition.stored_columns == ("n", hidden.name)
    text = rendered(definition)
    assert f"SELECT `n`, `b`.`{hidden.name}` AS `{hidden.name}` FROM (SELECT `n`, SUM(`n`)" in text
    assert f"`a`.`customer_id` AS `{hidden.name}` FROM (SELECT `customer_id`, COUNT(*)" in text
    assert f"`{hidden.name}`" not in rendered(definition, include_hidden=False).split("FROM")[0]
    grouped = view(
        f"select n from (select * from (select count(*) as n from {O} group by customer_id) as a where n > 1) as b"
    )
    (hidden,) = grouped.hidden_columns
    text = rendered(grouped)
    assert f"COUNT(*) AS `n`, `customer_id` AS `{hidden.name}` FROM" in text  # the group key, under b's star
    assert text.count(f"AS `{hidden.name}`") == 2
    assert text.startswith(f"SELECT `n`, `b`.`{hidden.name}` AS `{hidden.name}` FROM (SELECT * FROM")


def test_a_star_of_the_outer_query_is_written_out_when_a_column_is_selected_up_to_it(view, rendered):
    # (the star would select the hidden column in the middle of the stored columns)
    definition = view(
        f"with final as (select o.order_id || '-' || row_number() over (partition by o.customer_id order by "
        f"o.order_id) as line, c.name from {O} o left join shop.customers c on c.customer_id = o.customer_id) "
        "select * from final"
    )
    (hidden,) = definition.hidden_columns
    assert definition.stored_columns == ("line", "name", hidden.name)
    assert rendered(definition).startswith(
        f"SELECT `final`.`line`, `final`.`name`, `final`.`{hidden.name}` AS `{hidden.name}` FROM (SELECT"
    )
    assert f"`o`.`customer_id` AS `{hidden.name}` FROM" in rendered(definition)


def test_the_columns_read_are_the_master_columns_the_query_names(view):
    definition = view(ACCEPTED[3][0])
    assert definition.referenced_columns == {"orders": frozenset({"customer_id", "status"})}
    assert view(ACCEPTED[0][0]).referenced_columns["orders"] == frozenset(
        {"order_id", "customer_id", "order_date", "status", "amount"}
    )


@pytest.mark.parametrize(
    "sql, construct, reason",
    [
        # two levels partitioned by different columns
        (
            f"select customer_id, status, sum(n) over (partition by status) as s from (select customer_id, status, "
            f"count(*) over (partition by customer_id) as n from {O}) as t",
            "SUM(n) OVER (PARTITION BY status)",
            "share no PARTITION BY column",
        ),
        # order-dependent windows over rows without a known key and with an unnamed column
        (
            f"select customer_id, row_number() over (partition by customer_id order by n) as r from "
            f"(select customer_id, count(*) over (partition by customer_id) as n, upper(status) from {O}) as t",
            "ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY n)",
            "no unique column to break the ties",
        ),
        (
            f"select * from (select customer_id, row_number() over (partition by customer_id) as r from {O}) as t "
            "where r = 1 and customer_id > 0",
            "ROW_NUMBER() OVER (PARTITION BY customer_id)",
            "needs ORDER BY",
        ),
        # ungrouped column in a grouped level
        (
            f"with a as (select customer_id, amount, count(*) as n from {O} group by customer_id) "
            "select customer_id, sum(n) over (partition by customer_id) as s from a",
            "amount",
            "neither aggregated nor in GROUP BY",
        ),
        # the partition is lost on the way up: NULL-extended
        (
            f"select t.n from (select 1 as one) as c left join (select customer_id, count(*) over "
            f"(partition by customer_id) as n from {O}) as t on t.n = c.one",
            "orders.customer_id",
            "no query it reads selects it",
        ),
        # still refused wherever they are
        (
            f"select customer_id, s from (select customer_id, sum(amount) over (partition by customer_id) as s, "
            f"rand() as r from {O}) as t",
            "RAND()",
            "non-deterministic",
        ),
        (
            f"select customer_id, collect_list(status) over (partition by customer_id order by n) as l from (select "
            f"customer_id, status, count(*) over (partition by customer_id) as n from {O}) as t",
            "COLLECT_LIST(status) OVER (PARTITION BY customer_id ORDER BY n)",
            "depends on the order",
        ),
    ],
)
def test_refusals_name_the_construct(view, sql, construct, reason):
    with pytest.raises(UnsupportedViewError) as caught:
        view(sql)
    assert caught.value.construct == construct, str(caught.value)
    assert reason in str(caught.value)


MULTI = [
    # a window over a join on the partition column (the view does not select it: stored hidden)
    (
        f"select t.order_id, sum(prev) over (partition by t.customer_id) as s from (select order_id, customer_id, "
        f"lag(amount) over (partition by customer_id order by order_id) as prev from {O}) as t "
        "join shop.customers c on t.customer_id = c.customer_id",
        {"orders": ["customer_id"], "c": ["customer_id"]},
    ),
    # an aggregating CTE joined back on its group key, and aggregated again
    (
        "with per as (select customer_id, count(*) as n from shop.orders group by customer_id) "
        "select c.customer_id, count(*) as k, max(per.n) as n from shop.customers c "
        "join per on per.customer_id = c.customer_id group by c.customer_id",
        {"c": ["customer_id"], "orders": ["customer_id"]},
    ),
    # the same CTE twice, LEFT joined: each reference reads the table under an alias of its own
    (
        "with per as (select customer_id, count(*) as n from shop.orders group by customer_id) "
        "select c.customer_id, per.n, p2.n as m from shop.customers c left join per on per.customer_id = c.customer_id "
        "left join per p2 on p2.customer_id = c.customer_id",
        {"c": ["customer_id"], "orders": ["customer_id"], "orders_2": ["customer_id"]},
    ),
    # UNION ALL of two tables, aggregated; UNION (distinct) of them
    (
        "with u as (select customer_id, amount from shop.orders union all select customer_id, 0 from shop.customers) "
        "select customer_id, sum(amount) as amount, count(*) as n from u group by customer_id",
        {"orders": ["customer_id"], "customers": ["customer_id"]},
    ),
    # UNION (distinct) and INTERSECT at the top, FULL JOIN by its key (COALESCE carries it), USING
    (
        "select customer_id from shop.orders union select customer_id from shop.customers",
        {"orders": ["customer_id"], "customers": ["customer_id"]},
    ),
    (
        "select customer_id, status from shop.orders intersect select customer_id, segment from shop.customers",
        {"orders": ["customer_id", "status"], "customers": ["customer_id", "segment"]},
    ),
    (
        "select coalesce(o.customer_id, c.customer_id) as customer_id, count(o.order_id) as orders from shop.orders o "
        "full outer join shop.customers c on o.customer_id = c.customer_id group by coalesce(o.customer_id, c.customer_id)",
        {"o": ["customer_id"], "c": ["customer_id"]},
    ),
    (
        "select customer_id, c.name, count(*) over (partition by customer_id) as n from shop.orders o "
        "join shop.customers c using (customer_id)",
        {"o": ["customer_id"], "c": ["customer_id"]},
    ),
    # grouped by a key and a column of its table that the tables joined on the key do not have
    # (name): partitioned by the key alone, whose partitions hold whole groups
    (
        "with u as (select customer_id, amount from shop.orders union all select customer_id, 0 from shop.customers) "
        "select c.customer_id, c.name, sum(u.amount) as amount, count(u.customer_id) as n from shop.customers c "
        "left join u on u.customer_id = c.customer_id group by c.customer_id, c.name",
        {"c": ["customer_id"], "orders": ["customer_id"], "customers": ["customer_id"]},
    ),
]


@pytest.mark.parametrize("sql, partitions", [m for m in MULTI if m[1] is not None])
def test_queries_over_several_tables_partitioned_alike(view, rendered, sql, partitions):
    definition = view(sql)
    assert definition.view_class is ViewClass.PER_PARTITION
    found = {a: [p.name for p in e] for a, e in definition.partition_query.partitions.items()}
    assert found == partitions
    assert sorted(definition.aliases) == sorted(partitions)
    sql = rendered(definition, sources={a: f"(select * from x_{a})" for a in partitions})
    for alias in partitions:
        assert f"(SELECT * FROM `x_{alias}`) AS `{alias}`" in sql
    assert "WITH" not in sql  # every CTE reference is a derived table of its own


def test_a_table_not_joined_on_the_partition_keeps_the_other_classes_refusal(view):
    with pytest.raises(UnsupportedViewError, match="is not an equality of one of its group keys"):
        view(
            "with per as (select customer_id, count(*) as n from shop.orders group by customer_id) "
            "select c.customer_id, per.n from shop.customers c join per on per.n = c.customer_id"
        )
    with pytest.raises(UnsupportedViewError, match="full outer join null-extends"):  # the key not coalesced
        view(
            "select o.customer_id, count(*) as n from shop.orders o full outer join shop.customers c "
            "on o.customer_id = c.customer_id group by o.customer_id"
        )


def test_a_table_joined_to_a_partitioned_one_by_another_column_is_a_lookup(view, rendered):
    # the lines of each order ranked by category: each line's product joined by product_id
    definition = view(
        "select l.order_id, p.category, count(*) as n, "
        "rank() over (partition by l.order_id order by count(*) desc) as r "
        "from shop.order_lines l join shop.orders o on o.order_id = l.order_id "
        "join shop.products p on p.product_id = l.product_id group by l.order_id, p.category"
    )
    assert definition.view_class is ViewClass.PER_PARTITION
    query = definition.partition_query
    assert {a: [p.name for p in e] for a, e in query.partitions.items()} == {"l": ["order_id"], "o": ["order_id"]}
    assert dict(query.lookups) == {"p": Lookup("product_id", "l", column_node("l", "product_id"))}
    rendered(definition)


def test_a_chain_of_lookups_reaches_a_partitioned_table(view, rendered):
    # the customers matched to the orders by customer_id, the countries to the customers by country
    chained = (
        "select o.order_id, o.status, k.region, count(*) over (partition by o.status) as n "
        "from shop.orders o join shop.customers c on c.customer_id = o.customer_id "
        "join shop.countries k on k.country = c.country"
    )
    definition = view(chained)
    assert definition.view_class is ViewClass.PER_PARTITION
    assert dict(definition.partition_query.lookups) == {
        "c": Lookup("customer_id", "o", column_node("o", "customer_id")),
        "k": Lookup("country", "c", column_node("c", "country")),
    }
    rendered(definition)
    # the facts matched to a dimension partitioned by one of its columns: read whole, a changed
    # order recomputing the country of its customer
    definition = view(
        "select o.order_id, count(*) over (partition by c.country) as n from shop.orders o "
        "join shop.customers c on o.customer_id = c.customer_id"
    )
    assert dict(definition.partition_query.lookups) == {
        "o": Lookup("customer_id", "c", column_node("c", "customer_id"))
    }
    # a chain from the preserved side of a RIGHT JOIN's partition (no grouping: each product a partition)
    definition = view(
        "with j as (select c.customer_id from shop.customers c join shop.countries n "
        "on c.country = n.country) select o.order_id, p.name from shop.orders o join j "
        "on j.customer_id = o.customer_id right join shop.products p on p.product_id = o.order_id"
    )
    assert sorted(definition.partition_query.lookups) == ["c", "n"]
    assert sorted(definition.partition_query.partitions) == ["o", "p"]
    rendered(definition)


def test_lookups_grouped_or_windowed_by_the_column_matching_them_keep_their_own_partition(view, rendered):
    # the latest order per customer, matched to the lines partitioned by order: a changed order
    # changes its customer's rows of the CTE alone, which the lines of that customer's orders read
    latest = (
        "with latest as (select *, row_number() over (partition by customer_id order by order_date desc) as rn "
        "from shop.orders), spend as (select customer_id, sum(amount) as spent from shop.orders group by customer_id) "
        "select c.customer_id, c.name, l.order_id as latest_order, s.spent, "
        "rank() over (partition by c.country order by s.spent desc) as place "
        "from shop.customers c left join latest l on l.customer_id = c.customer_id and l.rn = 1 "
        "left join spend s on s.customer_id = c.customer_id"
    )
    definition = view(latest)
    assert definition.view_class is ViewClass.PER_PARTITION
    query = definition.partition_query
    assert {a: [p.name for p in e] for a, e in query.partitions.items()} == {"c": ["country"]}
    assert dict(query.lookups) == {
        "orders": Lookup("customer_id", "c", column_node("c", "customer_id")),
        "orders_2": Lookup("customer_id", "c", column_node("c", "customer_id")),
    }
    rendered(definition)
    # a dimension of such a lookup, matched to it inside the grouped CTE
    definition = view(
        "with per_customer as (select c.customer_id, max(k.region) as region, count(*) as n from shop.customers c "
        "join shop.countries k on k.country = c.country group by c.customer_id) "
        "select o.order_id, p.region, count(*) over (partition by o.order_id) as n "
        "from shop.orders o join per_customer p on p.customer_id = o.customer_id"
    )
    assert dict(definition.partition_query.lookups) == {
        "c": Lookup("customer_id", "o", column_node("o", "customer_id")),
        "k": Lookup("country", "c", column_node("c", "country")),
    }
    rendered(definition)


@pytest.mark.parametrize(
    "sql",
    [
        # windowed by another column than the one matching it: a changed order changes the counts
        # of every order of its day, whatever their customer
        "with daily as (select *, count(*) over (partition by order_date) as n from shop.orders) "
        "select c.customer_id, c.name, d.n, rank() over (partition by c.country order by d.n) as r "
        "from shop.customers c join daily d on d.customer_id = c.customer_id",
        # grouped by a column, matched by an aggregate of another (which carries no column)
        "with last_status as (select customer_id, max(status) as status from shop.orders group by customer_id) "
        "select c.customer_id, count(*) over (partition by c.country) as k "
        "from shop.customers c join last_status p on p.status = c.segment",
    ],
)
def test_lookups_grouped_by_another_column_than_the_one_matching_them_are_refused(view, sql):
    with pytest.raises(UnsupportedViewError):
        view(sql)


def test_a_table_matched_to_no_partitioned_table_is_refused(view):
    crossed = (
        "select o.order_id, o.status, k.region, count(*) over (partition by o.status) as n "
        "from shop.orders o join shop.countries k on k.region <> o.status"
    )
    with pytest.raises(UnsupportedViewError, match="nor matched by a column to a table that is"):
        analyze_partitionwise(sqlglot.parse_one(crossed, read="spark"), Resolver(MASTERS).master)


WINDOW = "count(*) over (partition by o.customer_id) as n"


def test_semi_joins_match_their_subquery_rows_to_the_partitions(view, rendered):
    # IN by the partition column: the subquery's table partitioned by its column too
    definition = view(
        f"select o.order_id, {WINDOW} from shop.orders o "
        "where o.customer_id in (select c.customer_id from shop.customers c where c.country = 'NL')"
    )
    assert definition.partition_query.partitions["c"][0] == column_node("c", "customer_id")
    assert not definition.partition_query.lookups
    # EXISTS correlated by another column: a lookup matched by it; NOT EXISTS alike
    for exists in ("exists", "not exists"):
        definition = view(
            f"select o.order_id, {WINDOW} from shop.orders o "
            f"where o.amount > 0 and {exists} (select 1 from shop.order_lines l where l.order_id = o.order_id "
            "and l.quantity > 1)"
        )
        assert dict(definition.partition_query.lookups) == {"l": Lookup("order_id", "o", column_node("o", "order_id"))}
        assert f"{exists.upper()}(SELECT 1 FROM `shop`.`order_lines` AS `l`" in rendered(definition)
    # IN by an expression over the partitioned table's columns
    definition = view(
        f"select o.order_id, {WINDOW} from shop.orders o where upper(o.status) in (select k.region from shop.countries k)"
    )
    lookup = definition.partition_query.lookups["k"]
    assert (lookup.column, lookup.through) == ("region", "o")
    assert lookup.through_value.sql("spark") == "UPPER(`o`.`status`)"
    rendered(definition)


def test_not_in_matches_a_lookup_null_sensitively(view, rendered):
    # a NULL in the subquery empties the view, a NULL value depends on whether it has rows: never
    # partitioned by the subquery's column, a lookup whose changes also reach the NULL values
    definition = view(
        f"select o.order_id, {WINDOW} from shop.orders o where o.customer_id not in "
        "(select c.customer_id from shop.customers c where c.country = 'NL')"
    )
    assert dict(definition.partition_query.lookups) == {
        "c": Lookup("customer_id", "o", column_node("o", "customer_id"), null_sensitive=True)
    }
    rendered(definition)
    # a value of a NULL-extended row: no row of its table holds the partition of its answer
    with pytest.raises(NotPartitionwise):  # (the other classes' refusal stands)
        analyze_partitionwise(
            sqlglot.parse_one(
                "select o.order_id, c.name from shop.orders o left join shop.customers c on c.customer_id = o.customer_id "
                "where c.country not in (select k.country from shop.countries k)",
                read="spark",
            ),
            Resolver(MASTERS).master,
        )


def test_in_and_exists_elsewhere_than_a_where_conjunct_match_their_rows_too(view, rendered):
    # EXISTS under OR: its correlation; IN selected (TRUE, FALSE or NULL): a lookup NULLs and all
    definition = view(
        f"select o.order_id, {WINDOW}, upper(o.status) in (select k.region from shop.countries k) as regional "
        "from shop.orders o where o.amount > 0 or exists (select 1 from shop.order_lines l where l.order_id = o.order_id)"
    )
    lookups = definition.partition_query.lookups
    assert lookups["l"] == Lookup("order_id", "o", column_node("o", "order_id"))
    assert lookups["k"].null_sensitive and lookups["k"].through_value.sql("spark") == "UPPER(`o`.`status`)"
    rendered(definition)


def test_a_correlated_reference_follows_its_table_renamed_in_a_cte_used_twice(view, rendered):
    definition = view(
        "with busy as (select o.* from shop.orders o where exists "
        "(select 1 from shop.order_lines l where l.order_id = o.order_id)) "
        "select a.customer_id, count(*) as n from busy a join busy b on a.customer_id = b.customer_id "
        "group by a.customer_id"
    )
    assert [o.alias for o in definition.occurrences] == ["o", "l", "o_2", "l_2"]
    sql = rendered(definition)
    assert "`l_2`.`order_id` = `o_2`.`order_id`" in sql and "`l`.`order_id` = `o`.`order_id`" in sql


def test_scalar_subqueries_correlated_by_equalities_are_matched_like_joins(view, rendered):
    # an aggregate per order of its lines: partitioned by the order, the lines too
    definition = view(
        "select o.order_id, o.status, (select max(l.quantity) from shop.order_lines l where l.order_id = o.order_id "
        "and l.unit_price > o.amount) as most from shop.orders o where o.amount > (select avg(l.unit_price) "
        "from shop.order_lines l where l.order_id = o.order_id)"
    )
    assert definition.view_class is ViewClass.PER_PARTITION
    query = definition.partition_query
    assert sorted(query.partitions) == ["l", "l_2", "o"] and not query.lookups
    rendered(definition)
    # an aggregate per customer of the orders, beside a window per status: the orders read again a
    # lookup whose aggregate partitions them by the customer matching them
    definition = view(
        "select o.order_id, (select count(*) from shop.orders o2 where o2.customer_id = o.customer_id) as n, "
        "row_number() over (partition by o.status order by o.order_id) as r from shop.orders o"
    )
    assert dict(definition.partition_query.lookups) == {
        "o2": Lookup("customer_id", "o", column_node("o", "customer_id"))
    }
    # a value looked up (no aggregate: one row at most, else Spark fails as it would on the query)
    definition = view(
        f"select o.order_id, {WINDOW}, (select c.name from shop.customers c where c.customer_id = o.customer_id) "
        "as name from shop.orders o"
    )
    assert sorted(definition.partition_query.partitions) == ["c", "o"]


@pytest.mark.parametrize(
    "sql",
    [
        # scalar subqueries not correlated (in SELECT, in WHERE), or by no equality
        f"select o.order_id, {WINDOW}, (select max(quantity) from shop.order_lines) as q from shop.orders o",
        f"select o.order_id, {WINDOW} from shop.orders o where o.amount > (select avg(unit_price) from shop.order_lines)",
        f"select o.order_id, {WINDOW}, (select max(l.quantity) from shop.order_lines l where l.order_id > o.order_id) "
        "as q from shop.orders o",
    ],
)
def test_scalar_subqueries_not_correlated_by_an_equality_keep_their_refusal(view, sql):
    with pytest.raises(UnsupportedViewError, match="subqueries in SELECT, WHERE or ON"):
        view(sql)
    with pytest.raises(UnsupportedViewError, match="not correlated by an equality"):
        analyze_partitionwise(sqlglot.parse_one(sql, read="spark"), Resolver(MASTERS).master)


@pytest.mark.parametrize(
    "sql, partition",
    [
        # a LATERAL VIEW: nothing partitions, so each order is a partition of its own
        (f"select o.order_id, t.tag from {O} o lateral view outer explode(split(o.status, ',')) t as tag", "order_id"),
        # grouped over the rows generated; a generator as a SELECT column, several named
        (
            f"select customer_id, tag, count(*) as n from {O} lateral view explode(split(status, ',')) t as tag "
            "group by customer_id, tag",
            "customer_id",
        ),
        (f"select order_id, posexplode(split(status, ',')) as (position, tag) from {O}", "order_id"),
        (
            f"select customer_id, count(*) as n from (select customer_id, explode(split(status, ',')) as tag "
            f"from {O}) g group by customer_id",
            "customer_id",
        ),
    ],
    ids=["lateral view", "grouped", "select column", "derived table"],
)
def test_rows_generated_from_each_row_are_recomputed_with_it(view, rendered, sql, partition):
    definition = view(sql)
    assert definition.view_class is ViewClass.PER_PARTITION
    assert [c.name for c in definition.partition_query.partition_by] == [partition]
    rendered(definition)


def test_ties_among_the_rows_one_row_generates_are_broken_by_the_position_or_their_values(view, rendered):
    sql = (
        f"select order_id, tag, row_number() over (partition by customer_id order by tag) as k from {O} "
        "lateral view posexplode(split(status, ',')) t as position, tag"
    )
    assert "ORDER BY `tag`, `orders`.`order_id`, `t`.`position`)" in rendered(view(sql))
    # explode: no position, the rows one row generates told apart by what they hold
    exploded = sql.replace("posexplode", "explode").replace("t as position, tag", "t as tag")
    assert "ORDER BY `tag`, `orders`.`order_id`) AS `k`" in rendered(view(exploded))


@pytest.mark.parametrize(
    "sql, construct",
    [
        (f"select o.order_id, size(explode(split(o.status, ','))) as n from {O} o", "EXPLODE("),
        (f"select o.order_id, explode(split(o.status, ',')) from {O} o", "EXPLODE("),
        (f"select o.customer_id, explode(array(count(*))) as n from {O} o group by o.customer_id", "EXPLODE("),
        (f"select o.order_id from {O} o lateral view explode(split(o.status, ',')) t", "LATERAL VIEW"),
    ],
    ids=["inside an expression", "unnamed", "beside a grouping", "columns unnamed"],
)
def test_generators_where_spark_runs_none_or_unnamed_are_refused(view, sql, construct):
    with pytest.raises(UnsupportedViewError) as refused:
        view(sql)
    assert refused.value.construct.upper().startswith(construct)


OLC = "shop.orders o left join shop.customers c on o.customer_id = c.customer_id"


@pytest.mark.parametrize(
    "sql",
    [
        "select o.order_id from shop.orders o left join shop.customers c "
        "on o.customer_id = c.customer_id and o.status = 'open'",
        f"select o.order_id from {OLC} where c.country = 'NL' or c.country is null",
        f"select o.order_id from {OLC} where c.customer_id is null",
        f"select o.order_id from {OLC} join shop.countries n on n.country <=> c.country",
        "with j as (select c.customer_id from shop.customers c join shop.countries n "
        "on c.country = n.country) select o.order_id from shop.orders o left join j "
        "on j.customer_id = o.customer_id",
        "with j as (select c.customer_id from shop.customers c join shop.countries n "
        "on c.country = n.country) select o.order_id from shop.orders o right join j "
        "on j.customer_id = o.customer_id",
        "with u as (select order_id from shop.orders union all select order_id "
        "from shop.orders) select u.order_id from u join shop.customers c on c.customer_id = u.order_id",
    ],
    ids=[
        "preserved-side filter",
        "where true for a null on the null-supplying side",
        "is null on null-supplying side",
        "inner join null-safely on null-extended table",
        "cte on the null-supplying side",
        "cte on the preserved side of a right join",
        "union all in a cte, joined",
    ],
)
def test_outer_join_shapes_the_join_classes_refuse_are_recomputed_by_a_tables_key(view, rendered, sql):
    # nothing partitions the rows: a table's key does (each row its own partition), every other table
    # joined on it or by its key to a table that is
    definition = view(sql)
    assert definition.view_class is ViewClass.PER_PARTITION
    rendered(definition)


def test_with_nothing_partitioning_the_rows_a_key_no_table_is_joined_on_keeps_the_refusal(view):
    with pytest.raises(UnsupportedViewError, match="outer join"):
        view("select o.order_id from shop.orders o left join shop.customers c on c.country = 'NL'")


@pytest.mark.parametrize(
    "sql",
    [
        "select 1 as x",
        "select cast(null as string) as command, 0 as n where 1 = 0",  # an empty table's stub
        # a date spine: rows numbered over constant rows, ties broken by every column
        "with p as (select 0 as g union all select 1 as g), n as (select p0.g * 2 + p1.g as k from p p0 "
        "cross join p p1) select date_add(date'2020-01-01', row_number() over (order by 1) - 1) as day from n",
    ],
)
def test_a_query_of_constant_rows_is_kept_as_written(view, rendered, sql):
    definition = view(sql)
    assert definition.view_class is ViewClass.PER_PARTITION and definition.occurrences == ()
    assert definition.partition_query.partition_columns == ()
    sql = rendered(definition)
    assert "ROW_NUMBER() OVER (ORDER BY 1, `n`.`k`)" in sql or "ROW_NUMBER" not in sql


def test_constant_rows_joined_to_a_table_need_no_partition_column(view, rendered):
    definition = view(
        "with labels as (select 'open' as status, 1 as rank union all select 'shipped', 2) "
        "select o.order_id, l.rank, row_number() over (partition by o.customer_id order by l.rank) as k "
        "from shop.orders o join labels l on l.status = o.status"
    )
    assert definition.view_class is ViewClass.PER_PARTITION
    assert [o.alias for o in definition.occurrences] == ["o"]
    assert "ORDER BY `l`.`rank`, `o`.`order_id`, `l`.`status`" in rendered(definition)


def test_the_columns_a_using_join_and_a_hidden_partition_column_read_are_read_from_the_tables(view):
    # (the build reads each table's columns the query reads, no more)
    definition = view(
        "select c.name, count(*) over (partition by o.order_id) as n from shop.orders o "
        "join shop.customers c using (customer_id) where o.order_id in (select p.product_id from shop.products p)"
    )
    assert definition.view_class is ViewClass.PER_PARTITION
    assert definition.referenced_columns["o"] >= {"customer_id", "order_id"}
    assert definition.referenced_columns["c"] >= {"customer_id", "name"}
    keyed = view(
        "select o1.amount from shop.orders o1 right join shop.orders o2 on o1.customer_id = o2.customer_id "
        "where o1.order_id in (select p.product_id from shop.products p)"
    )
    assert "order_id" in keyed.referenced_columns["o2"], keyed.referenced_columns


def test_a_chain_of_full_joins_using_one_column_is_partitioned_by_it(view, rendered):
    # the name alone reads the COALESCE of the sides: carried whichever side has a row
    definition = view(
        "with a as (select customer_id, count(*) as n from shop.orders group by customer_id), "
        "b as (select customer_id, max(name) as nm from shop.customers group by customer_id), "
        "d as (select distinct customer_id from shop.orders where status = 'open') "
        "select customer_id, a.n, b.nm, d.customer_id is not null as flagged "
        "from a full outer join b using (customer_id) full outer join d using (customer_id)"
    )
    assert definition.view_class is ViewClass.PER_PARTITION
    assert definition.partition_query.partition_columns == ("customer_id",)
    assert {a: [p.name for p in e] for a, e in definition.partition_query.partitions.items()} == {
        "orders": ["customer_id"],
        "customers": ["customer_id"],
        "orders_2": ["customer_id"],
    }
    rendered(definition)
    # not selected: stored hidden, read by its name alone
    hidden = view("select o.order_id, c.name from shop.orders o full outer join shop.customers c using (customer_id)")
    assert hidden.partition_query.partition_columns == ("_mv_p1",)
    assert "`customer_id` AS `_mv_p1`" in rendered(hidden)


def test_a_full_join_nothing_groups_is_partitioned_by_its_key_stored_as_the_coalesce_of_its_sides(view, rendered):
    definition = view(
        "select o.order_id, c.name from shop.orders o full outer join shop.customers c on c.customer_id = o.customer_id"
    )
    query = definition.partition_query
    assert query.partition_columns == ("_mv_p1",)
    assert {a: [p.name for p in e] for a, e in query.partitions.items()} == {
        "o": ["customer_id"],
        "c": ["customer_id"],
    }
    assert "COALESCE(`o`.`customer_id`, `c`.`customer_id`) AS `_mv_p1`" in rendered(definition)
    assert definition.referenced_columns["o"] >= {"customer_id", "order_id"}


def test_a_full_join_on_columns_no_key_holds_is_partitioned_by_the_joined_value(view, rendered):
    # neither table is joined by its key: the rows of one value of the joined column (NULL included,
    # whose rows match nothing) are the join of the two tables' rows of it
    definition = view(
        "select o.order_id, c.name from shop.orders o full outer join shop.customers c "
        "on c.country = o.status and c.segment = o.status"
    )
    query = definition.partition_query
    assert {a: [p.name for p in e] for a, e in query.partitions.items()} == {"o": ["status"], "c": ["country"]}
    assert "COALESCE(`o`.`status`, `c`.`country`) AS `_mv_p1`" in rendered(definition)


def test_a_star_over_joins_using_columns_selects_them_once_first(view):
    # Spark's order: each join's USING columns, then the other columns of what it joins
    definition = view(
        "select *, count(*) over (partition by customer_id) as n from shop.orders o "
        "join shop.customers c using (customer_id) join shop.countries k using (country)"
    )
    assert [o.name for o in definition.outputs] == [
        "country", "customer_id", "order_id", "order_date", "status", "amount", "name", "segment", "region", "n",
    ]  # fmt: skip
    assert definition.partition_query.partition_columns == ("customer_id",)
    # FULL JOIN: the key is the sides' COALESCE, partitioned by it; a qualified star keeps its key
    full = view(
        "with a as (select customer_id, count(*) as n from shop.orders group by customer_id), "
        "b as (select customer_id, max(name) as nm from shop.customers group by customer_id) "
        "select * from a full outer join b using (customer_id)"
    )
    assert [o.name for o in full.outputs] == ["customer_id", "n", "nm"]
    assert full.partition_query.partition_columns == ("customer_id",)
    qualified = view(
        "select c.*, o.order_id, count(*) over (partition by customer_id) as n from shop.orders o "
        "join shop.customers c using (customer_id)"
    )
    assert [o.name for o in qualified.outputs][:2] == ["customer_id", "name"]


def test_a_cte_reads_the_table_of_its_own_name_not_itself(view, rendered):
    # (a CTE named as the table it reads, unqualified: its body reads the table, the query the CTE)
    masters = {
        **MASTERS,
        "orders": MASTERS["shop.orders"].__class__("orders", MASTERS["shop.orders"].columns, ("order_id",)),
    }
    from dbt_incremental_mv.analysis import analyze_view

    definition = analyze_view(
        "with orders as (select * from orders where amount > 0), "
        "latest as (select *, row_number() over (partition by customer_id order by order_id desc) as rn from orders) "
        "select customer_id, count(*) as n from latest where rn <= 2 group by customer_id",
        masters,
    )
    assert definition.view_class is ViewClass.PER_PARTITION
    assert [o.master.name for o in definition.occurrences] == ["orders"]
    rendered(definition)


def test_explain_names_the_lookups_and_a_query_of_constant_rows(view):
    from dbt_incremental_mv.refresh.operations.explain import _class_of

    text = _class_of(
        view(
            f"select o.order_id, {WINDOW} from shop.orders o where o.status not in (select k.region from shop.countries k) "
            "and exists (select 1 from shop.order_lines l where l.order_id = o.order_id)"
        )
    )
    assert "k (matched by k.region = o.status, NULLs too: NOT IN or an IN not filtering)" in text, text
    assert "l (matched by l.order_id = o.order_id)" in text, text
    assert "reads no table: its rows never change" in _class_of(view("select 1 as x"))


# the jaffle shop's customers: payments LEFT JOIN orders grouped by the orders' customer, joined to
# the customers on it (the group of payments matching no order is discarded by that join)
CUSTOMER_LINES = (
    "with customer_lines as (select o.customer_id, sum(l.quantity) as quantity from shop.order_lines l "
    "left join shop.orders o on l.order_id = o.order_id group by o.customer_id), "
    "customer_orders as (select customer_id, count(*) as n from shop.orders group by customer_id) "
    "select c.customer_id, c.name, co.n, cl.quantity from shop.customers c "
    "left join customer_orders co on c.customer_id = co.customer_id "
    "left join customer_lines cl on c.customer_id = cl.customer_id"
)


def _joins(definition):
    query = definition.partition_query.query
    return [(j.this.alias_or_name, (j.args.get("side") or "").upper()) for j in query.find_all(sqlglot.exp.Join)]


@pytest.mark.parametrize(
    "sql, converted",
    [
        (CUSTOMER_LINES, "o"),
        # a window partitioned by the null-extended column, the rows then inner-joined on it
        (
            "with ranked as (select l.order_id, l.line_no, o.customer_id, row_number() over "
            "(partition by o.customer_id order by l.order_id, l.line_no) as position from shop.order_lines l "
            "left join shop.orders o on o.order_id = l.order_id) "
            "select c.name, r.order_id, r.position from shop.customers c join ranked r on r.customer_id = c.customer_id",
            "o",
        ),
        # discarded two levels up: the column selected as it is by a query grouping by it
        (
            "with per_line as (select o.customer_id, l.quantity from shop.order_lines l "
            "left join shop.orders o on l.order_id = o.order_id), "
            "per_customer as (select customer_id, sum(quantity) as quantity from per_line group by customer_id) "
            "select c.customer_id, p.quantity from shop.customers c join per_customer p on p.customer_id = c.customer_id",
            "o",
        ),
    ],
    ids=["grouped, left joined on it", "windowed, inner joined on it", "through a grouping query"],
)
def test_a_left_join_whose_null_extended_rows_are_discarded_above_is_an_inner_join(view, rendered, sql, converted):
    definition = view(sql)
    assert definition.view_class is ViewClass.PER_PARTITION
    assert [p.name for p in definition.partition_query.partition_by] == ["customer_id"]
    assert (converted, "") in _joins(definition)
    assert "l" in definition.partition_query.lookups  # the lines matched to their order's customer
    rendered(definition)


@pytest.mark.parametrize(
    "sql",
    [
        # the groups are the preserved side: the group of lines matching no order is a view row
        "with cl as (select o.customer_id, sum(l.quantity) as quantity from shop.order_lines l "
        "left join shop.orders o on l.order_id = o.order_id group by o.customer_id) "
        "select cl.customer_id, cl.quantity, c.name from cl left join shop.customers c on c.customer_id = cl.customer_id",
        # joined null-safely: the NULL group matches a customer of NULL key
        "with cl as (select o.customer_id, sum(l.quantity) as quantity from shop.order_lines l "
        "left join shop.orders o on l.order_id = o.order_id group by o.customer_id) "
        "select c.customer_id, cl.quantity from shop.customers c join cl on c.customer_id <=> cl.customer_id",
        # joined on an expression that is not NULL where the column is
        "with cl as (select o.customer_id, sum(l.quantity) as quantity from shop.order_lines l "
        "left join shop.orders o on l.order_id = o.order_id group by o.customer_id) "
        "select c.name, cl.quantity from shop.customers c join cl on c.customer_id = coalesce(cl.customer_id, 0)",
    ],
    ids=["preserved side", "null-safe equality", "coalesced"],
)
def test_a_left_join_whose_null_extended_rows_reach_the_view_stays_outer(view, sql):
    # the group of lines matching no order is in the view: partitioning by the orders' customer would
    # lose it (the lines of no order are in no partition)
    with pytest.raises(UnsupportedViewError, match="share no column they all group by"):
        analyze_partitionwise(parsed_query(sql, None), Resolver(MASTERS).master)
    with pytest.raises(UnsupportedViewError):
        view(sql)


def test_a_where_conjunct_no_null_satisfies_makes_a_left_join_inner(view):
    definition = view(
        "select o.order_id, c.segment, count(*) over (partition by c.country) as n from shop.orders o "
        "left join shop.customers c on o.customer_id = c.customer_id where c.segment = 'retail'"
    )
    assert definition.view_class is ViewClass.PER_PARTITION
    assert ("c", "") in _joins(definition)


def test_a_table_joined_by_a_column_equal_to_an_expression_of_another_is_a_lookup_matched_by_it(view, rendered):
    # the customers ranked per country, each with the product whose id is their key's last digits
    definition = view(
        "select c.customer_id, p.name, row_number() over (partition by c.country order by c.customer_id) as position "
        "from shop.customers c join shop.products p on p.product_id = c.customer_id % 100"
    )
    assert definition.view_class is ViewClass.PER_PARTITION
    lookup = definition.partition_query.lookups["p"]
    assert (lookup.column, lookup.through) == ("product_id", "c")
    assert lookup.through_value.sql("spark") == "`c`.`customer_id` % 100"
    rendered(definition)
    # an expression over two tables' columns matches no one table's rows: refused as before
    over_two = (
        "select c.customer_id, p.name, row_number() over (partition by c.country order by c.customer_id) as n "
        "from shop.customers c join shop.orders o on o.customer_id = c.customer_id "
        "join shop.products p on p.product_id = c.customer_id + o.order_id"
    )
    with pytest.raises(UnsupportedViewError, match="shop.products: the query partitions its rows by"):
        analyze_partitionwise(parsed_query(over_two, None), Resolver(MASTERS).master)


@pytest.mark.parametrize(
    "sql, inner",
    [
        (f"select o.order_id, c.name from {OLC} where c.country = 'NL'", ["c"]),
        (f"select o.order_id, n.region from {OLC} join shop.countries n on n.country = c.country", ["c", "n"]),
        # a RIGHT JOIN whose preserved rows the WHERE discards (they have no order)
        (
            "select o.order_id, c.name from shop.orders o right join shop.customers c "
            "on o.customer_id = c.customer_id where o.status is not null",
            ["c"],
        ),
    ],
    ids=["where on the null-supplying side", "inner join on a null-extended table", "right join, where"],
)
def test_an_outer_join_whose_null_extended_rows_are_discarded_is_maintained_as_the_inner_join(view, sql, inner):
    # the join class maintains it by its deltas, where it refused the filter before (null_rejection.py)
    definition = view(sql)
    assert definition.view_class is ViewClass.JOIN
    assert not definition.null_supplying
    assert [j.alias for j in definition.joins] == inner
