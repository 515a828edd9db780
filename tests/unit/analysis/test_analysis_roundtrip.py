"""Every accepted view renders deterministically, re-parses, and is a fixed point: analysing
the rendered query (visible columns) gives the same query again."""

from __future__ import annotations

import pytest

from dbt_incremental_mv.analysis import ViewClass
from dbt_incremental_mv.analysis.render import render_select

ACCEPTED = [
    ("single table", ViewClass.JOIN,
     "select order_id, amount * 2 as double_amount from shop.orders where status = 'open'"),
    ("star", ViewClass.JOIN, "select * from shop.customers where country <> 'NL'"),
    ("inner join", ViewClass.JOIN,
     "select o.order_id, c.name from shop.orders o join shop.customers c on o.customer_id = c.customer_id"),
    ("comma join", ViewClass.JOIN,
     "select o.order_id, c.name from shop.orders o, shop.customers c where o.customer_id = c.customer_id"),
    ("three-way join", ViewClass.JOIN,
     "select o.order_id, n.region from shop.orders o join shop.customers c on o.customer_id = c.customer_id "
     "join shop.countries n on n.country = c.country where o.amount > 1 and (c.segment = 'a' or n.region = 'b')"),
    ("self-join", ViewClass.JOIN,
     "select e.name, m.name as manager from shop.employees e join shop.employees m on e.manager_id = m.emp_id"),
    ("null-safe join", ViewClass.JOIN,
     "select o.order_id, c.name from shop.orders o join shop.customers c on o.customer_id <=> c.customer_id"),
    ("cross join", ViewClass.JOIN, "select o.order_id, n.region from shop.orders o cross join shop.countries n"),
    ("left join", ViewClass.OUTER_JOIN,
     "select l.order_id, l.line_no, p.name from shop.order_lines l left join shop.products p "
     "on l.product_id = p.product_id and p.category <> 'x'"),
    ("right join", ViewClass.OUTER_JOIN,
     "select o.order_id, c.name from shop.orders o right join shop.customers c on o.customer_id = c.customer_id"),
    ("mixed chain", ViewClass.OUTER_JOIN,
     "select o.order_id, c.name, l.line_no, p.name as product from shop.orders o "
     "join shop.customers c on o.customer_id = c.customer_id "
     "left join shop.order_lines l on l.order_id = o.order_id "
     "left join shop.products p on p.product_id = l.product_id"),
    ("cte into outer join", ViewClass.OUTER_JOIN,
     "with p as (select product_id, upper(name) as pname from shop.products where category = 'toys') "
     "select l.order_id, l.line_no, p.pname from shop.order_lines l left join p on p.product_id = l.product_id"),
    ("aggregate", ViewClass.AGGREGATE,
     "select product_id, count(*) as n, sum(quantity) as units, avg(unit_price) as price, "
     "min(unit_price) as lo, max(unit_price) as hi from shop.order_lines group by product_id"),
    ("global aggregate", ViewClass.AGGREGATE, "select count(*) as n, sum(amount) as total from shop.orders"),
    ("aggregate over join", ViewClass.AGGREGATE,
     "select c.country, count(*) as n, sum(o.amount) as total from shop.orders o "
     "join shop.customers c on o.customer_id = c.customer_id where o.status = 'paid' group by c.country"),
    ("aggregate over final cte", ViewClass.AGGREGATE,
     "with j as (select c.country, o.amount from shop.orders o join shop.customers c "
     "on o.customer_id = c.customer_id) select country, sum(amount) as total from j group by country"),
    ("expressions", ViewClass.JOIN,
     "select order_id, case when amount > 100 then 'big' else 'small' end as size, "
     "coalesce(status, 'n/a') as st, cast(amount as bigint) as whole, date_add(order_date, 1) as next_day, "
     "concat(status, '-', cast(order_id as string)) as label from shop.orders"),
]


@pytest.mark.parametrize("expected_class, sql", [pytest.param(c, s, id=i) for i, c, s in ACCEPTED])
def test_accepted_views_render_to_a_fixed_point(view, rendered, expected_class, sql):
    definition = view(sql)
    assert definition.view_class is expected_class
    full = rendered(definition)
    visible = rendered(definition, include_hidden=False)
    if not definition.reserves:  # (a view with reserves ranks its rows first: analysis/render.py)
        assert full.startswith(visible.split(" FROM ", 1)[0])
    again = view(visible)
    assert render_select(again, include_hidden=False) == visible
    assert render_select(again) == full
    assert again.stored_columns == definition.stored_columns
