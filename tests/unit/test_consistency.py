"""The generic test's SQL: hidden columns left out, doubles rounded, multiplicities kept, quoting."""

import pytest
import sqlglot

from dbt_incremental_mv.consistency import NotAFastRefreshView, mismatch_sql, visible_columns

COLUMNS = [("order_id", "bigint"), ("total", "double"), ("_mv_o_order_id", "bigint"), ("_mv_count", "bigint")]
DEFINITION = "select o.order_id, o.total from `shop`.`orders` o;"


def test_hidden_columns_are_not_compared():
    assert visible_columns(COLUMNS) == [("order_id", "bigint"), ("total", "double")]
    sql = mismatch_sql("shop.v", COLUMNS, DEFINITION)
    assert "_mv_o_order_id" not in sql and "_mv_count" not in sql


def test_both_directions_as_multisets():
    sql = mismatch_sql("shop.v", COLUMNS, DEFINITION)
    # rows counted on each side and joined NULL-safely (EXCEPT ALL: Spark 3.5 fails to plan it over
    # a correlated scalar subquery)
    assert "except all" not in sql and sql.count("count(*) as `mv_copies`") == 4
    assert "m.`order_id` <=> f.`order_id` and m.`total` <=> f.`total`" in sql
    assert sql.count("where m.`mv_copies` > coalesce(f.`mv_copies`, 0)") == 2
    assert "'in the defining query, missing from the view' as `mv_problem`" in sql
    assert "'in the view, not in the defining query' as `mv_problem`" in sql
    assert "from `shop`.`v`" in sql
    sqlglot.parse_one(sql, read="spark")  # one statement that parses (the trailing ';' was dropped)


def test_floating_point_columns_compared_to_nine_significant_digits():
    sql = mismatch_sql("shop.v", COLUMNS, DEFINITION)
    assert "format_string('%.9g', `total`) as `total`" in sql
    assert "format_string('%.9g', `order_id`)" not in sql


def test_identifiers_are_quoted():
    sql = mismatch_sql("shop.v", [("we`ird", "string")], "select 1 as `we``ird`")
    assert "`we``ird`" in sql


@pytest.mark.parametrize("stored", [None, "", "  "])
def test_a_table_not_built_by_fast_refresh_is_named(stored):
    with pytest.raises(NotAFastRefreshView, match=r"shop\.v has no stored definition.*fast_refresh"):
        mismatch_sql("shop.v", COLUMNS, stored)


def test_the_query_is_compared_as_the_view_computes_it():
    # a collection the SQL leaves unordered ordered by value; a distinct count over a window (which
    # Spark does not run) as the size of the set; a LISTAGG without separator with Spark's (none)
    sql = mismatch_sql(
        "shop.v",
        [("s", "string"), ("n", "bigint")],
        "select listagg(status) as s, count(distinct status) over (partition by order_id) as n from shop.orders",
    )
    assert "LISTAGG(`status`, NULL) WITHIN GROUP (ORDER BY `status` NULLS LAST) AS `s`" in sql
    assert "SIZE(COLLECT_SET(`status`) OVER (PARTITION BY `order_id`)) AS `n`" in sql
    # SQL the analysis does not read is compared as written
    assert "select nonsense(" in mismatch_sql("shop.v", [("s", "string")], "select nonsense( as s")
