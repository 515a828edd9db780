"""Name resolution checked against sqlglot's own (issue 38, item 4).

The analysis resolves every column reference, through CTEs and derived tables, to an expression
over master-table occurrences (analysis/resolver.py, analysis/scope.py). sqlglot's optimizer
does the same job with the Spark dialect's rules: ``qualify`` (stars expanded, every column
qualified, GROUP BY aliases and positions expanded, unknown or ambiguous columns rejected), then
``merge_subqueries`` and ``eliminate_ctes`` (simple CTEs and derived tables merged into the
query that reads them). Over the generated definitions and the hand-written queries below, both
must give every output column the same expression, and a query sqlglot cannot qualify must be
refused.

Why the analysis keeps its own resolver rather than calling sqlglot's (measured on the 3,132
queries the unit suite analyses: 3,093 resolve identically):
* output names: Spark names ``select O.ORDER_ID, amount AS AMT`` ``ORDER_ID`` and ``AMT``;
  ``qualify`` normalises identifiers first and names them ``order_id``, ``amt``, which would
  rename a user's view columns;
* column lists: ``from shop.products p(pid, pname, pcat)`` leaves sqlglot with ``p.pid``, not
  the master column ``product_id`` that refresh needs;
* merging: sqlglot does not merge a CTE into the NULL-supplying side of an outer join or under
  an aggregate (``merge_subqueries`` keeps them nested); fast refresh must (a filtered master
  occurrence);
* refusals: for an ambiguous column sqlglot says "could not be resolved"; the analysis names the
  tables that have it and says to qualify it, and for a wrong qualifier lists the columns.
Those cases are left out below (``DIFFERENT_ON_PURPOSE``); everything else is held equal.
"""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.eliminate_ctes import eliminate_ctes
from sqlglot.optimizer.merge_subqueries import merge_subqueries
from sqlglot.optimizer.qualify import qualify

from dbt_incremental_mv.analysis import MasterTable, UnsupportedViewError
from dbt_incremental_mv.analysis.resolver import Resolver
from tests.fuzz.generator import Generator
from tests.unit.analysis.conftest import MASTERS
from tests.unit.test_generated_definitions import TABLES

HAND_WRITTEN = (
    "select o.order_id, c.name from shop.orders o join shop.customers c on o.customer_id = c.customer_id",
    "select * from shop.orders",
    "select o.*, c.name as customer_name from shop.orders o left join shop.customers c on o.customer_id = c.customer_id",
    "select * except (status, amount) from shop.orders",
    "select order_id, name from shop.orders join shop.customers using_none on orders.customer_id = using_none.customer_id",
    "select shop.orders.order_id, status from shop.orders",
    "select e.address.city as city, e.name from shop.employees e",
    "select status, count(*) as n, sum(amount) as total from shop.orders group by status",
    "select status as s, count(*) as n from shop.orders group by s",
    "select status, order_date, max(amount) as hi from shop.orders group by 2, 1",
    "select o.status, c.country, avg(o.amount) as mean from shop.orders o join shop.customers c "
    "on o.customer_id = c.customer_id group by all",
    "with paid as (select order_id, amount, customer_id from shop.orders where status = 'paid') "
    "select p.order_id, p.amount * 2 as doubled, c.name from paid p join shop.customers c on p.customer_id = c.customer_id",
    "with base as (select order_id, amount, status from shop.orders where amount > 0), "
    "paid as (select order_id, amount * 2 as doubled from base where status = 'paid') "
    "select p.order_id, p.doubled + 1 as bumped from paid p",
    "select x.order_id, x.total from (select order_id, amount + 1 as total from shop.orders) x",
    "select nl.name, o.order_id from shop.orders o join (select customer_id, name from shop.customers "
    "where country = 'NL') nl on nl.customer_id = o.customer_id",
    "with j as (select o.order_id, c.name, o.amount from shop.orders o join shop.customers c "
    "on o.customer_id = c.customer_id) select order_id, upper(name) as who from j where amount > 10",
    "with j as (select o.order_id, o.amount from shop.orders o join shop.customers c on o.customer_id = c.customer_id), "
    "k as (select * from j) select * from k",
    "select l.order_id, l.line_no, p.name, l.quantity * l.unit_price as line_total from shop.order_lines l "
    "join shop.products p on l.product_id = p.product_id",
    "select m.name as manager, e.name as employee from shop.employees e join shop.employees m on e.manager_id = m.emp_id",
    "select coalesce(c.segment, 'none') as segment, case when o.amount > 100 then 'big' else 'small' end as size, "
    "cast(o.order_date as string) as day from shop.orders o join shop.customers c on o.customer_id = c.customer_id",
    "select o.order_id, n.region from shop.orders o join shop.customers c on o.customer_id = c.customer_id "
    "join shop.countries n on c.country = n.country",
)

# Different on purpose (see the module docstring): column lists, merging into outer joins and
# aggregates, which sqlglot leaves nested.
DIFFERENT_ON_PURPOSE = (
    "select p.pid from shop.products p(pid, pname, pcat)",
    "with dutch as (select * from shop.customers where country = 'NL') "
    "select o.order_id, d.name from shop.orders o left join dutch d on o.customer_id = d.customer_id",
)


def _schema(masters: dict[str, MasterTable]) -> dict[str, dict[str, dict[str, str]]]:
    schema: dict[str, dict[str, dict[str, str]]] = {}
    for name, master in masters.items():
        database, table = name.split(".")
        schema.setdefault(database, {})[table] = dict(master.columns)
    return schema


def _canonical(expression: exp.Expression, positions: dict[str, int]) -> str:
    """An expression with each FROM item named by its position, without parentheses, comments
    or quoting: both resolvers name a merged occurrence differently (the analysis by the alias
    that reads it, sqlglot by the table inside)."""
    expression = expression.copy()
    for column in list(expression.find_all(exp.Column)):
        if column.table:
            column.set("table", exp.to_identifier(f"t{positions[column.table.casefold()]}"))
    expression = expression.transform(lambda node: node.this if isinstance(node, exp.Paren) else node)
    return expression.sql(dialect="spark", comments=False).replace("`", "").casefold()


def ours(select: exp.Select, masters: dict[str, MasterTable]) -> list[tuple[str, str]]:
    resolved = Resolver(masters).query(select)
    positions = {o.alias: i for i, o in enumerate(resolved.occurrences)}
    return [(p.name.casefold(), _canonical(p.expression, positions)) for p in resolved.projections]


def sqlglots(select: exp.Select, masters: dict[str, MasterTable]) -> list[tuple[str, str]] | None:
    """sqlglot's resolution of the output columns, or None when it leaves a CTE or derived table
    nested (it merges only what it can prove equivalent for any engine)."""
    flat = eliminate_ctes(merge_subqueries(qualify(select.copy(), dialect="spark", schema=_schema(masters))))
    if not isinstance(flat, exp.Select) or flat.args.get("with_") or flat.find(exp.Subquery):
        return None
    items = [flat.args["from_"].this, *(join.this for join in flat.args.get("joins") or [])]
    positions = {item.alias_or_name.casefold(): i for i, item in enumerate(items)}
    return [(s.alias_or_name.casefold(), _canonical(s.unalias(), positions)) for s in flat.selects]


def _generated_selects(seed: int, count: int) -> list[str]:
    """Every SELECT (each UNION ALL branch) of the generated definitions the analysis maintains
    (but the ranked ones: their window is taken out before resolution, analysis/ranking.py; the
    windowed ones, their filters after the windows carried apart, analysis/windowing.py; a
    UNION ALL in a subquery, rewritten into a top-level one first, analysis/distribute.py; and
    the outer query of a joining CTE joined again, of a SELECT DISTINCT read whole or of an
    aggregate joined back: sqlglot keeps them nested, the analysis merges them; the inner query is
    compared, and Spark compares the whole in tests/functional/test_generated_views.py; and
    semi joins (IN, EXISTS), scalar subqueries and generated rows: read by analysis/partitionwise.py's
    walk, not by the resolver; queries split into states: each part resolved apart, analysis/states.py)."""
    selects = []
    for definition in Generator(seed).definitions(count):
        if (
            definition.refused is None
            and not {"ranked", "windowed", "union in a subquery", "generated rows", "split into states"}
            & set(definition.features)
            and "exists (" not in definition.sql()
            and "in (select" not in definition.sql()
            and "(select max(" not in definition.sql()
        ):
            tree = sqlglot.parse_one(definition.sql(), read="spark")
            selects.extend(
                s.sql(dialect="spark")
                for s in tree.find_all(exp.Select)
                # (the outer query of a nested join is the tree, or the query holding its WITH when
                # a SELECT DISTINCT of it is wrapped in a subquery)
                if not (
                    (s is tree or s.args.get("with_") is not None)
                    and {"nested join", "distinct in a subquery", "aggregate joined back"} & set(definition.features)
                )
            )
    return selects


def _same_resolution(sql: str, masters: dict[str, MasterTable]) -> None:
    select = sqlglot.parse_one(sql, read="spark")
    theirs = sqlglots(select, masters)
    assert theirs is not None, f"sqlglot left a CTE or subquery nested in {sql}"
    assert ours(select, masters) == theirs, sql


@pytest.mark.parametrize("sql", HAND_WRITTEN)
def test_hand_written_queries_resolve_as_sqlglot_resolves_them(sql):
    _same_resolution(sql, MASTERS)


def test_generated_definitions_resolve_as_sqlglot_resolves_them():
    selects = _generated_selects(37, 620)
    assert len(selects) > 500
    mismatched = []
    for sql in selects:
        try:
            _same_resolution(sql, TABLES)
        except AssertionError as error:
            mismatched.append(str(error))
    assert not mismatched, "\n".join(mismatched[:5])


@pytest.mark.parametrize("sql", DIFFERENT_ON_PURPOSE)
def test_where_the_resolvers_differ_on_purpose_they_still_do(sql):
    """If sqlglot learns these, the analysis could lean on it further: this test says when."""
    select = sqlglot.parse_one(sql, read="spark")
    assert sqlglots(select, MASTERS) != ours(select, MASTERS)


@pytest.mark.parametrize(
    "sql",
    [
        "select o.order_id, nope from shop.orders o",
        "select o.nope from shop.orders o",
        "select customer_id from shop.orders o join shop.customers c on o.customer_id = c.customer_id",
        "select x.order_id from shop.orders o",
        "select o.status, count(*) as n from shop.orders o group by 3",
    ],
)
def test_what_sqlglot_cannot_resolve_is_refused(sql):
    select = sqlglot.parse_one(sql, read="spark")
    with pytest.raises(OptimizeError):
        qualify(select.copy(), dialect="spark", schema=_schema(MASTERS))
    with pytest.raises(UnsupportedViewError):
        Resolver(MASTERS).query(select)


def test_output_names_keep_the_case_written_where_sqlglot_lowercases_them():
    select = sqlglot.parse_one("select O.ORDER_ID, amount as AMT from SHOP.Orders o", read="spark")
    assert [p.name for p in Resolver(MASTERS).query(select).projections] == ["ORDER_ID", "AMT"]
    qualified = qualify(select.copy(), dialect="spark", schema=_schema(MASTERS))
    assert [s.alias_or_name for s in qualified.selects] == ["order_id", "amt"]
