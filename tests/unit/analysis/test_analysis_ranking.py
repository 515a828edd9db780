"""Views of the top rows of window partitions (analysis/ranking.py): the shapes recognised, what
the definition holds, and the refusals that quote the user's window or filter."""

from __future__ import annotations

import pytest

from dbt_incremental_mv.analysis import UnsupportedViewError, ViewClass
from dbt_incremental_mv.analysis.model import HiddenPurpose, RankFunction

LATEST = (
    "select * from (select o.*, row_number() over (partition by o.customer_id order by o.order_date desc) as rn "
    "from shop.orders o where o.status <> 'void') as latest where rn = 1"
)


def test_latest_row_per_key(view, rendered):
    definition = view(LATEST)
    ranking = definition.ranking
    assert definition.view_class is ViewClass.RANKED
    assert ranking.function is RankFunction.ROW_NUMBER and ranking.keep == 1
    assert [p.sql() for p in ranking.partition_by] == ['"latest"."customer_id"']
    # ties broken by the master's key, the same way by every build and refresh
    assert [t.sql() for t in ranking.tie_break] == ['"latest"."order_id"']
    assert ranking.partition_columns == ("customer_id",)  # selected: no hidden copy
    assert [o.name for o in definition.visible_outputs] == ["order_id", "customer_id", "order_date", "status", "amount", "rn"]
    assert [w.sql() for w in definition.where_conjuncts] == ['"latest"."status" <> \'void\'']  # before the ranking
    sql = rendered(definition)
    assert "ORDER BY `latest`.`order_date` DESC, `latest`.`order_id`) AS `rn`" in sql
    assert sql.endswith("WHERE `_mv_r`.`_mv_rank` <= 1")


@pytest.mark.parametrize(
    "bound, keep", [("rn = 1", 1), ("rn <= 3", 3), ("rn < 3", 2), ("2 >= rn", 2), ("1 = rn", 1)]
)
def test_the_rows_kept(view, bound, keep):
    sql = (
        "with r as (select order_id, customer_id, rank() over (partition by customer_id order by amount) as rn "
        f"from shop.orders) select order_id from r where {bound}"
    )
    ranking = view(sql).ranking
    assert ranking.keep == keep and ranking.function is RankFunction.RANK and ranking.tie_break == ()


def test_filters_on_the_ranked_rows_and_partition_expressions(view, rendered):
    sql = (
        "with r as (select order_id, amount, dense_rank() over (partition by lower(status), order_date order by amount desc) as d "
        "from shop.orders) select order_id, amount from r where d <= 2 and amount > 0"
    )
    definition = view(sql)
    ranking = definition.ranking
    assert [c.sql() for c in ranking.post_conjuncts] == ['"r"."amount" > 0']
    assert definition.where_conjuncts == ()  # applied after the ranking, not before
    hidden = {h.name: h.purpose for h in definition.hidden_columns}
    assert hidden["_mv_p1"] is HiddenPurpose.PARTITION and hidden["_mv_p2"] is HiddenPurpose.PARTITION
    assert ranking.partition_columns == ("_mv_p1", "_mv_p2")
    assert {"status", "order_date", "amount"} <= definition.referenced_columns["r"]
    assert "AND `_mv_r`.`_mv_keep`" in rendered(definition)


def test_qualify_is_the_same_query(view):
    qualified = view(
        "select order_id, customer_id from shop.orders "
        "qualify row_number() over (partition by customer_id order by order_date desc) = 1"
    )
    assert qualified.view_class is ViewClass.RANKED
    assert [o.name for o in qualified.visible_outputs] == ["order_id", "customer_id"]


@pytest.mark.parametrize(
    "sql, construct, reason",
    [
        ("select o.order_id from shop.orders o qualify row_number() over (order by o.order_id) = 1",
         "ROW_NUMBER() OVER (ORDER BY o.order_id)", "without PARTITION BY"),
        ("select o.order_id from shop.orders o qualify row_number() over (partition by o.customer_id) = 1",
         "ROW_NUMBER() OVER (PARTITION BY o.customer_id)", "needs ORDER BY"),
    ],
)
def test_refusals_quote_the_window_or_the_filter(view, sql, construct, reason):
    with pytest.raises(UnsupportedViewError) as caught:
        view(sql)
    assert construct.lower() in str(caught.value).lower() and reason in str(caught.value)


@pytest.mark.parametrize("kept", ["rn = 1 or rn = 2", "rn = 1 and rn * 2 > 1", "rn > 1"])
def test_a_rank_filtered_otherwise_is_a_windowed_view(view, kept):
    definition = view(
        "select * from (select o.order_id, row_number() over (partition by o.customer_id order by o.order_id) as rn "
        f"from shop.orders o) as t where {kept}"
    )
    assert definition.view_class is ViewClass.WINDOWED and definition.ranking is None
    assert definition.windowing.post_conjuncts  # every filter applied after the window


def test_an_order_by_the_key_is_stored_once(view):
    definition = view(
        "select customer_id from (select customer_id, row_number() over (partition by customer_id "
        "order by order_id desc) as rn from shop.orders) as t where rn = 1"
    )
    (key,) = definition.key_columns("t")
    assert definition.ranking.order_columns == (key.name,)
    assert [h.name for h in definition.hidden_columns] == [key.name]  # no _mv_o1 beside the key
