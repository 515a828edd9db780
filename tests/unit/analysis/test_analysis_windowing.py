"""Views whose rows carry window functions over a common partition (analysis/windowing.py): the
shapes recognised, filters kept before or after the windows as written, ties broken where the
order decides, and the refusals that quote the user's window."""

from __future__ import annotations

import pytest

from dbt_incremental_mv.analysis import UnsupportedViewError, ViewClass
from dbt_incremental_mv.analysis.model import HiddenPurpose

O = "shop.orders"
HISTORY = (
    f"with source as (select * from {O}), "
    "windowed as (select order_id, customer_id, status, order_date, "
    "lead(order_date) over (partition by customer_id order by order_date) as valid_to "
    "from source where status <> 'void'), "
    "final as (select * from windowed where valid_to is null or status = 'open') "
    "select * from final"
)


def test_filters_before_and_after_the_windows_stay_where_written(view, rendered):
    definition = view(HISTORY)
    windowing = definition.windowing
    assert definition.view_class is ViewClass.WINDOWED
    assert [p.sql() for p in windowing.partition_by] == ['"final"."customer_id"']
    assert windowing.partition_columns == ("customer_id",)  # selected: no hidden copy
    # the windowed CTE's WHERE filters before the windows, final's after them
    assert [w.sql() for w in definition.where_conjuncts] == ['"final"."status" <> \'void\'']
    (post,) = windowing.post_conjuncts
    assert "LEAD(" in post.sql() and '"final"."status" = \'open\'' in post.sql()
    assert [o.name for o in definition.visible_outputs] == ["order_id", "customer_id", "status", "order_date", "valid_to"]
    sql = rendered(definition)
    # LEAD depends on the order of tied rows: the master's key breaks the ties
    assert "ORDER BY `final`.`order_date`, `final`.`order_id`) AS `valid_to`" in sql
    assert [t.sql() for t in windowing.tie_break] == ['"final"."order_id"']
    assert sql.endswith("WHERE `_mv_r`.`_mv_keep`")


def test_the_common_partition_of_several_windows_and_their_frames(view, rendered):
    definition = view(
        "select order_id, sum(amount) over (partition by customer_id, status order by order_date) as running, "
        "count(*) over (partition by customer_id) as orders, "
        "max(amount) over (partition by status, customer_id order by order_date rows between 2 preceding and current row) as recent "
        f"from {O}"
    )
    windowing = definition.windowing
    assert [p.sql() for p in windowing.partition_by] == ['"orders"."customer_id"']
    assert windowing.post_conjuncts == ()
    hidden = {h.name: h.purpose for h in definition.hidden_columns}
    assert hidden["_mv_p1"] is HiddenPurpose.PARTITION  # customer_id is not selected: stored hidden
    assert windowing.partition_columns == ("_mv_p1",)
    sql = rendered(definition)
    # a RANGE frame's peers are the query's meaning: left as written; a ROWS frame is tie-broken
    assert "PARTITION BY `orders`.`customer_id`, `orders`.`status` ORDER BY `orders`.`order_date`) AS `running`" in sql
    assert "ORDER BY `orders`.`order_date`, `orders`.`order_id` rows BETWEEN 2 preceding AND CURRENT ROW" in sql
    assert "_mv_keep" not in sql
    assert [t.sql() for t in windowing.tie_break] == ['"orders"."order_id"']  # (the ROWS frame's)
    unbroken = view(f"select order_id, sum(amount) over (partition by customer_id order by order_date) as s from {O}")
    assert unbroken.windowing.tie_break == ()


@pytest.mark.parametrize(
    "window",
    [
        "size(collect_set(status) over (partition by customer_id))",
        "array_sort(collect_list(status) over (partition by customer_id))",
        "collect_list(status) over (partition by customer_id order by order_date rows between 1 preceding and current row)",
        "first(status) over (partition by customer_id order by order_date rows between unbounded preceding and current row)",
    ],
)
def test_order_dependent_windows_made_deterministic(view, window):
    assert view(f"select order_id, {window} as w from {O}").view_class is ViewClass.WINDOWED


@pytest.mark.parametrize(
    "window",
    [
        "collect_list(status) over (partition by customer_id order by order_date)",
        "first(status) over (partition by customer_id)",
        "max_by(status, amount) over (partition by customer_id order by order_date rows between 1 preceding and current row)",
    ],
)
def test_order_dependent_windows_are_refused(view, window):
    with pytest.raises(UnsupportedViewError) as caught:
        view(f"select order_id, {window} as w from {O}")
    assert "depends on the order Spark reads the rows in" in caught.value.reason


@pytest.mark.parametrize(
    "window",
    [
        "collect_set(status) over (partition by customer_id)",
        "collect_set(status) over (partition by customer_id order by order_date)",
        "collect_list(status) over (partition by customer_id)",
    ],
)
def test_unsorted_window_collections_are_ordered_by_value(view, rendered, window):
    # (the query leaves their elements' order to the order Spark reads the rows in: any is its answer)
    from dbt_incremental_mv.refresh.operations.explain import _class_of

    definition = view(f"select order_id, {window} as w from {O}")
    assert definition.view_class is ViewClass.WINDOWED
    assert "AS `w`" in rendered(definition) and "ARRAY_SORT(COLLECT_" in rendered(definition)
    assert "the view orders them by value, the same way by every build and refresh" in _class_of(definition)


def test_explain_says_which_key_orders_the_ties(view):
    from dbt_incremental_mv.refresh.operations.explain import _class_of

    tied = _class_of(view(f"select order_id, lag(amount) over (partition by customer_id order by order_date) as p from {O}"))
    assert tied == (
        "windowed (windows partitioned by orders.customer_id; a change recomputes its partitions; rows the ORDER BY "
        "of ROW_NUMBER, LEAD, LAG, NTILE or a ROWS frame leaves tied are ordered by the master's key "
        "(orders.order_id), the same way by every build and refresh)"
    )
    total = _class_of(view(f"select order_id, lag(amount) over (partition by customer_id order by order_id) as p from {O}"))
    assert total == "windowed (windows partitioned by orders.customer_id; a change recomputes its partitions)"


def test_qualify_on_a_window_that_is_not_a_rank(view):
    definition = view(
        f"select order_id, customer_id from {O} qualify lag(status) over (partition by customer_id order by order_id) = 'open'"
    )
    assert definition.view_class is ViewClass.WINDOWED
    assert [o.name for o in definition.visible_outputs] == ["order_id", "customer_id"]
    assert "LAG(" in definition.windowing.post_conjuncts[0].sql()


def test_qualify_in_a_cte_is_the_filter_over_its_windows(view):
    definition = view(
        f"with s as (select * from {O} qualify row_number() over (partition by customer_id order by order_date desc, "
        "order_id) = 1) select order_id, amount from s where amount > 0"
    )
    assert definition.view_class is ViewClass.WINDOWED
    assert [o.name for o in definition.visible_outputs] == ["order_id", "amount"]
    assert len(definition.windowing.post_conjuncts) == 2  # the QUALIFY and the outer filter, after the window


def test_a_window_nothing_keeps_leaves_the_rows_of_the_query(view, rendered):
    definition = view(
        f"with w as (select o.*, lag(amount) over (partition by customer_id order by order_id) as previous "
        f"from {O} o) select order_id, amount from w where status = 'open'"
    )
    assert definition.view_class is ViewClass.JOIN and definition.windowing is None
    assert [w.sql() for w in definition.where_conjuncts] == ['"w"."status" = \'open\'']
    assert "OVER" not in rendered(definition)


def test_a_distinct_count_over_a_window_is_the_size_of_the_set_spark_computes(view, rendered):
    # (Snowflake and BigQuery SQL write it; Spark computes no DISTINCT aggregate over a window)
    definition = view(
        f"select order_id, count(distinct status) over (partition by customer_id order by order_date) as kinds from {O}"
    )
    assert definition.view_class is ViewClass.WINDOWED
    sql = rendered(definition)
    assert "SIZE(COLLECT_SET(`orders`.`status`) OVER (PARTITION BY `orders`.`customer_id` ORDER BY " in sql


def test_a_rank_kept_by_a_filter_is_still_a_ranked_view(view):
    sql = (
        "select * from (select o.*, row_number() over (partition by o.customer_id order by o.order_date desc) as rn "
        f"from {O} o) as latest where rn = 1"
    )
    assert view(sql).view_class is ViewClass.RANKED
    selected = view(sql.replace(" where rn = 1", ""))  # the rank as a column: windowed
    assert selected.view_class is ViewClass.WINDOWED and selected.ranking is None


@pytest.mark.parametrize(
    "sql, construct, reason",
    [
        (f"select order_id, lag(amount) over (order by order_date) as previous from {O}",
         "LAG(amount) OVER (ORDER BY order_date)", "without PARTITION BY"),
        (f"select order_id, lag(amount) over (partition by customer_id order by order_id) as a, "
         f"lag(amount) over (partition by status order by order_id) as b from {O}",
         "LAG(amount) OVER (PARTITION BY customer_id ORDER BY order_id)", "share no PARTITION BY"),
        (f"select o.order_id, count(*) over (partition by c.country) as n from {O} o "
         "join shop.customers c on o.customer_id < c.customer_id",
         "COUNT(*) OVER (PARTITION BY c.country)", "come from a join"),
        (f"select order_id, sum(distinct amount) over (partition by customer_id) as n from {O}",
         "SUM(DISTINCT amount) OVER (PARTITION BY customer_id)", "no DISTINCT aggregate over a window"),
        (f"select order_id from (select order_id, count(*) over (partition by customer_id) as n from {O}) as t "
         "join shop.customers c on t.order_id < c.customer_id",
         "COUNT(*) OVER (PARTITION BY customer_id)", "the rows of t, which computes windows, are joined"),
    ],
)
def test_refusals_quote_the_window(view, sql, construct, reason):
    with pytest.raises(UnsupportedViewError) as caught:
        view(sql)
    assert caught.value.construct == construct
    assert reason in caught.value.reason
