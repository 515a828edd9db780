"""UNION ALL views without Spark: the analysis (branches, marker, unique aliases, shared hidden
columns) and the refresh statement (the changed branches' writes as one DELETE and one INSERT)."""

import dataclasses

import pytest
import sqlglot

from dbt_incremental_mv.analysis import MasterTable, UnsupportedViewError, ViewClass, analyze_view
from dbt_incremental_mv.analysis.render import render_select
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh.views import union_view, view_classes
from dbt_incremental_mv.refresh.marked_log import MarkedLog

ORDERS = MasterTable(
    "shop.orders", (("order_id", "bigint"), ("customer_id", "bigint"), ("amount", "decimal(10,2)"), ("status", "string")),
    ("order_id",),
)
CUSTOMERS = MasterTable("shop.customers", (("customer_id", "bigint"), ("segment", "string")), ("customer_id",))
MASTERS = {m.name: m for m in (ORDERS, CUSTOMERS)}

MIXED = (
    "select o.customer_id as id, o.amount as value from shop.orders o where o.status = 'open' "
    "union all select c.customer_id, o.amount * 2 from shop.orders o join shop.customers c on o.customer_id = c.customer_id "
    "union all select o.customer_id, sum(o.amount) from shop.orders o group by o.customer_id"
)


def marked(master, inserts=0, deletes=0):
    spec = LogSpec("logs", f"logs.mlog_{master.name.split('.')[1]}", master.name, master.name, master.key, True)
    return MarkedLog(spec, 11, 5, 9, inserts, deletes, 123)


def statement(sql, **changes):
    view = analyze_view(sql, MASTERS)
    logs = {name: marked(MASTERS[name], *changes.get(name, (0, 0))) for name in MASTERS}
    return union_view.refresh_statement(view, "shop.v", logs, {"value": "decimal(20,2)"})


def test_each_branch_is_a_view_of_its_own_class_marked_by_its_number():
    view = analyze_view(MIXED, MASTERS)
    assert view.view_class is ViewClass.UNION_ALL
    assert [b.view_class for b in view.branches] == [ViewClass.JOIN, ViewClass.JOIN, ViewClass.AGGREGATE]
    # the same alias in two branches is made unique: each join branch's keys are its own columns
    assert [b.aliases for b in view.branches] == [("o",), ("o_2", "c"), ("o_3",)]
    # the aggregate branch's own columns (its visible ones in its own types), then every branch's helpers
    assert view.stored_columns == (
        "id", "value", "_mv_branch", "_mv_b3_id", "_mv_b3_value", "_mv_o_order_id", "_mv_o_2_order_id",
        "_mv_c_customer_id", "_mv_count", "_mv_cnt_b3_value",
    )
    # the first branch names the columns; the aggregate branch groups by its marker too, on its own columns
    assert [o.name for o in view.branches[1].outputs] == ["id", "value", "_mv_branch"]
    assert [o.name for o in view.branches[2].outputs] == ["_mv_b3_id", "_mv_b3_value", "_mv_branch"]
    assert view.branches[2].group_key_columns == ("_mv_b3_id", "_mv_branch")
    assert "GROUP BY `o_3`.`customer_id`, CAST(3 AS INT)" in render_select(view)
    assert set(view.referenced_columns) == {"o", "o_2", "c", "o_3"}


def test_the_defining_query_lays_every_branch_out_as_the_stored_columns():
    rendered = render_select(analyze_view(MIXED, MASTERS))
    parts = rendered.split("\nunion all\n")
    assert len(parts) == 3
    assert parts[0].startswith("select `id`, `value`, `_mv_branch`, null as `_mv_b3_id`, null as `_mv_b3_value`, "
                               "`_mv_o_order_id`, null as `_mv_o_2_order_id`")
    # the union widens the aggregate branch's own columns into the visible ones
    assert parts[2].startswith("select `_mv_b3_id` as `id`, `_mv_b3_value` as `value`, `_mv_branch`, `_mv_b3_id`, "
                               "`_mv_b3_value`, null as `_mv_o_order_id`, null as `_mv_o_2_order_id`, "
                               "null as `_mv_c_customer_id`, `_mv_count`, `_mv_cnt_b3_value` from (")
    assert isinstance(sqlglot.parse_one(rendered, read="spark"), sqlglot.exp.Union)
    visible = render_select(analyze_view(MIXED, MASTERS), include_hidden=False)
    assert visible.count("select `id`, `value` from (") == 2
    assert visible.count("select `_mv_b3_id` as `id`, `_mv_b3_value` as `value` from (") == 1


def test_an_aggregate_branch_keeps_its_own_columns_only_the_row_count_is_shared():
    view = analyze_view(
        "select o.status, count(*) as n, avg(o.amount) as a, min(o.amount) as low from shop.orders o group by o.status "
        "union all select c.segment, count(*), avg(o.order_id), min(o.order_id) from shop.orders o "
        "join shop.customers c on o.customer_id = c.customer_id group by c.segment having avg(o.order_id) > 2",
        MASTERS,
    )
    # each aggregate branch's columns and helpers have the types of what it aggregates: the union
    # would widen a column shared by a decimal and a bigint branch (the AVGs: decimal(14,6), double)
    assert view.stored_columns == (
        "status", "n", "a", "low", "_mv_branch", "_mv_b1_status", "_mv_b1_n", "_mv_b1_a", "_mv_b1_low",
        "_mv_b2_status", "_mv_b2_n", "_mv_b2_a", "_mv_b2_low", "_mv_count", "_mv_cnt_b1_a", "_mv_sum_b1_a",
        "_mv_top_b1_low", "_mv_cnt_b2_a", "_mv_sum_b2_a", "_mv_top_b2_low",
    )
    # the HAVING reads the branch's AVG in the branch's type, not the union's
    assert view.branches[1].having.sql(dialect="spark") == "`_mv_b2_a` > 2"


def test_a_union_all_aggregated_and_other_set_operations_stay_refused():
    with pytest.raises(UnsupportedViewError, match="reads alone, selecting and filtering its rows"):
        analyze_view("with u as (select order_id from shop.orders union all select order_id from shop.orders) "
                     "select order_id + 1 as k, count(*) as n from u group by order_id + 1", MASTERS)
    with pytest.raises(UnsupportedViewError, match="other than UNION ALL"):
        analyze_view("select upper(status) from shop.orders union select upper(status) from shop.orders", MASTERS)


@pytest.mark.parametrize(
    "nested, flat",
    [
        (
            "with u as (select o.customer_id as id, o.amount as value from shop.orders o where o.status = 'open' "
            "union all select c.customer_id, cast(null as decimal(10,2)) from shop.customers c) select * from u",
            "select u.customer_id as id, u.amount as value from shop.orders u where u.status = 'open' "
            "union all select u.customer_id as id, cast(null as decimal(10,2)) as value from shop.customers u",
        ),
        (
            # the union_relations shape: every column cast alike; a projection and filter on top, through a CTE
            "with unioned as (select cast(o.customer_id as bigint) as id, cast(o.status as string) as label "
            "from shop.orders o union all select cast(c.customer_id as bigint), cast(c.segment as string) "
            "from shop.customers c), final as (select id, upper(label) as label from unioned where id > 0) "
            "select * from final",
            "select cast(final.customer_id as bigint) as id, upper(cast(final.status as string)) as label "
            "from shop.orders final where cast(final.customer_id as bigint) > 0 union all "
            "select cast(final.customer_id as bigint) as id, upper(cast(final.segment as string)) as label "
            "from shop.customers final where cast(final.customer_id as bigint) > 0",
        ),
        (
            # an aggregating branch, the columns renamed by the derived table's column list
            "select x.k, x.v from (select o.status, count(*) from shop.orders o group by o.status union all "
            "select c.segment, count(*) from shop.customers c group by c.segment) as x(k, v)",
            "select o.status as k, count(*) as v from shop.orders o group by o.status union all "
            "select c.segment as k, count(*) as v from shop.customers c group by c.segment",
        ),
    ],
    ids=["select star", "cast columns, a CTE over the union", "aggregating branches, a column list"],
)
# (the flat queries name each branch's table as the analysis does: a table read through a derived table
# that filters and projects it goes by that table's alias, one under an aggregate by its own)
def test_a_union_all_read_alone_through_a_cte_or_derived_table_is_the_union_all_view(nested, flat):
    """Projected and filtered row by row, a UNION ALL in a CTE or derived table is the top-level
    UNION ALL of the outer query over each branch: the same view, so the same refresh."""
    distributed, written = analyze_view(nested, MASTERS), analyze_view(flat, MASTERS)
    assert distributed.view_class is ViewClass.UNION_ALL
    assert render_select(distributed) == render_select(written)
    assert [render_select(b) for b in distributed.branches] == [render_select(b) for b in written.branches]


def test_a_column_whose_branches_disagree_on_its_type_is_kept_only_as_it_is():
    union = ("with u as (select o.customer_id as id, o.amount as value from shop.orders o "
             "union all select c.customer_id, 0 from shop.customers c) ")
    assert analyze_view(union + "select value, id from u where id > 1", MASTERS).view_class is ViewClass.UNION_ALL
    # (filtered on it: not a UNION ALL view; the query as written, per customer)
    assert analyze_view(union + "select id from u where value > 1", MASTERS).view_class is ViewClass.PER_PARTITION


def test_a_branch_that_cannot_be_fast_refreshed_is_named():
    with pytest.raises(UnsupportedViewError) as caught:
        analyze_view("select order_id from shop.orders union all select order_id from shop.orders "
                     "union all select count(*) from shop.orders", MASTERS)
    assert caught.value.construct == "UNION ALL branch 3"


def test_the_union_with_clause_is_every_branch_s():
    view = analyze_view(
        "with open_orders as (select * from shop.orders where status = 'open') "
        "select order_id from open_orders union all select customer_id from shop.customers", MASTERS,
    )
    assert [b.occurrences[0].master.name for b in view.branches] == ["shop.orders", "shop.customers"]


def test_only_the_changed_branches_are_refreshed():
    assert statement(MIXED) is None
    only_customers = statement(MIXED, **{"shop.customers": (1, 1)})
    assert only_customers.steps_skipped[:2] == ("branch 1", "branch 3")
    assert all(step.startswith("branch 2: ") for step in only_customers.steps_run)


def test_the_branches_writes_are_one_delete_and_one_insert_on_the_write_branch():
    first = statement(MIXED, **{"shop.orders": (2, 1)})
    assert first.sql == statement(MIXED, **{"shop.orders": (2, 1)}).sql  # deterministic
    delete, insert = first.writes
    assert first.branch == "mv_write"
    assert delete.sql.startswith("delete from `shop`.`v`.`branch_mv_write` as `_mv_v`\nwhere (")
    assert delete.sql.count("\n   or (") == 2  # three branches' conditions
    assert insert.sql.startswith("insert into `shop`.`v`.`branch_mv_write` (`id`, `value`, `_mv_branch`, ")
    # each branch's visible columns cast to their stored types, as the union widens them
    assert insert.sql.count("\nunion all\nselect `id`, cast(`value` as decimal(20,2)) as `value`, `_mv_branch`") == 1
    assert insert.sql.count("\nunion all\nselect `_mv_b3_id` as `id`, cast(`_mv_b3_value` as decimal(20,2)) as `value`") == 1
    for write in first.writes:
        sqlglot.parse_one(write.sql, read="spark")
    # the aggregate branch's cached delta carries its branch's number; the own log reads the combined condition
    assert [c.name for c in first.cached] == ["mv_write_3_delta"]
    assert first.deleted in delete.sql and first.inserts_last
    assert first.touched.count("\n   or (") == 2
    assert first.stats_labels == ("branch 3 groups inserted", "branch 3 groups updated", "branch 3 groups deleted",
                                  "branch 3 groups recomputed")


def test_an_insert_only_change_of_join_branches_is_one_insert_on_main():
    joins = "select o.order_id from shop.orders o union all select c.customer_id from shop.customers c"
    inserted = statement(joins, **{"shop.orders": (3, 0), "shop.customers": (1, 0)})
    assert [w.kind for w in inserted.writes] == ["insert"] and inserted.branch is None
    assert inserted.writes[0].sql.startswith("insert into `shop`.`v` (`order_id`, `_mv_branch`, ")


def test_a_union_of_fast_refreshable_branches_is_fast_refreshable():
    view = analyze_view(MIXED, MASTERS)
    assert view_classes.blocker(view) is None


def test_a_constant_selected_by_an_aggregate_branch_is_a_group_key():
    view = analyze_view(
        "select o.status as label, 'orders' as kind, 1 as one, count(*) as n from shop.orders o group by o.status "
        "union all select distinct c.segment, 'customers', 2, cast(null as bigint) from shop.customers c", MASTERS,
    )
    first, second = view.branches
    assert first.group_key_columns == ("_mv_b1_label", "_mv_b1_kind", "_mv_b1_one", "_mv_branch")
    assert "GROUP BY `o`.`status`, 'orders', CAST(1 AS INT), CAST(1 AS INT)" in render_select(first)
    assert second.is_aggregate
    assert second.group_key_columns == ("_mv_b2_label", "_mv_b2_kind", "_mv_b2_one", "_mv_b2_n", "_mv_branch")


def test_layout_advice_covers_every_branch_s_keys_and_joins():
    from dbt_incremental_mv.layout import layout_advice

    advice = layout_advice(analyze_view(MIXED, MASTERS), "shop.v")
    assert advice[0] == "alter table `shop`.`v` write ordered by `_mv_o_order_id`, `_mv_o_2_order_id`, `_mv_c_customer_id`"
    assert "alter table `shop`.`customers` write ordered by `customer_id`" in advice


def test_a_join_branch_deleting_by_two_statements_is_combined_into_the_views_one_delete():
    # literal keys of one master and keys read from the other's log: the join branch alone
    # deletes by two statements (found by the soak: "its writes (delete, delete, insert) cannot
    # be combined" once a round changed enough rows of both masters)
    view = analyze_view(MIXED, MASTERS)
    logs = {
        "shop.orders": dataclasses.replace(marked(ORDERS, 2, 2), key_values=((7,), (9,))),
        "shop.customers": marked(CUSTOMERS, 3, 3),
    }
    alone = view_classes.refresh_statement(view.branches[1], "shop.v", logs, {}, "b")
    assert [w.kind for w in alone.writes] == ["delete", "delete", "insert"]
    combined = union_view.refresh_statement(view, "shop.v", logs, {"value": "decimal(20,2)"})
    assert [w.kind for w in combined.writes] == ["delete", "insert"]
    delete = combined.writes[0].sql
    sqlglot.parse_one(delete, read="spark")
    assert "(7), (9)" in delete or "in (7, 9)" in delete.lower()  # the literal keys and the log's both
    assert "`logs`.`mlog_customers`" in delete


MIXED_TYPES = (
    "select o.status as k, avg(o.amount) as a, sum(o.amount) as t from shop.orders o group by o.status "
    "union all select c.segment, avg(o.order_id), sum(o.order_id) from shop.orders o "
    "join shop.customers c on o.customer_id = c.customer_id group by c.segment"
)
# the stored table as Spark types it: the union widens AVG(decimal(10,2)) (decimal(14,6)) and AVG(bigint)
# (double) to double, SUM(decimal(10,2)) (decimal(20,2)) and SUM(bigint) to decimal(20,2); each branch's
# own columns keep its types
MIXED_STORED = {
    "k": "string", "a": "double", "t": "decimal(20,2)", "_mv_b1_k": "string", "_mv_b1_a": "decimal(14,6)",
    "_mv_b1_t": "decimal(20,2)", "_mv_sum_b1_a": "decimal(20,2)", "_mv_b2_k": "string", "_mv_b2_a": "double",
    "_mv_b2_t": "bigint", "_mv_sum_b2_a": "double",
}


def test_a_branch_is_maintained_in_its_own_types_then_widened_as_the_union_widens_it():
    view = analyze_view(MIXED_TYPES, MASTERS)
    logs = {name: marked(MASTERS[name], 1, 1) for name in MASTERS}
    statement = union_view.refresh_statement(view, "shop.v", logs, MIXED_STORED)
    insert = statement.writes[1].sql
    count, total = "`_mv_s`.`_mv_n__mv_cnt_b1_a`", "`_mv_s`.`_mv_n__mv_sum_b1_a`"
    new_count = "(coalesce(`_mv_d`.`_mv_t`.`_mv_cnt_b1_a`, 0) + coalesce(`_mv_d`.`_mv_d__mv_cnt_b1_a`, 0))"
    # Spark's AVG of a decimal: its sum over its count, rounded to decimal(14,6) (dividing in the
    # union's double skipped that rounding: issue 62; exact_decimals.py)
    average = f"case when {count} = 0 then null else cast(({total}) as decimal(20,2)) / ({count}) end"
    assert f"cast({average} as decimal(14,6)) as `_mv_b1_a`" in insert
    assert ("case when " + new_count + " = 0 then null else coalesce(`_mv_d`.`_mv_t`.`_mv_b1_t`, 0) + "
            "coalesce(`_mv_d`.`_mv_d__mv_b1_t`, 0) end as `_mv_n__mv_b1_t`") in "\n".join(c.sql for c in statement.cached)
    assert "cast(`_mv_s`.`_mv_n__mv_b1_t` as decimal(20,2)) as `_mv_b1_t`" in insert
    assert "`_mv_s`.`_mv_t`.`t`" not in insert and "`_mv_s`.`_mv_t`.`a`" not in insert
    # then the union's widening: each visible column is its branch column cast to the stored type
    assert ("select cast(`_mv_b1_k` as string) as `k`, cast(`_mv_b1_a` as double) as `a`, "
            "cast(`_mv_b1_t` as decimal(20,2)) as `t`, `_mv_branch`, `_mv_b1_k`, `_mv_b1_a`, `_mv_b1_t`, ") in insert
    # the second branch's AVG of a bigint: a double sum (analysis/summands.py) over the count
    assert "else cast((`_mv_s`.`_mv_n__mv_sum_b2_a`) as double) / (`_mv_s`.`_mv_n__mv_cnt_b2_a`) end" in insert
    assert "coalesce(`_mv_d`.`_mv_d__mv_sum_b2_a`, 0) end as `_mv_n__mv_sum_b2_a`" in "\n".join(c.sql for c in statement.cached)
    sqlglot.parse_one(insert, read="spark")
