"""Rendering the defining query, with and without substituted sources."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from dbt_incremental_mv.analysis import parse_source
from dbt_incremental_mv.analysis.render import render_select, select_expression

JOIN_SQL = (
    "with dutch as (select * from shop.customers where country = 'NL') "
    "select o.order_id, d.name from shop.orders o left join dutch d on o.customer_id = d.customer_id "
    "where o.amount > 10"
)


def test_complete_rebuild_reads_the_masters(view, rendered):
    assert rendered(view(JOIN_SQL)) == (
        "SELECT `o`.`order_id` AS `order_id`, `d`.`name` AS `name`, "
        "`o`.`order_id` AS `_mv_o_order_id`, `d`.`customer_id` AS `_mv_d_customer_id` "
        "FROM `shop`.`orders` AS `o` "
        "LEFT JOIN `shop`.`customers` AS `d` ON `o`.`customer_id` = `d`.`customer_id` AND `d`.`country` = 'NL' "
        "WHERE `o`.`amount` > 10"
    )


def test_time_travel_source_keeps_the_alias(view, rendered):
    text = rendered(view(JOIN_SQL), sources={"d": "`shop`.`customers` VERSION AS OF 123"})
    assert "LEFT JOIN `shop`.`customers` VERSION AS OF 123 AS `d` ON `o`.`customer_id` = `d`.`customer_id`" in text
    assert "FROM `shop`.`orders` AS `o` " in text


def test_timestamp_time_travel_source(view, rendered):
    text = rendered(view(JOIN_SQL), sources={"o": "shop.orders TIMESTAMP AS OF '2024-05-01 00:00:00'"})
    assert "FROM `shop`.`orders` TIMESTAMP AS OF '2024-05-01 00:00:00' AS `o` LEFT JOIN" in text


def test_subquery_source_is_parsed_and_aliased(view, rendered):
    changed = (
        "(select * from shop.orders version as of 7 "
        "where order_id in (select order_id from shop.orders_changes where _change_ordinal > 3))"
    )
    text = rendered(view(JOIN_SQL), sources={"o": changed, "d": "shop.customers VERSION AS OF 7"})
    assert text.startswith(
        "SELECT `o`.`order_id` AS `order_id`, `d`.`name` AS `name`, `o`.`order_id` AS `_mv_o_order_id`, "
        "`d`.`customer_id` AS `_mv_d_customer_id` "
        "FROM (SELECT * FROM `shop`.`orders` VERSION AS OF 7 WHERE `order_id` IN "
        "(SELECT `order_id` FROM `shop`.`orders_changes` WHERE `_change_ordinal` > 3)) AS `o` "
    )
    # the view's own filters still apply to the substituted rows
    assert text.endswith("AND `d`.`country` = 'NL' WHERE `o`.`amount` > 10")
    from_ = sqlglot.parse_one(text, read="spark").args["from_"].this
    assert isinstance(from_, exp.Subquery) and from_.alias == "o"


def test_unparenthesised_select_source_becomes_a_subquery(view, rendered):
    text = rendered(view("select order_id from shop.orders"), sources={"orders": "select * from shop.orders_delta"})
    assert "FROM (SELECT * FROM `shop`.`orders_delta`) AS `orders`" in text


def test_source_alias_is_replaced_by_the_occurrence_alias(view, rendered):
    text = rendered(view("select o.order_id from shop.orders o"), sources={"o": "(select * from shop.x) AS other"})
    assert text.endswith("FROM (SELECT * FROM `shop`.`x`) AS `o`")


def test_sqlglot_nodes_are_accepted_as_sources(view, rendered):
    table = exp.to_table("shop.orders_snapshot", dialect="spark")
    definition = view("select o.order_id from shop.orders o")
    assert rendered(definition, sources={"o": table}).endswith("FROM `shop`.`orders_snapshot` AS `o`")
    assert table.alias == ""  # the caller's node is not modified


def test_aggregate_delta_over_a_substituted_source(view, rendered):
    definition = view(
        "select c.country, count(*) as n, sum(o.amount) as total from shop.orders o "
        "join shop.customers c on o.customer_id = c.customer_id group by c.country"
    )
    text = rendered(definition, sources={"o": "(select * from changes where op = 'I')"})
    assert text == (
        "SELECT `c`.`country` AS `country`, COUNT(*) AS `n`, SUM(`o`.`amount`) AS `total`, "
        "COUNT(*) AS `_mv_count`, COUNT(`o`.`amount`) AS `_mv_cnt_total` "
        "FROM (SELECT * FROM `changes` WHERE `op` = 'I') AS `o` "
        "JOIN `shop`.`customers` AS `c` ON `o`.`customer_id` = `c`.`customer_id` GROUP BY `c`.`country`"
    )


def test_visible_columns_only(view, rendered):
    definition = view("select o.order_id, o.amount from shop.orders o")
    assert rendered(definition, include_hidden=False) == (
        "SELECT `o`.`order_id` AS `order_id`, `o`.`amount` AS `amount` FROM `shop`.`orders` AS `o`"
    )
    assert definition.stored_columns == ("order_id", "amount", "_mv_o_order_id")


def test_pretty_rendering_is_the_same_query(view):
    definition = view(JOIN_SQL)
    pretty = render_select(definition, pretty=True)
    assert "\n" in pretty
    assert sqlglot.parse_one(pretty, read="spark") == sqlglot.parse_one(render_select(definition), read="spark")


def test_unknown_alias_in_sources_is_an_error(view):
    with pytest.raises(KeyError, match="nope"):
        render_select(view(JOIN_SQL), sources={"nope": "shop.orders"})


@pytest.mark.parametrize("source", ["shop.orders where x", "select from (", "1 + 1"])
def test_bad_source_text_is_an_error(view, source):
    with pytest.raises(ValueError):
        render_select(view("select o.order_id from shop.orders o"), sources={"o": source})


def test_rendering_does_not_share_nodes_with_the_definition(view):
    definition = view(JOIN_SQL)
    before = render_select(definition)
    select = select_expression(definition)
    for column in select.find_all(exp.Column):
        column.set("table", exp.to_identifier("zzz"))
    assert render_select(definition) == before


def test_identifiers_needing_quotes_round_trip(rendered):
    from dbt_incremental_mv.analysis import MasterTable, analyze_view

    master = MasterTable("my schema.order lines", (("line id", "int"), ("qty", "int")), ("line id",))
    masters = {master.name: master}
    definition = analyze_view("select `line id`, qty as `the qty` from `my schema`.`order lines` as `l`", masters)
    text = rendered(definition)
    assert text == (
        "SELECT `l`.`line id` AS `line id`, `l`.`qty` AS `the qty`, `l`.`line id` AS `_mv_l_line id` "
        "FROM `my schema`.`order lines` AS `l`"
    )


def test_parse_source_helper():
    assert isinstance(parse_source("`a`.`b` VERSION AS OF 1"), exp.Table)
    assert isinstance(parse_source("(select 1 as x)"), exp.Subquery)


def test_comments_are_not_rendered(view):
    definition = view("-- header comment\nselect o.order_id /* the id */ from shop.orders o -- trailing")
    assert "comment" not in render_select(definition) and "/*" not in render_select(definition)
