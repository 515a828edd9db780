"""Hidden column naming: unique, deterministic, and unambiguous when simple names collide."""

from __future__ import annotations

from dbt_incremental_mv.analysis import (
    ROW_COUNT_COLUMN,
    HiddenPurpose,
    MasterTable,
    analyze_view,
    key_column_name,
    render_expression,
)

COLLIDING = {
    "s.left_t": MasterTable("s.left_t", (("c", "int"), ("v", "int")), ("c",)),
    "s.right_t": MasterTable("s.right_t", (("b_c", "int"), ("w", "int")), ("b_c",)),
}


def test_key_columns_follow_occurrence_then_key_order(view):
    definition = view(
        "select l.quantity, p.name from shop.order_lines l join shop.products p on l.product_id = p.product_id"
    )
    assert [(h.name, h.occurrence, h.source_column) for h in definition.hidden_columns] == [
        ("_mv_l_order_id", "l", "order_id"),
        ("_mv_l_line_no", "l", "line_no"),
        ("_mv_p_product_id", "p", "product_id"),
    ]
    assert all(h.purpose is HiddenPurpose.ROW_KEY for h in definition.hidden_columns)
    assert [render_expression(h.expression) for h in definition.hidden_columns] == [
        "`l`.`order_id`", "`l`.`line_no`", "`p`.`product_id`",
    ]


def test_colliding_simple_names_switch_to_length_prefixed_names():
    # alias a_b + column c and alias a + column b_c would both be _mv_a_b_c
    definition = analyze_view("select a_b.v, a.w from s.left_t a_b join s.right_t a on a_b.c = a.b_c", COLLIDING)
    assert [h.name for h in definition.hidden_columns] == ["_mv_3_a_b_c", "_mv_1_a_b_c"]
    assert len(set(definition.stored_columns)) == len(definition.stored_columns)


def test_collisions_are_detected_case_insensitively():
    masters = {
        "s.x": MasterTable("s.x", (("B_c", "int"),), ("B_c",)),
        "s.y": MasterTable("s.y", (("c", "int"),), ("c",)),
    }
    definition = analyze_view("select a.B_c as k1, a_b.c as k2 from s.x a join s.y a_b on a.B_c = a_b.c", masters)
    assert [h.name for h in definition.hidden_columns] == ["_mv_1_a_B_c", "_mv_3_a_b_c"]


def test_without_collisions_names_stay_simple():
    definition = analyze_view("select a_b.v from s.left_t a_b join s.right_t r on a_b.c = r.b_c", COLLIDING)
    assert [h.name for h in definition.hidden_columns] == ["_mv_a_b_c", "_mv_r_b_c"]


def test_key_column_name_helper():
    assert key_column_name("o", "order_id") == "_mv_o_order_id"
    assert key_column_name("o", "order_id", length_prefixed=True) == "_mv_1_o_order_id"


def test_key_columns_use_the_master_spelling():
    masters = {"s.t": MasterTable("s.t", (("OrderId", "int"), ("v", "int")), ("orderid",))}
    definition = analyze_view("select v from s.t", masters)
    assert [h.name for h in definition.hidden_columns] == ["_mv_t_OrderId"]
    assert definition.referenced_columns["t"] == frozenset({"OrderId", "v"})


def test_aggregate_views_store_no_keys_and_always_a_row_count(view):
    definition = view("select status, count(*) as n, count(amount) as amounts from shop.orders group by status")
    assert [h.name for h in definition.hidden_columns] == [ROW_COUNT_COLUMN]
    assert definition.key_columns("orders") == ()
    assert definition.referenced_columns["orders"] == frozenset({"status", "amount"})


def test_avg_stores_sum_and_count_and_sum_stores_count(view):
    definition = view(
        "select status, avg(amount) as mean_amount, sum(amount) as total from shop.orders group by status"
    )
    assert [(h.name, h.purpose, h.outputs) for h in definition.hidden_columns] == [
        ("_mv_count", HiddenPurpose.ROW_COUNT, ()),
        ("_mv_cnt_mean_amount", HiddenPurpose.NONNULL_COUNT, ("mean_amount", "total")),
        ("_mv_sum_mean_amount", HiddenPurpose.SUM, ("mean_amount",)),
    ]
    assert [h.name for h in definition.support_columns("total")] == ["_mv_cnt_mean_amount"]


def test_count_needs_no_helper_and_min_max_a_count_and_a_reserve(view):
    definition = view(
        "select status, count(amount) as n, min(amount) as lo, max(amount) as hi from shop.orders group by status"
    )
    assert [(h.name, h.purpose, h.outputs) for h in definition.hidden_columns] == [
        ("_mv_count", HiddenPurpose.ROW_COUNT, ()),
        ("_mv_cnt_lo", HiddenPurpose.NONNULL_COUNT, ("lo", "hi")),
        ("_mv_top_lo", HiddenPurpose.RESERVE, ("lo",)),
        ("_mv_top_hi", HiddenPurpose.RESERVE, ("hi",)),
    ]
    assert [h.name for h in definition.reserves] == ["_mv_top_lo", "_mv_top_hi"]
    # a global aggregate keeps no reserve (its rows would be ranked in one task): recomputed
    assert [h.name for h in view("select max(amount) as hi from shop.orders").hidden_columns] == ["_mv_count", "_mv_cnt_hi"]
