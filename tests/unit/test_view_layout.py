"""The layout a build writes a join view in (layout.py), without Spark."""

from __future__ import annotations

from dbt_incremental_mv.analysis import analyze_view
from dbt_incremental_mv.layout import BLOOM_PROPERTY, ROW_GROUP_BYTES, view_layout
from tests.unit.refresh.views.test_join_restrictions import CHAIN, MASTERS

SIZES = {"shop.lines": 6_000_000, "shop.orders": 1_500_000, "shop.customers": 150_000}


def test_a_join_view_is_sorted_globally_by_its_largest_masters_key_so_each_file_holds_a_range_of_it():
    layout = view_layout(analyze_view(CHAIN, MASTERS), SIZES)
    query = layout.sorted_query("select 1")
    # ORDER BY, not SORT BY: Spark range-partitions the rows, so the files' key ranges are disjoint
    # and a DELETE of the oldest and newest keys plans the first and last files only
    assert query.endswith("\norder by `_mv_l_order_id`, `_mv_l_line_no`"), query
    properties = layout.properties()
    assert properties["write.parquet.row-group-size-bytes"] == str(ROW_GROUP_BYTES)
    # the other occurrences' hidden keys are looked up by literals: bloom filters
    assert {k for k in properties if k.startswith(BLOOM_PROPERTY)} == {
        f"{BLOOM_PROPERTY}_mv_o_order_id", f"{BLOOM_PROPERTY}_mv_c_customer_id"
    }


def test_without_sizes_the_first_occurrence_sets_the_order():
    layout = view_layout(analyze_view(CHAIN, MASTERS), {})
    first = analyze_view(CHAIN, MASTERS).occurrences[0].alias
    assert layout.sort_by[0].startswith(f"_mv_{first}_"), layout
