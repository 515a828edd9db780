"""Views whose rows carry window functions over a common partition (ViewClass.WINDOWED)::

    with history as (
      select h.*, lead(h.changed_at) over (partition by h.ticket_id order by h.changed_at) as valid_to
      from tickets.history h where h.field = 'status'
    )
    select ticket_id, status, changed_at, valid_to from history where valid_to is null or status <> 'new'

One SELECT (the *windowed* one) computes the windows over the rows of one master; the queries over
it (CTEs or derived tables each read alone, or none) select and filter its rows. Every window
partitions by a common set of expressions (``partition_by``): a row's windows depend only on the
rows of its partition, so the view is the union over partitions of each one's rows, and a refresh
recomputes the partitions its changes touch (refresh/views/ranked_view.py). ``QUALIFY`` is the
same query with its windows selected and filtered on.

``split_windows`` rewrites the query for the resolver: the filters of the queries over the
windowed SELECT are applied after the windows, so they travel as extra columns under reserved
names (``_mv_wpost_<i>``) instead of merging into the windowed SELECT's WHERE (which filters
before them); the windows themselves resolve in place, as expressions over ``alias.column``.
``windowing`` then takes the common partition, breaks the ties of order-dependent windows by the
master's key, and stores the partition expressions no visible column holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlglot import exp

from dbt_incremental_mv.analysis import functions
from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.hidden import holders
from dbt_incremental_mv.analysis.model import (
    HiddenColumn,
    HiddenPurpose,
    MasterOccurrence,
    OutputColumn,
    Windowing,
)
from dbt_incremental_mv.analysis.resolved import ResolvedQuery, column_node, split_conjuncts, unparenthesized

POST = "_mv_wpost_"  # a filter of a query over the windowed SELECT, selected
QUALIFIED = "_mv_wq_"  # a window a QUALIFY filters on, selected
QUALIFY_ALIAS = "qualified"
HINT = (
    "Partition every window by a key of the rows it reads (PARTITION BY customer_id), compute the "
    "windows in one SELECT over one table and only select and filter over it; or build the view "
    "in a table model of its own"
)
# functions whose value depends on the order of rows the ORDER BY leaves tied, whatever the frame
ORDER_DEPENDENT = (exp.RowNumber, exp.Lead, exp.Lag, exp.Ntile)


@dataclass(frozen=True)
class WindowShape:
    """What split_windows took out of the query: how many filters travel after the windows, and
    the first window as written (for messages)."""

    posts: int
    written: str  # the first window as written


def _has_window(node: exp.Expr) -> bool:
    return node.find(exp.Window) is not None


def _qualify_as_filter(statement: exp.Select) -> exp.Select:
    """``SELECT ... QUALIFY <condition>`` as the windowed rows filtered by the query over them:
    each window of the condition selected under a reserved name."""
    inner = statement.copy()
    inner.set("qualify", None)
    condition = statement.args["qualify"].this.copy()
    windows = list(condition.find_all(exp.Window))
    for index, window in enumerate(windows, start=1):
        name = f"{QUALIFIED}{index}"
        inner.append("expressions", exp.Alias(this=window.copy(), alias=exp.to_identifier(name)))
        window.replace(exp.column(name))
    with_ = inner.args.get("with_")
    inner.set("with_", None)
    outer = exp.select("*").from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(QUALIFY_ALIAS))))
    outer.set("where", exp.Where(this=condition))
    if with_ is not None:
        outer.set("with_", with_)
    return outer


def _read_alone(select: exp.Select, ctes: dict[str, exp.Expr]) -> exp.Select | None:
    """The SELECT ``select`` reads alone (its derived table, or the CTE it names), when it only
    selects and filters those rows; None otherwise."""
    if any(select.args.get(k) for k in ("joins", "group", "having", "distinct", "qualify", "limit", "offset")):
        return None
    source = select.args.get("from_")
    if source is None:
        return None
    item = source.this
    alias = item.args.get("alias")
    if alias is not None and alias.columns:
        return None  # a column list renames its columns: the carried ones would not fit it
    body: exp.Expr | None = None
    if isinstance(item, exp.Subquery):
        body = item.this
    elif isinstance(item, exp.Table) and not item.db:
        body = ctes.get(item.name.casefold())
    while isinstance(body, exp.Subquery):
        body = body.this
    return body if isinstance(body, exp.Select) else None


def _chain(statement: exp.Select) -> list[exp.Select] | None:
    """The SELECTs from the outer query down to the windowed one, each reading the next alone;
    None when the windows are not computed so (then they are refused as constructs)."""
    ctes: dict[str, exp.Expr] = {}
    levels = [statement]
    node = statement
    while True:
        for cte in (node.args.get("with_") or exp.With()).expressions:
            ctes[cte.alias.casefold()] = cte.this
        if any(_has_window(p) for p in node.expressions):
            return levels
        below = _read_alone(node, ctes)
        if below is None or any(below is level for level in levels):
            return None
        levels.append(below)
        node = below


def rows_frame(window: exp.Window) -> bool:
    spec = window.args.get("spec")
    return spec is not None and str(spec.args.get("kind") or "").upper() == "ROWS"


def refuse_order_dependent(window: exp.Window) -> None:
    """A window whose value depends on the order Spark reads rows in, whatever the ORDER BY:
    MAX_BY/MIN_BY/MODE/APPROX_PERCENTILE; FIRST/LAST/ANY_VALUE and COLLECT_LIST but over a ROWS
    frame in an ORDER BY (its ties then broken by the key, _tie_broken); COLLECT_SET but counted
    or sorted."""
    function = window_function(window)
    ordered = window.args.get("order") is not None and rows_frame(window)
    counted = isinstance(window.parent, (exp.ArraySize, *functions.SORTED_ARRAYS))
    if isinstance(function, (exp.ArgMax, exp.ArgMin)) or type(function).__name__ in ("Mode", "ApproxQuantile"):
        hint = functions.NOT_RECOMPUTABLE_ALTERNATIVES.get(type(function), HINT)
    elif isinstance(function, tuple(functions.NOT_RECOMPUTABLE_ALTERNATIVES)) and not ordered:
        hint = "Order the window and give it a ROWS frame, or use min() or max()"
    elif (
        isinstance(function, functions.COLLECTIONS)
        and not counted
        and not (ordered and isinstance(function, exp.ArrayAgg))
    ):
        hint = "Sort the collection (array_sort(...)), count it (size(...)), or order the window with a ROWS frame"
    else:
        return
    raise UnsupportedViewError(
        describe(window), "its value depends on the order Spark reads the rows in, which differs between runs", hint
    )


def _windowed_selects(statement: exp.Select) -> list[exp.Select]:
    """The SELECTs (the query, its CTEs, derived tables, subqueries) computing a window in their
    own SELECT list."""
    return [
        select
        for select in statement.find_all(exp.Select)
        if any(w.parent_select is select for p in select.expressions for w in p.find_all(exp.Window))
    ]


def _refuse_placement(statement: exp.Select) -> None:
    """Why the query's windows are not computed by one SELECT read alone by the queries over it."""
    windowed = _windowed_selects(statement)
    first = describe(next(windowed[0].find_all(exp.Window))) if windowed else describe(statement)
    if len(windowed) > 1:
        raise UnsupportedViewError(
            first,
            "windows are fast refreshed when one SELECT computes them; here several do (a window over another's "
            "result, or windowed queries combined)",
            "Compute each window in a fast_refresh model of its own and ref() it",
        )
    holder = windowed[0].parent if windowed else None
    label = holder.alias_or_name if isinstance(holder, (exp.CTE, exp.Subquery)) and holder.alias_or_name else "subquery"
    raise UnsupportedViewError(
        first,
        f"the rows of {label}, which computes windows, are joined, aggregated or deduplicated by the query over it: "
        "windows are fast refreshed when the queries over them only select and filter their rows",
        f"Make {label} a fast_refresh model of its own and ref() it (a view over a view)",
    )


def split_windows(statement: exp.Query) -> tuple[exp.Query, WindowShape | None]:
    """The query with the filters over its windowed SELECT carried as columns (see the module's
    doc), and what was taken out; None when the query has no windows, or a window without
    PARTITION BY (refused as a construct then, a QUALIFY as the filter over its windows it is).
    Windows computed elsewhere than in one SELECT read alone, or over an aggregate, are refused
    here, saying where."""
    if not isinstance(statement, exp.Select) or not _has_window(statement):
        return statement, None
    rewritten = statement.copy()
    for select in reversed(list(rewritten.find_all(exp.Select))):  # (the innermost first)
        if select.args.get("qualify") is not None:
            if select is rewritten:
                rewritten = _qualify_as_filter(select)
            else:
                select.replace(_qualify_as_filter(select))
    if any(not w.args.get("partition_by") for w in rewritten.find_all(exp.Window)):
        return rewritten, None  # refused as a construct, as unpartitioned
    for window in rewritten.find_all(exp.Window):
        refuse_order_dependent(window)
    distinct = next((w for w in rewritten.find_all(exp.Window) if w.this.find(exp.Distinct) is not None), None)
    if distinct is not None:
        raise UnsupportedViewError(
            describe(distinct),
            "Spark computes no DISTINCT aggregate over a window",
            "Count the distinct values with size(collect_set(x)) over the same window",
        )
    levels = _chain(rewritten)
    if levels is None:
        _refuse_placement(rewritten)
        return rewritten, None  # (not reached: the placement is refused)
    windowed = levels[-1]
    in_place = sum(len(list(p.find_all(exp.Window))) for p in windowed.expressions)
    if in_place != len(list(rewritten.find_all(exp.Window))):
        _refuse_placement(rewritten)
    if any(windowed.args.get(k) for k in ("group", "having", "distinct")):
        raise UnsupportedViewError(
            describe(next(windowed.find_all(exp.Window))),
            "window functions are fast refreshed over rows, not over the groups of an aggregate or a DISTINCT",
            HINT,
        )
    written = describe(next(windowed.find_all(exp.Window)))
    posts = 0
    for depth, level in enumerate(levels[:-1]):
        where = level.args.get("where")
        if where is None:
            continue
        for conjunct in split_conjuncts(where.this):
            posts += 1
            name = f"{POST}{posts}"
            level.append("expressions", exp.Alias(this=exp.Paren(this=conjunct.copy()), alias=exp.to_identifier(name)))
            for above in levels[:depth]:
                if not any(
                    isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
                    for p in above.expressions
                ):
                    above.append("expressions", exp.column(name))
        level.set("where", None)
    return rewritten, WindowShape(posts, written)


def is_carried(name: str) -> bool:
    """Whether a projection is one split_windows added (not a column of the view)."""
    folded = name.casefold()
    return folded.startswith(POST) or folded.startswith(QUALIFIED)


def resolved_windowing(query: ResolvedQuery, shape: WindowShape) -> tuple[ResolvedQuery, tuple[exp.Expr, ...] | None]:
    """The resolved query without the carried projections, and the filters after the windows
    over ``alias.column`` (and the windows). When the view keeps no window (a CTE computes one
    that nothing selects or filters on), the query is its rows as any other: those filters are
    its WHERE's and None is returned in their place."""
    found: dict[str, exp.Expr] = {}
    for projection in query.projections:
        if is_carried(projection.name) and projection.name.casefold() not in found:
            found[projection.name.casefold()] = projection.expression
    posts = tuple(unparenthesized(found[f"{POST}{i}"]) for i in range(1, shape.posts + 1))
    kept = tuple(p for p in query.projections if not is_carried(p.name))
    if not _windows(tuple(p.expression for p in kept) + posts):
        return replace(query, projections=kept, where=query.where + posts), None
    return replace(query, projections=kept), posts


def _windows(expressions: tuple[exp.Expr, ...]) -> list[exp.Window]:
    return [w for e in expressions for w in e.find_all(exp.Window)]


def window_function(window: exp.Window) -> exp.Expr:
    function = window.this
    while isinstance(function, (exp.IgnoreNulls, exp.RespectNulls)):
        function = function.this
    return function


def _refuse_nested(windows: list[exp.Window], shape: WindowShape) -> None:
    for window in windows:
        if any(node is not window for node in window.find_all(exp.Window)):
            raise UnsupportedViewError(shape.written, "a window inside another window is not fast refreshed", HINT)


def common_partition(windows: list[exp.Window]) -> tuple[exp.Expr, ...]:
    """The PARTITION BY expressions every window has (in the first one's order)."""
    first = windows[0].args["partition_by"]
    return tuple(p for p in first if all(any(p == q for q in w.args["partition_by"]) for w in windows[1:]))


def _tie_broken(window: exp.Window, keys: Sequence[exp.Expr]) -> exp.Window:
    """``window`` with the master's key appended to its ORDER BY where the rows it leaves tied
    would otherwise be taken in any order (ROW_NUMBER, LEAD, LAG, NTILE, a ROWS frame), so that
    every build and refresh computes the same values; a RANGE frame's peers and a ranking's ties
    are the query's own meaning and are left alone."""
    order = window.args.get("order")
    if order is None or not (isinstance(window_function(window), ORDER_DEPENDENT) or rows_frame(window)):
        return window
    ordered = [o.this for o in order.expressions]
    missing = [k for k in keys if k not in ordered]
    if not missing:
        return window
    copy = window.copy()
    copy.args["order"].set(
        "expressions",
        [*copy.args["order"].expressions, *(exp.Ordered(this=k.copy(), nulls_first=True) for k in missing)],
    )
    return copy


def windowing(
    query: ResolvedQuery,
    shape: WindowShape,
    posts: tuple[exp.Expr, ...],
    occurrences: tuple[MasterOccurrence, ...],
    outputs: tuple[OutputColumn, ...],
    existing: tuple[HiddenColumn, ...],
) -> tuple[Windowing, tuple[OutputColumn, ...], tuple[HiddenColumn, ...]]:
    """The Windowing of a resolved windowed query, its outputs with tie-broken windows, and the
    hidden columns holding partition expressions that neither a visible column nor an
    ``existing`` hidden one holds. Refuses a windowed query over a join or an aggregate, a
    window inside another and windows without a common partition expression."""
    if len(occurrences) != 1:
        raise UnsupportedViewError(
            shape.written,
            "window functions are fast refreshed over the rows of one table: here they come from a join",
            HINT,
        )
    if query.is_aggregate:
        raise UnsupportedViewError(
            shape.written, "window functions are fast refreshed over rows, not over the groups of an aggregate", HINT
        )
    windows = _windows(tuple(o.expression for o in outputs) + posts)
    _refuse_nested(windows, shape)
    partition = common_partition(windows)
    if not partition:
        raise UnsupportedViewError(
            shape.written,
            "the windows share no PARTITION BY expression, so no partition holds the rows a change affects",
            HINT,
        )
    occurrence = occurrences[0]
    keys = [column_node(occurrence.alias, occurrence.master.find_column(k) or k) for k in occurrence.master.key]

    appended: list[exp.Expr] = []

    def broken(expression: exp.Expr) -> exp.Expr:
        def tie_broken(node: exp.Expr) -> exp.Expr:
            if not isinstance(node, exp.Window):
                return node
            window = _tie_broken(node, keys)
            if window is not node:
                appended.extend(k for k in keys if k not in appended)
            return window

        return expression.copy().transform(tie_broken)

    outputs = tuple(replace(o, expression=broken(o.expression)) if _has_window(o.expression) else o for o in outputs)
    posts = tuple(broken(p) for p in posts)
    stored = list(existing)
    columns = holders(partition, outputs, stored, "_mv_p", HiddenPurpose.PARTITION)
    hidden = stored[len(existing) :]
    return Windowing(partition, posts, columns, tuple(appended)), outputs, tuple(hidden)
