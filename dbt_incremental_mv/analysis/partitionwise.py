"""Views recomputed partition by partition (ViewClass.PER_PARTITION): queries over the rows of one
master, stacked in CTEs or derived tables, whose every window, GROUP BY and DISTINCT partitions by
the same master columns::

    with latest as (
      select *, row_number() over (partition by customer_id, order_id order by updated_at desc) as rn
      from shop.order_events
    ), orders as (
      select customer_id, order_id, amount from latest where rn = 1
    )
    select customer_id, count(*) as orders, sum(amount) as amount,
           rank() over (partition by customer_id order by sum(amount) desc) as ...
    from orders group by customer_id

Each level reads the one below it alone (no join, no set operation); a column that a level selects
as it is *carries* the master column below it. When every window's PARTITION BY, every GROUP BY
and every DISTINCT of every level includes a column carrying the master column ``c`` (for each
``c`` of a common set P), a view row depends only on the master rows of its value of P: the view
is the union, over the values of P, of the query over those rows. A refresh recomputes the values
of P its changes touch (refresh/views/ranked_view.py): it deletes their rows from the view and
inserts the query over the master's rows of them. The query is kept as the user wrote it (a
template, ``PartitionQuery``), with its master read under one alias and the ties of
order-dependent windows broken by the rows' key, so that every build and refresh computes the same
rows.

This is the fallback for queries the other classes refuse (analyze.py): a query they maintain is
maintained by them, with finer deltas.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from sqlglot import exp

from dbt_incremental_mv.analysis import functions
from dbt_incremental_mv.analysis.constructs import unpartitioned_window, unsupported_constructs
from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.model import (
    HiddenColumn,
    HiddenPurpose,
    MasterOccurrence,
    MasterTable,
    OutputColumn,
    PartitionQuery,
    ViewClass,
    ViewDefinition,
)
from dbt_incremental_mv.analysis.outputs import refuse_bad_output_names
from dbt_incremental_mv.analysis.render import PER_PARTITION_MASTER
from dbt_incremental_mv.analysis.resolved import column_node
from dbt_incremental_mv.analysis.windowing import ORDER_DEPENDENT, refuse_order_dependent, rows_frame, window_function

PARTITION = "_mv_p"  # a partition column no visible column holds
HINT = (
    "Partition every window, GROUP BY and DISTINCT of the query by the same column of the one table it reads "
    "(PARTITION BY customer_id, GROUP BY customer_id, ...), or compute the part that is not so in a "
    "fast_refresh model of its own and ref() it"
)


class NotPartitionwise(Exception):
    """The query is not a stack of SELECTs over one table: the other classes' refusal stands."""


@dataclass
class _Level:
    """One SELECT of the stack, and what it reads: ``carried`` maps the names of the rows it reads
    (case-folded) to the master column each carries unchanged (None: a computed value);
    ``row_key``: names of those rows that identify one (None: unknown)."""

    select: exp.Select
    carried: dict[str, str | None]
    row_key: tuple[str, ...] | None


def _stack(
    statement: exp.Select, resolver_master: Callable[[exp.Table], MasterTable]
) -> tuple[list[exp.Select], exp.Table, MasterTable]:
    """The SELECTs from the outer query down to the one reading the master, each reading the next
    alone, the master's table node and the master; NotPartitionwise when the query is not so."""
    if statement.find(exp.Join, exp.SetOperation) is not None:
        raise NotPartitionwise
    ctes: dict[str, exp.Expr] = {}
    levels: list[exp.Select] = []
    node: exp.Expr = statement
    while True:
        if not isinstance(node, exp.Select) or any(node is level for level in levels):
            raise NotPartitionwise
        for cte in (node.args.get("with_") or exp.With()).expressions:
            ctes[cte.alias.casefold()] = cte.this
        levels.append(node)
        source = node.args.get("from_")
        if source is None:
            raise NotPartitionwise
        item = source.this
        alias = item.args.get("alias")
        if isinstance(alias, exp.TableAlias) and alias.columns:
            raise NotPartitionwise  # a column list renames what is carried
        if isinstance(item, exp.Subquery):
            node = item.unnest()
            continue
        if not isinstance(item, exp.Table) or not isinstance(item.this, exp.Identifier):
            raise NotPartitionwise
        if not item.args.get("db") and item.name.casefold() in ctes:
            node = ctes[item.name.casefold()]
            while isinstance(node, exp.Subquery):
                node = node.this
            continue
        tables = [t for t in statement.find_all(exp.Table) if t.args.get("db") or t.name.casefold() not in ctes]
        if len(tables) != 1:
            raise NotPartitionwise
        try:
            master = resolver_master(item)
        except UnsupportedViewError:
            raise NotPartitionwise from None
        return levels, item, master


def _projection_name(projection: exp.Expr) -> str | None:
    name = projection.alias_or_name
    return name or None


def _carried_by(projection: exp.Expr, carried: Mapping[str, str | None]) -> tuple[str | None, str | None]:
    """The input name a projection selects as it is, and the master column that carries."""
    inner = projection.this if isinstance(projection, exp.Alias) else projection
    if isinstance(inner, exp.Column) and not isinstance(inner.this, exp.Star):
        name = inner.name.casefold()
        return name, carried.get(name)
    return None, None


def _outputs(level: _Level) -> list[tuple[str | None, str | None, str | None]]:
    """(output name, input name it selects as it is, master column it carries) per projection,
    stars expanded over the input."""
    found: list[tuple[str | None, str | None, str | None]] = []
    for projection in level.select.expressions:
        star = projection if isinstance(projection, exp.Star) else None
        if isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
            star = projection.this
        if star is not None:
            if any(star.args.get(k) for k in ("replace", "rename")):
                raise NotPartitionwise
            excluded = {c.name.casefold() for c in star.args.get("except") or ()}
            found += [(n, n, c) for n, c in level.carried.items() if n not in excluded]
            continue
        source, master_column = _carried_by(projection, level.carried)
        found.append((_projection_name(projection), source, master_column))
    return found


def _group_items(select: exp.Select) -> list[exp.Expr]:
    """The GROUP BY items, an ordinal or a projection's alias read as the projection."""
    group = select.args.get("group")
    items = []
    projections = select.expressions
    aliases = {p.alias.casefold(): p.this for p in projections if isinstance(p, exp.Alias)}
    for item in group.expressions if group is not None else ():
        if isinstance(item, exp.Literal) and item.is_int and 1 <= int(item.name) <= len(projections):
            projection = projections[int(item.name) - 1]
            item = projection.this if isinstance(projection, exp.Alias) else projection
        elif isinstance(item, exp.Column) and not item.table and item.name.casefold() in aliases:
            item = aliases[item.name.casefold()]
        items.append(item)
    return items


def _carried_set(expressions: Sequence[exp.Expr], carried: Mapping[str, str | None]) -> frozenset[str]:
    """The master columns the plain column references among ``expressions`` carry (case-folded)."""
    found = set()
    for expression in expressions:
        while isinstance(expression, exp.Paren):
            expression = expression.this
        if isinstance(expression, exp.Column) and not isinstance(expression.this, exp.Star):
            column = carried.get(expression.name.casefold())
            if column is not None:
                found.add(column.casefold())
    return frozenset(found)


def _is_aggregate(select: exp.Select) -> bool:
    places = [*select.expressions, *([select.args["having"]] if select.args.get("having") else [])]
    return any(functions.is_aggregate(n) and not functions.is_windowed(n) for p in places for n in p.walk())


def _windows(select: exp.Select) -> list[exp.Window]:
    places = [*select.expressions, *([select.args["qualify"]] if select.args.get("qualify") else [])]
    return [w for p in places for w in p.find_all(exp.Window) if w.parent_select is select]


def _partitions(level: _Level) -> list[frozenset[str]]:
    """The sets of master columns each window, the GROUP BY and the DISTINCT of a level partition
    its rows by: a partition holds the rows with equal values of each set."""
    select = level.select
    found = [_carried_set(w.args.get("partition_by") or [], level.carried) for w in _windows(select)]
    if select.args.get("group") is not None:
        found.append(_carried_set(_group_items(select), level.carried))
    elif _is_aggregate(select):
        found.append(frozenset())  # one group of every row
    if select.args.get("distinct") is not None:
        found.append(frozenset(c.casefold() for _, _, c in _outputs(level) if c is not None))
    return found


def _row_key(level: _Level, outputs: list[tuple[str | None, str | None, str | None]]) -> tuple[str, ...] | None:
    """Names of a level's output rows that identify one, when known."""
    select = level.select
    if select.args.get("distinct") is not None:
        return tuple(n.casefold() for n, _, _ in outputs if n is not None)
    if select.args.get("group") is not None:
        keys = []
        for item in _group_items(select):
            name = next(
                (
                    n
                    for (n, source, _), p in zip(outputs, select.expressions)
                    if n is not None
                    and (
                        (isinstance(item, exp.Column) and source == item.name.casefold())
                        or (p.this if isinstance(p, exp.Alias) else p) == item
                    )
                ),
                None,
            )
            if name is None:
                return None
            keys.append(name.casefold())
        return tuple(keys)
    if _is_aggregate(select):
        return ()
    if level.row_key is None:
        return None
    selected = {source: n.casefold() for n, source, _ in outputs if n is not None and source is not None}
    if not all(k in selected for k in level.row_key):
        return None
    return tuple(selected[k] for k in level.row_key)


def _tie_keys(level: _Level) -> list[exp.Expr] | None:
    """What breaks the ties of a level's order-dependent windows: its group keys when it groups,
    the key of the rows it reads otherwise (None: unknown)."""
    if level.select.args.get("group") is not None:
        return [i.copy() for i in _group_items(level.select)]
    if level.row_key is None:
        return None
    return [exp.column(k) for k in level.row_key]


def _break_ties(level: _Level) -> bool:
    """Append the tie-break to the ORDER BY of each order-dependent window of a level (in place);
    whether any was."""
    appended = False
    for window in _windows(level.select):
        refuse_order_dependent(window)
        if window.this.find(exp.Distinct) is not None:
            raise UnsupportedViewError(
                describe(window),
                "Spark computes no DISTINCT aggregate over a window",
                "Count the distinct values with size(collect_set(x)) over the same window",
            )
        order = window.args.get("order")
        if order is None and isinstance(window_function(window), ORDER_DEPENDENT):
            raise UnsupportedViewError(
                describe(window),
                "it needs ORDER BY: without one its value depends on the order Spark reads the rows in",
                "Order the window by columns that identify a row of its partition",
            )
        if order is None or not (isinstance(window_function(window), ORDER_DEPENDENT) or rows_frame(window)):
            continue
        keys = _tie_keys(level)
        if keys is None:
            raise UnsupportedViewError(
                describe(window),
                "its value depends on the order of the rows its ORDER BY leaves tied, and the rows it reads "
                "have no unique column to break the ties by",
                "Add a unique column to its ORDER BY",
            )
        ordered = [o.this for o in order.expressions]
        missing = [k for k in keys if k not in ordered]
        if missing:
            order.set("expressions", [*order.expressions, *(exp.Ordered(this=k, nulls_first=True) for k in missing)])
            appended = True
    return appended


def _bare(expression: exp.Expr) -> exp.Expr:
    """``expression`` without table qualifiers and parentheses (to compare with GROUP BY items)."""
    copy = expression.copy()
    for column in copy.find_all(exp.Column):
        column.set("table", None)
    while isinstance(copy, exp.Paren):
        copy = copy.this
    return copy


def _refuse_ungrouped(select: exp.Select) -> None:
    """A grouped SELECT reads each column in an aggregate, in a GROUP BY expression, or as the
    name of one of its outputs (HAVING may)."""
    if select.args.get("group") is None and not _is_aggregate(select):
        return
    grouped = {_bare(i) for i in _group_items(select)}
    outputs = {p.alias.casefold() for p in select.expressions if isinstance(p, exp.Alias)}

    def ungrouped(node: exp.Expr) -> exp.Expr | None:
        if _bare(node) in grouped or (functions.is_aggregate(node) and not functions.is_windowed(node)):
            return None
        if isinstance(node, exp.Column):
            return None if isinstance(node.this, exp.Star) or node.name.casefold() in outputs else node
        for child in node.iter_expressions():
            found = ungrouped(child)
            if found is not None:
                return found
        return None

    places = [p.this if isinstance(p, exp.Alias) else p for p in select.expressions]
    places += [select.args[k].this for k in ("having", "qualify") if select.args.get(k) is not None]
    for place in places:
        found = ungrouped(place)
        if found is not None:
            raise UnsupportedViewError(
                describe(found),
                "a column that is neither aggregated nor in GROUP BY",
                "Add the expression to GROUP BY, or aggregate it",
            )


def _refuse_constructs(statement: exp.Select) -> None:
    """What no refresh maintains, wherever it is; DISTINCT, HAVING and QUALIFY are partitioned
    like the rest, and windows are checked here."""
    stripped = statement.copy()
    for select in list(stripped.find_all(exp.Select)):
        select.set("distinct", None)
        for key in ("having", "qualify"):  # (their conditions checked as projections)
            clause = select.args.get(key)
            if clause is not None:
                select.append("expressions", clause.this.copy())
                select.set(key, None)
    for refusal in unsupported_constructs(stripped, windowed=True):
        raise refusal


def analyze_partitionwise(statement: exp.Query, resolver_master: Callable[[exp.Table], MasterTable]) -> ViewDefinition:
    """The PER_PARTITION definition of ``statement``; NotPartitionwise when it is not a stack of
    SELECTs over one master, UnsupportedViewError when it is but cannot be maintained so.
    ``resolver_master``: the master a table node names (Resolver.master)."""
    if not isinstance(statement, exp.Select):
        raise NotPartitionwise
    template = statement.copy()
    selects, table, master = _stack(template, resolver_master)
    _refuse_constructs(template)
    if not master.key:
        raise NotPartitionwise  # (refused as a keyless master by the other classes)
    alias = (table.alias or table.name).casefold()
    carried: dict[str, str | None] = {c.casefold(): c for c in master.column_names}
    levels: list[_Level] = []
    row_key: tuple[str, ...] | None = tuple(k.casefold() for k in master.key)
    for select in reversed(selects):
        level = _Level(select, carried, row_key)
        outputs = _outputs(level)
        levels.append(level)
        carried = {n.casefold(): c for n, _, c in outputs if n is not None}
        row_key = _row_key(level, outputs)
    partitions = [p for level in levels for p in _partitions(level)]
    if not partitions:
        raise NotPartitionwise  # nothing partitions its rows: the other classes' refusal stands
    common = frozenset.intersection(*partitions)
    windows = list(template.find_all(exp.Window))
    unpartitioned = next((w for w in windows if not w.args.get("partition_by")), None)
    if unpartitioned is not None:
        raise unpartitioned_window(unpartitioned)
    if not common and not windows:
        raise NotPartitionwise  # (a global aggregate, or groupings alone: the other classes' refusal says it)
    if not common:
        raise UnsupportedViewError(
            describe(windows[0]),
            "its windows (with the query's groupings and DISTINCTs) share no PARTITION BY column of the table "
            "it reads, so no part of the view depends only on the rows a change touched",
            HINT,
        )
    for level in levels:
        _refuse_ungrouped(level.select)
    tie_broken = any([_break_ties(level) for level in levels])
    top = levels[-1]
    outputs = _outputs(top)
    names = [n for n, _, _ in outputs]
    unnamed = next((p for p in top.select.expressions if _projection_name(p) is None), None)
    if unnamed is not None:
        raise UnsupportedViewError(describe(unnamed), "an output column needs a name", "Name it with AS")
    refuse_bad_output_names([n for n in names if n is not None])
    partition_by = tuple(column_node(alias, master.find_column(c) or c) for c in sorted(common))
    partition_columns: list[str] = []
    hidden: list[HiddenColumn] = []
    for column in sorted(common):
        holder = next((n for n, _, c in outputs if c is not None and c.casefold() == column), None)
        if holder is None:
            source = next((n for n, c in top.carried.items() if c is not None and c.casefold() == column), None)
            if source is None:
                raise UnsupportedViewError(
                    master.find_column(column) or column,
                    "the query partitions its rows by this column but its outer query does not read it, so the "
                    "view's rows of a partition cannot be found",
                    f"Select {master.find_column(column) or column} in the outer query (or in the query it reads)",
                )
            holder = f"{PARTITION}{len(hidden) + 1}"
            top.select.append("expressions", exp.Alias(this=exp.column(source), alias=exp.to_identifier(holder)))
            hidden.append(
                HiddenColumn(holder, column_node(alias, master.find_column(column) or column), HiddenPurpose.PARTITION)
            )
        partition_columns.append(holder)
    table.set("this", exp.to_identifier(PER_PARTITION_MASTER))
    table.set("db", None)
    table.set("catalog", None)
    table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    read = frozenset(
        master.find_column(c.name) or c.name for c in template.find_all(exp.Column) if master.find_column(c.name)
    )
    if any(
        isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
        for p in selects[-1].expressions
    ):
        read = frozenset(master.column_names)
    occurrence = MasterOccurrence(alias, master)
    carried_top = {n.casefold(): c for n, _, c in outputs if n is not None}
    view_outputs = tuple(
        OutputColumn(n, column_node(alias, found) if (found := carried_top.get(n.casefold())) else exp.column(n))
        for n in names
        if n is not None
    )
    return ViewDefinition(
        occurrences=(occurrence,),
        joins=(),
        where_conjuncts=(),
        outputs=view_outputs,
        group_by=(),
        is_aggregate=False,
        view_class=ViewClass.PER_PARTITION,
        hidden_columns=tuple(hidden),
        null_supplying=frozenset(),
        group_key_columns=(),
        referenced_columns=MappingProxyType({alias: read}),
        partition_query=PartitionQuery(template, partition_by, tuple(partition_columns), tie_broken),
    )
