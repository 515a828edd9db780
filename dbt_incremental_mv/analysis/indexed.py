"""An indexed join state: the rows of a join's facts kept sorted by a dimension's key.

When a dimension row of a join view changes (a customer), the refresh must find the rows of the
other tables that join it (the customer's orders, their line items). A lakehouse has no index: the
facts are sorted by their own keys, so that lookup reads them whole, however few rows it wants.
An indexed join state is the join of the view's other tables (its WHERE on them applied, the
columns the view reads of them and their keys), kept as an internal state **sorted by the column
that holds the dimension's key**, so that the rows of a few changed dimension keys are found by
file and row-group pruning; the view is then the dimension joined to that state, maintained in
two steps (refresh/units.py). A fact change costs the state's refresh too (its write, its log):
the model config ``indexed_state`` chooses it.

The dimension is an occurrence whose whole key another occurrence's columns equal in an inner join,
whose removal leaves the other tables joined (the fewest rows first, when the masters' sizes are
known). Only plain inner joins of masters (no CTE, subquery, USING or outer join), as the join
view class is. Pure Python, like the rest of the analysis.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify_columns import qualify_columns

from dbt_incremental_mv.analysis.analyze import analyze_view
from dbt_incremental_mv.analysis.errors import UnsupportedViewError
from dbt_incremental_mv.analysis.links import key_links
from dbt_incremental_mv.analysis.model import MasterTable, ViewClass, ViewDefinition
from dbt_incremental_mv.analysis.resolved import split_conjuncts
from dbt_incremental_mv.analysis.resolver import Resolver
from dbt_incremental_mv.analysis.states import (
    STATE_SCHEMA,
    State,
    StateSplit,
    key_of,
    schema_of,
    state_column,
    state_columns,
)

# the alias of the state in the query over it
STATE_ALIAS = "mv_indexed"


@dataclass(frozen=True)
class _Item:
    alias: str
    table: exp.Table
    on: list[exp.Expr]  # the conjuncts of its ON (the FROM item: none)


def indexed_split(
    sql: str,
    view: ViewDefinition,
    masters: Mapping[str, MasterTable],
    master_rows: Mapping[str, int] | None = None,
) -> StateSplit | None:
    """The join view ``view`` (of ``sql``) as its facts' join sorted by a dimension's key (the
    state) and the dimension joined to it; None when it has no such dimension (module doc)."""
    if view.view_class is not ViewClass.JOIN or len(view.occurrences) < 2:
        return None
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except SqlglotError:
        return None
    if not isinstance(tree, exp.Select) or _beyond_joins(tree):
        return None
    schema = schema_of(tree, masters)
    if schema is None:
        return None
    try:
        tree = qualify_columns(tree, schema=schema, expand_stars=False, dialect="spark")
    except Exception:  # noqa: BLE001 - a column sqlglot cannot resolve: no such split
        return None
    items = _items(tree)
    if items is None:
        return None
    by_alias = {i.alias: i for i in items}
    if STATE_ALIAS in by_alias:  # (the query over the state names it so)
        return None
    rows = master_rows or {}
    candidates = []
    for link in key_links(view):
        dimension = link.source.casefold()
        if not link.inner or dimension not in by_alias or link.target.casefold() not in by_alias:
            continue
        size = rows.get(view.occurrence(link.source).master.name, -1)
        candidates.append((size, [i.alias for i in items].index(dimension), dimension, link))
    for _, _, dimension, link in sorted(candidates, key=lambda c: (c[0] < 0, c[0], c[1])):
        found = _split(tree, items, dimension, link.target.casefold(), link.columns, masters)
        if found is not None:
            return found
    return None


def _beyond_joins(tree: exp.Select) -> bool:
    """Whether the query does more than join tables, filter and select (what this leaves as is)."""
    if any(tree.args.get(k) for k in ("with_", "group", "having", "qualify", "distinct", "limit", "laterals")):
        return True
    return any(isinstance(n, (exp.Subquery, exp.Exists, exp.Window, exp.AggFunc, exp.Star)) for n in tree.walk())


def _items(tree: exp.Select) -> list[_Item] | None:
    from_ = tree.args.get("from_")
    joins = tree.args.get("joins") or []
    if from_ is None or not joins or not isinstance(from_.this, exp.Table):
        return None
    items = [_Item(from_.this.alias_or_name.casefold(), from_.this, [])]
    for join in joins:
        if (
            not isinstance(join.this, exp.Table)
            or join.args.get("using")
            or join.args.get("method")
            or (join.side or join.kind or "INNER").upper() != "INNER"
            or join.args.get("on") is None
        ):
            return None
        items.append(_Item(join.this.alias_or_name.casefold(), join.this, split_conjuncts(join.args["on"])))
    if any(not i.table.db for i in items) or len({i.alias for i in items}) != len(items):
        return None
    return items


def _aliases(node: exp.Expr) -> set[str]:
    return {c.table.casefold() for c in node.find_all(exp.Column)}


def _split(
    tree: exp.Select,
    items: list[_Item],
    dimension: str,
    fact: str,
    fact_columns: tuple[str, ...],
    masters: Mapping[str, MasterTable],
) -> StateSplit | None:
    rest = [i for i in items if i.alias != dimension]
    inside = {i.alias for i in rest}
    where = split_conjuncts(tree.args["where"].this) if tree.args.get("where") is not None else []
    # the state: the other tables joined as written, the conjuncts of theirs alone applied; the
    # conjuncts that read the dimension and them join it to the state, those of it alone filter it
    state_where: list[exp.Expr] = []
    state_joins: list[exp.Join] = []
    top_on: list[exp.Expr] = []
    top_where: list[exp.Expr] = []

    def place(conjuncts: list[exp.Expr], state: list[exp.Expr]) -> None:
        for conjunct in conjuncts:
            aliases = _aliases(conjunct)
            if aliases <= inside:
                state.append(conjunct)
            else:
                (top_on if aliases & inside else top_where).append(conjunct)

    for item in items:
        if item.alias == dimension or item is rest[0]:
            place(item.on, state_where)
            continue
        own: list[exp.Expr] = []
        place(item.on, own)
        if not own:
            return None  # joined to the others only through the dimension
        state_joins.append(exp.Join(this=item.table.copy(), on=exp.and_(*(c.copy() for c in own))))
    place(where, state_where)
    if not top_on:
        return None
    columns: dict[tuple[str, str], str] = {}

    def named(alias: str, column: str) -> str:
        return state_column(columns, alias, column)

    outside = [*tree.expressions, *top_on, *top_where]
    for node in outside:
        for column in node.find_all(exp.Column):
            if column.table.casefold() in inside:
                named(column.table.casefold(), column.name.casefold())
    resolver = Resolver(masters)
    for item in rest:
        try:
            master = resolver.master(item.table)
        except UnsupportedViewError:
            return None
        if not master.key:
            return None
        for key_column in master.key:
            named(item.alias, key_column.casefold())
    sort_by = tuple(named(fact, c.casefold()) for c in fact_columns)
    state = exp.Select(
        expressions=[exp.alias_(exp.column(column, table=alias), made) for (alias, column), made in columns.items()]
    )
    state.set("from_", exp.From(this=rest[0].table.copy()))
    if state_joins:
        state.set("joins", state_joins)
    if state_where:
        state.set("where", exp.Where(this=exp.and_(*(c.copy() for c in state_where))))
    state_sql = state.sql(dialect="spark")
    try:
        state_view = analyze_view(state_sql, masters)
    except UnsupportedViewError:
        return None
    key = key_of(state_view)
    if not key or state_view.view_class is not ViewClass.JOIN:
        return None
    name = f"by_{'_'.join(c.casefold() for c in fact_columns)}"
    top = tree.copy()

    def read_from_state(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table.casefold() in inside:
            return exp.column(columns[(node.table.casefold(), node.name.casefold())], table=STATE_ALIAS)
        return node

    top.set("expressions", [p.transform(read_from_state) for p in top.expressions])
    rewritten_on = [c.copy().transform(read_from_state) for c in top_on]
    rewritten_where = [c.copy().transform(read_from_state) for c in top_where]
    dimension_item = next(i for i in items if i.alias == dimension)
    top.set("from_", exp.From(this=dimension_item.table.copy()))
    top.set(
        "joins",
        [
            exp.Join(
                this=exp.Table(
                    this=exp.to_identifier(name),
                    db=exp.to_identifier(STATE_SCHEMA),
                    alias=exp.TableAlias(this=exp.to_identifier(STATE_ALIAS)),
                ),
                on=exp.and_(*rewritten_on),
            )
        ],
    )
    top.set("where", exp.Where(this=exp.and_(*rewritten_where)) if rewritten_where else None)
    top_sql = top.sql(dialect="spark")
    table = MasterTable(f"{STATE_SCHEMA}.{name}", state_columns(state_view), key)
    try:
        top_view = analyze_view(top_sql, {**masters, table.name: table})
    except UnsupportedViewError:
        return None
    if top_view.view_class is not ViewClass.JOIN:
        return None
    fact_master = next(i for i in rest if i.alias == fact).table.name
    tables = ", ".join(i.table.name for i in rest)
    why = (
        f"indexed by {dimension_item.table.name}'s key: the join of {tables} sorted by "
        f"{fact_master}.{', '.join(fact_columns)}, so that a change of {dimension_item.table.name} finds "
        "its rows without reading them whole"
    )
    return StateSplit(
        (State(name, state_sql, key, ViewClass.JOIN, (), key, sort_by),),
        ViewClass.JOIN,
        top_sql,
        indexed=why,
        indexed_alias=dimension,
    )
