"""Outer joins whose null-extended rows the query discards, read as inner joins
(analysis/null_rejection.py): which conditions discard them, which joins change, and which stay."""

from __future__ import annotations

import pytest
import sqlglot

from dbt_incremental_mv.analysis.null_rejection import with_outer_joins_made_inner

O = "shop.orders o"
C = "shop.customers c"


def _sides(sql: str) -> list[str]:
    tree = with_outer_joins_made_inner(sqlglot.parse_one(sql, read="spark"))
    return [
        " ".join(p for p in ((j.args.get("side") or ""), (j.args.get("kind") or "")) if p).upper() or "INNER"
        for j in tree.find_all(sqlglot.exp.Join)
    ]


@pytest.mark.parametrize(
    "sql, sides",
    [
        # WHERE conditions no NULL satisfies, on the null-supplying side
        (f"select * from {O} left join {C} on o.customer_id = c.customer_id where c.country = 'NL'", ["INNER"]),
        (f"select * from {O} left join {C} on o.customer_id = c.customer_id where c.name <> o.status", ["INNER"]),
        (f"select * from {O} left join {C} on o.customer_id = c.customer_id where c.customer_id is not null", ["INNER"]),
        (f"select * from {O} left outer join {C} on o.customer_id = c.customer_id where c.segment > 'a'", ["INNER"]),
        # ... that a NULL satisfies, or that are no condition on one column alone: left as written
        (f"select * from {O} left join {C} on o.customer_id = c.customer_id where c.customer_id is null", ["LEFT"]),
        (f"select * from {O} left join {C} on o.customer_id = c.customer_id where c.country = 'NL' or c.country is null",
         ["LEFT"]),
        (f"select * from {O} left join {C} on o.customer_id = c.customer_id where coalesce(c.country, 'NL') = 'NL'",
         ["LEFT"]),
        (f"select * from {O} left join {C} on o.customer_id = c.customer_id where c.country <=> 'NL'", ["LEFT"]),
        (f"select * from {O} left join {C} on o.customer_id = c.customer_id where c.country in ('NL', 'BE')", ["LEFT"]),
        # on the preserved side: nothing changes
        (f"select * from {O} left join {C} on o.customer_id = c.customer_id where o.status = 'open'", ["LEFT"]),
        # an inner join after it reading the null-supplying side, and the chain it then makes inner
        (f"select * from {O} left join {C} on o.customer_id = c.customer_id "
         "join shop.countries n on n.country = c.country", ["INNER", "INNER"]),
        ("select * from shop.countries n left join shop.customers c on c.country = n.country "
         f"left join {O} on o.customer_id = c.customer_id where o.amount > 0", ["INNER", "INNER"]),
        # a RIGHT JOIN whose preserved rows (the items before it null-extended) the WHERE discards
        (f"select * from {O} right join {C} on o.customer_id = c.customer_id where o.status = 'open'", ["INNER"]),
        (f"select * from {O} right join {C} on o.customer_id = c.customer_id where c.country = 'NL'", ["RIGHT"]),
        # an inner join before the outer one filters only what is joined before it
        ("select * from shop.countries n join shop.customers c on c.country = n.country "
         f"right join {O} on o.customer_id = c.customer_id", ["INNER", "RIGHT"]),
        # FULL, SEMI and ANTI joins are left as written
        (f"select * from {O} full outer join {C} on o.customer_id = c.customer_id where c.country = 'NL'", ["FULL OUTER"]),
        (f"select * from {O} left semi join {C} on o.customer_id = c.customer_id where o.status = 'x'", ["LEFT SEMI"]),
        # each SELECT by its own conditions: a CTE's LEFT JOIN is not made inner by the query reading it
        (f"with j as (select o.order_id, c.country from {O} left join {C} on o.customer_id = c.customer_id) "
         "select * from j where j.country = 'NL'", ["LEFT"]),
    ],
)
def test_outer_joins_whose_null_extended_rows_are_discarded_are_inner(sql, sides):
    assert _sides(sql) == sides


def test_the_joins_read_as_inner_are_named_as_written_for_explain():
    from dbt_incremental_mv.analysis.analyze import outer_joins_made_inner

    sql = (
        f"select * from {O} left join {C} on o.customer_id = c.customer_id "
        "left join shop.countries n on n.country = c.country where c.segment = 'retail'"
    )
    assert outer_joins_made_inner(sql) == ["LEFT JOIN c"]
    assert outer_joins_made_inner(f"select * from {O} left join {C} on o.customer_id = c.customer_id") == []
