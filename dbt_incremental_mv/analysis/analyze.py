"""``analyze_view``: from a model's compiled SQL to a ViewDefinition, or a refusal that says why.

The flow reads top to bottom: parse one query, refuse constructs that can never be maintained,
resolve every FROM item to a master occurrence and every column to ``alias.column``, normalize
the joins, classify the outputs, add the hidden columns, and check that the result renders. A
top-level UNION ALL is analysed branch by branch, then combined (analysis/union.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType

from sqlglot import exp
from sqlglot.errors import SqlglotError

from dbt_incremental_mv.analysis import functions, render
from dbt_incremental_mv.analysis.clock import Clock, at_time
from dbt_incremental_mv.analysis.constructs import refuse_unsupported_constructs, unsupported_constructs
from dbt_incremental_mv.analysis.distribute import distributed_union
from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.having import resolve_having, split_having
from dbt_incremental_mv.analysis.hidden import aggregate_hidden_columns, key_hidden_columns
from dbt_incremental_mv.analysis.joins import JoinTree, normalize_joins
from dbt_incremental_mv.analysis.model import (
    MasterOccurrence,
    MasterTable,
    Ranking,
    ViewClass,
    ViewDefinition,
    Windowing,
)
from dbt_incremental_mv.analysis.null_rejection import outer_joins_read_as_inner, with_outer_joins_made_inner
from dbt_incremental_mv.analysis.outputs import classify_outputs, refuse_bad_output_names
from dbt_incremental_mv.analysis.parse import parse_statement, with_ctes
from dbt_incremental_mv.analysis.partitionwise import NotPartitionwise, analyze_partitionwise
from dbt_incremental_mv.analysis.ranking import HINT, RankingShape, completed_ranking, resolved_ranking, split_ranking
from dbt_incremental_mv.analysis.resolved import OccurrenceSource, ResolvedQuery, unparenthesized
from dbt_incremental_mv.analysis.resolver import Resolver
from dbt_incremental_mv.analysis.summands import average_summands
from dbt_incremental_mv.analysis.union import (
    analyze_union,
    map_union_branches,
    named_projections,
    top_level_unions,
    union_all_branches,
)
from dbt_incremental_mv.analysis.windowing import resolved_windowing, split_windows, windowing


def analyze_view(sql: str, masters: Mapping[str, MasterTable], clock: Clock | None = None) -> ViewDefinition:
    """Analyse a fast_refresh model's compiled Spark SQL.

    ``masters`` maps each table the SQL may read, by normalized ``schema.table``, to its
    metadata; ``clock``: the time its clock functions read as (analysis/clock.py; None: they are
    refused). Raises UnsupportedViewError naming the first construct that prevents an
    incremental refresh.
    """
    try:
        parsed = parsed_query(sql, clock)
        try:
            statement = distributed_union(parsed, masters)
            branches = union_all_branches(statement)
            if branches is not None:
                refuse_unsupported_constructs(rewritten_query(statement))
                first = analyze_query(branches[0], masters)
                names = tuple(o.name for o in first.visible_outputs)
                return analyze_union(
                    [first, *(analyze_query(named_projections(b, names), masters) for b in branches[1:])]
                )
            return analyze_query(statement, masters)
        except UnsupportedViewError as refusal:
            return _per_partition(parsed, masters, refusal)
    except UnsupportedViewError as error:
        if clock is None:
            raise
        raise clock.as_written(error) from error


def _per_partition(
    statement: exp.Query, masters: Mapping[str, MasterTable], refusal: UnsupportedViewError
) -> ViewDefinition:
    """The query the other classes refused (``refusal``) as a PER_PARTITION view
    (analysis/partitionwise.py). When it is not one, the other classes' ``refusal`` stands; so it
    does for a query over several tables, whose splitting into models that advice tells is as good
    a fix as partitioning it alike; a query over one table gets its own refusal (its windows share
    no partition, ...)."""
    try:
        return analyze_partitionwise(statement, Resolver(masters).master)
    except NotPartitionwise:
        raise refusal from None
    except UnsupportedViewError as own:
        ctes = {c.alias.casefold() for c in statement.find_all(exp.CTE)}
        tables = [t for t in statement.find_all(exp.Table) if t.args.get("db") or t.name.casefold() not in ctes]
        if len(tables) > 1 and refusal.reason != own.reason:
            raise refusal from None
        raise


def analyze_query(statement: exp.Query, masters: Mapping[str, MasterTable]) -> ViewDefinition:
    """Analyse one SELECT (a whole view, or a branch of a UNION ALL view)."""
    statement, having_condition = split_having(distinct_as_group_by(star_over_having(statement)))
    statement, ranked = split_ranking(statement)
    windowed = None
    if ranked is None:
        statement, windowed = split_windows(statement)
    refuse_unsupported_constructs(statement, windowed=windowed is not None)
    query = Resolver(masters).query(statement)
    ranking = None
    posts: tuple[exp.Expr, ...] | None = None
    if ranked is not None:
        query, ranking = resolved_ranking(query, ranked)
    if windowed is not None:
        query, posts = resolved_windowing(query, windowed)
    _refuse_aggregates_outside_select(query)
    occurrences = tuple(MasterOccurrence(o.alias, o.master) for o in query.occurrences)
    _refuse_keyless_masters(query.occurrences)
    tree = normalize_joins(query)
    is_aggregate = query.is_aggregate
    refuse_bad_output_names(p.name for p in query.projections)
    classified = classify_outputs(query.projections, query.group_by or (), is_aggregate)
    group_by, outputs, having = classified.group_by, classified.outputs, None
    if having_condition is not None:
        assert isinstance(statement, exp.Select)  # split_having returns the condition of a SELECT only
        having, read_by_having = resolve_having(
            having_condition, statement, masters, outputs, classified.group_key_columns
        )
        outputs += read_by_having
    hidden = (
        aggregate_hidden_columns(outputs, bool(group_by), average_summands(outputs, occurrences))
        if is_aggregate
        else key_hidden_columns(occurrences)
    )
    if ranking is not None:
        assert ranked is not None  # the ranking resolved from it
        _refuse_ranking_over(ranking, ranked, occurrences, is_aggregate)
        ranking, outputs, partitions = completed_ranking(ranking, occurrences[0], outputs, hidden)
        hidden += partitions
    window_partition = None
    if windowed is not None and posts is not None:  # (None: no window the view keeps, its rows as any query's)
        window_partition, outputs, partitions = windowing(query, windowed, posts, occurrences, outputs, hidden)
        hidden += partitions
    read = _referenced_columns(
        occurrences,
        [o.expression for o in outputs],
        [h.expression for h in hidden],
        tree.where_conjuncts,
        [s.condition for s in tree.joins if s.condition is not None],
        group_by,
        _ranking_parts(ranking),
        _windowing_parts(window_partition),
    )
    definition = ViewDefinition(
        occurrences=occurrences,
        joins=tree.joins,
        where_conjuncts=tree.where_conjuncts,
        outputs=outputs,
        group_by=group_by,
        is_aggregate=is_aggregate,
        view_class=_view_class(is_aggregate, tree, ranking, window_partition),
        hidden_columns=hidden,
        null_supplying=tree.null_supplying,
        group_key_columns=classified.group_key_columns,
        referenced_columns=read,
        having=having,
        ranking=ranking,
        windowing=window_partition,
    )
    _refuse_unrenderable(definition)
    return definition


def construct_refusals(sql: str, clock: Clock | None = None) -> Iterator[UnsupportedViewError]:
    """Every construct of the model's query that no fast refresh maintains (explain lists them
    all), read as the analysis reads the query (see rewritten_query)."""
    statement = rewritten_query(parsed_query(sql, clock))
    windowed = False
    if not top_level_unions(statement):
        statement, shape = split_windows(statement)
        windowed = shape is not None
    return unsupported_constructs(statement, windowed=windowed)


def parsed_query(sql: str, clock: Clock | None = None) -> exp.Query:
    """The model's query as every reading of it starts: parsed, its clock functions read at
    ``clock`` (when given), its pointless ORDER BYs dropped (without_inner_order), aggregates
    equal to maintained ones written as them, LEFT JOINs whose null-extended rows the query
    discards written as the inner joins they are (null_rejection)."""
    statement = parse_statement(sql)
    if clock is not None:
        statement = at_time(statement, clock)
    return with_outer_joins_made_inner(as_maintained_aggregates(without_inner_order(statement)))


def as_maintained_aggregates(statement: exp.Query) -> exp.Query:
    """Aggregates that equal a maintained one, written as it: ``COUNT_IF(c)`` is
    ``COUNT(CASE WHEN c THEN 1 END)``; ``BOOL_OR``/``ANY``/``SOME`` of a boolean is its ``MAX``
    (true above false, NULLs ignored, NULL when none), ``BOOL_AND``/``EVERY`` its ``MIN``;
    ``agg(x) FILTER (WHERE c)`` of an aggregate that ignores NULLs is ``agg(CASE WHEN c THEN x
    END)`` (``COUNT(*)``'s: ``COUNT(CASE WHEN c THEN 1 END)``). An ordered ``LISTAGG(x)`` gets ``x``
    appended to its ORDER BY: values its order leaves tied are joined by their own order, the
    same way by every build and refresh (functions.CONCATENATIONS). ``COUNT(DISTINCT x) OVER (...)``
    is ``SIZE(COLLECT_SET(x) OVER (...))``; an unordered collection is ordered by value
    (_ordered_by_value; over a window: _window_collection_by_value)."""

    def maintained(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Filter) and not isinstance(node.parent, exp.Window):
            return _filtered_as_case(node)
        if isinstance(node, functions.CONCATENATIONS) and node.args.get("separator") is None:
            # Spark joins with no separator by default (a NULL one); written back, sqlglot would add ','
            node = node.__class__(**{**node.args, "separator": exp.Null()})
        value = functions.concatenated_value(node)
        if value is not None and not any(
            unparenthesized(o.this) == unparenthesized(value) for o in node.this.expressions
        ):
            order = node.this.copy()
            order.append("expressions", exp.Ordered(this=value.copy(), nulls_first=False))
            return node.__class__(**{**node.args, "this": order})
        if isinstance(node, exp.Window):
            distinct = _distinct_count(node)
            if distinct is not None:
                return distinct
            collected = _window_collection_by_value(node)
            if collected is not None:
                return collected
        if not isinstance(node.parent, exp.Window):
            ordered = _ordered_by_value(node)
            if ordered is not None:
                return ordered
        if isinstance(node, exp.CountIf):
            return exp.Count(this=exp.Case(ifs=[exp.If(this=node.this.copy(), true=exp.Literal.number(1))]))
        name = node.name.lower() if isinstance(node, exp.Anonymous) else ""
        if isinstance(node, exp.LogicalOr) or (isinstance(node, exp.Any) and functions.is_aggregate(node)):
            return exp.Max(this=node.this.unnest().copy())  # ANY's argument comes parenthesized
        if name == "some" and len(node.expressions) == 1:
            return exp.Max(this=node.expressions[0].copy())
        if isinstance(node, exp.LogicalAnd):
            return exp.Min(this=node.this.copy())
        if name == "every" and len(node.expressions) == 1:
            return exp.Min(this=node.expressions[0].copy())
        return node

    rewritten = statement.transform(maintained)
    assert isinstance(rewritten, exp.Query)  # the root is a query; only aggregate calls are replaced
    return rewritten


ORDERED_BY_VALUE = "ordered_by_value"
"""The meta key marking an aggregate whose order the query left to Spark's reading order and the
analysis set to its values' own (as_maintained_aggregates; explain says so)."""


def _distinct_count(window: exp.Window) -> exp.Expr | None:
    """``COUNT(DISTINCT x) OVER (...)``, which Spark does not compute (written so by Snowflake or
    BigQuery SQL), as the ``SIZE(COLLECT_SET(x) OVER (...))`` it equals (NULLs ignored by both, the
    same frame); None for any other window."""
    call = window.this
    if not (isinstance(call, exp.Count) and isinstance(call.this, exp.Distinct)) or len(call.this.expressions) != 1:
        return None
    collected = window.copy()
    collected.set("this", exp.ArrayUniqueAgg(this=call.this.expressions[0].copy()))
    return exp.ArraySize(this=collected)


def _window_collection_by_value(window: exp.Window) -> exp.Expr | None:
    """``COLLECT_SET(x) OVER (...)``, and ``COLLECT_LIST(x) OVER (...)`` without ORDER BY (its
    frame every row of the partition), unsorted, as ``ARRAY_SORT(...)`` of it (not of MAP values,
    which Spark cannot order): the query leaves the order of the elements to the order Spark reads
    the rows in, any order is its answer, and the values' own is the same by every build and
    refresh. A COLLECT_LIST over an ordered window keeps its order (windowing.refuse_order_dependent
    decides on it). None: not one of them."""
    function = window.this
    if isinstance(window.parent, (exp.ArraySize, *functions.SORTED_ARRAYS)) or not isinstance(
        function, functions.COLLECTIONS
    ):
        return None
    if isinstance(function, exp.ArrayAgg) and window.args.get("order") is not None:
        return None
    if not _sortable(function):
        return None
    ordered = exp.ArraySort(this=window.copy())
    ordered.meta[ORDERED_BY_VALUE] = True
    return ordered


def ordered_by_value(definition: ViewDefinition) -> list[exp.Expr]:
    """The aggregates of ``definition`` the analysis ordered by their values (_ordered_by_value), in
    its outputs or its query kept as written, each once."""
    roots = [o.expression for o in definition.outputs]
    if definition.partition_query is not None:
        roots.append(definition.partition_query.query)
    for branch in definition.branches:
        roots += [o.expression for o in branch.outputs]
    found: list[exp.Expr] = []
    for root in roots:
        for node in root.walk():
            if node.meta.get(ORDERED_BY_VALUE) and not any(node == f for f in found):
                found.append(node)
    return found


def _ordered_by_value(node: exp.Expr) -> exp.Expr | None:
    """An unordered ``LISTAGG(x)`` as ``LISTAGG(x) WITHIN GROUP (ORDER BY x)``, an unsorted
    ``COLLECT_LIST(x)`` / ``COLLECT_SET(x)`` as ``ARRAY_SORT(...)`` of it (not of MAP values,
    which Spark cannot order): any order is the query's answer, and the values' own is the same
    by every build and refresh. None: not one of them."""
    if isinstance(node, functions.CONCATENATIONS) and not isinstance(node.this, exp.Order):
        value = node.this
        if isinstance(value, exp.Distinct):
            if len(value.expressions) != 1:
                return None
            value = value.expressions[0]
        order = exp.Order(this=node.this.copy(), expressions=[exp.Ordered(this=value.copy(), nulls_first=False)])
        ordered: exp.Expr = node.__class__(**{**node.args, "this": order})
    elif isinstance(node, functions.COLLECTIONS) and not functions.is_maintainable_aggregate(node):
        if not _sortable(node):
            return None
        ordered = exp.ArraySort(this=node.copy())
    else:
        return None
    ordered.meta[ORDERED_BY_VALUE] = True
    return ordered


def _sortable(collection: exp.Expr) -> bool:
    """Whether Spark can sort what a COLLECT_LIST/COLLECT_SET collects (not MAP values)."""
    value = collection.this
    return value is not None and value.find(exp.Map, exp.VarMap, exp.MapFromEntries, exp.StarMap) is None


def _filtered_as_case(node: exp.Filter) -> exp.Expr:
    """``agg(x) FILTER (WHERE c)`` as ``agg(CASE WHEN c THEN x END)`` when ``agg`` ignores NULLs
    (COUNT, SUM, AVG, MIN, MAX, the recomputed aggregates, COLLECT_LIST/SET, LISTAGG); any other
    is left for the construct checks to refuse."""
    call, where = node.this, node.expression
    condition = where.this if isinstance(where, exp.Where) else where
    if not functions.is_aggregate(call) or call.expressions or call.this is None:
        return node
    if isinstance(call, tuple(functions.NOT_RECOMPUTABLE_ALTERNATIVES)):
        return node
    if not (
        functions.is_maintainable_aggregate(call) or isinstance(call, functions.COLLECTIONS + functions.CONCATENATIONS)
    ):
        return node

    def when(value: exp.Expr) -> exp.Expr:
        return exp.Case(ifs=[exp.If(this=condition.copy(), true=value.copy())])

    argument = call.this
    if isinstance(call, exp.Count) and (isinstance(argument, exp.Star) or argument.is_star):
        replaced = when(exp.Literal.number(1))
    elif isinstance(argument, exp.Distinct) and len(argument.expressions) == 1:
        replaced = exp.Distinct(expressions=[when(argument.expressions[0])])
    elif isinstance(argument, exp.Order):
        replaced = exp.Order(this=when(argument.this), expressions=[o.copy() for o in argument.expressions])
    elif isinstance(argument, exp.Distinct):
        return node
    else:
        replaced = when(argument)
    return call.__class__(**{**call.args, "this": replaced})


def without_inner_order(statement: exp.Query) -> exp.Query:
    """The query without the ORDER BYs that have no LIMIT or OFFSET, its own among them: such an
    order decides nothing the view keeps (a multiset), and a table keeps no order (Oracle uses a
    materialized view's ORDER BY at its creation only; explain says it is ignored: ignored_order)."""

    if not any(_ignores_order(n) for n in statement.find_all(exp.Select, exp.SetOperation)):
        return statement
    statement = statement.copy()
    for node in [n for n in statement.find_all(exp.Select, exp.SetOperation) if _ignores_order(n)]:
        node.set("order", None)
    return statement


def _ignores_order(query: exp.Expr) -> bool:
    """Whether ``query`` has an ORDER BY that decides nothing it returns (no LIMIT or OFFSET)."""
    return bool(query.args.get("order")) and not query.args.get("limit") and not query.args.get("offset")


def outer_joins_made_inner(sql: str) -> list[str]:
    """The outer joins of the model's query read as the inner joins they are (null_rejection), as
    written (``LEFT JOIN c``)."""
    return outer_joins_read_as_inner(parse_statement(sql))


def ignored_order(sql: str) -> str | None:
    """The outermost ORDER BY of the model's query that the view ignores (without_inner_order), as
    written; None: there is none, or a LIMIT or OFFSET makes it count (refused)."""
    statement = parse_statement(sql)
    return describe(statement.args["order"]) if _ignores_order(statement) else None


def rewritten_query(statement: exp.Query) -> exp.Query:
    """The query as the analysis reads it: ``select *`` over a grouping CTE with a HAVING as that
    CTE's query, ``SELECT DISTINCT`` as the GROUP BY it equals, the
    outer query's HAVING taken apart (analysis/having.py, resolved on its own), a ranking window
    filtered on taken out (analysis/ranking.py); for a top-level UNION ALL, each branch so (a
    branch's window is refused)."""
    if not top_level_unions(statement):
        return split_ranking(split_having(distinct_as_group_by(star_over_having(statement)))[0])[0]
    return map_union_branches(statement, lambda b: split_having(distinct_as_group_by(star_over_having(b)))[0])


def star_over_having(statement: exp.Query) -> exp.Query:
    """``with final as (select ... group by ... having ...) select * from final`` (dbt's closing
    CTE) is the query of ``final`` itself, with the CTEs it sees: so its HAVING is the outer
    query's (analysis/having.py). Only for ``select *`` alone over a CTE or derived table that
    groups with a HAVING; anything else is left as it is."""
    if not isinstance(statement, exp.Select) or len(statement.expressions) != 1:
        return statement
    if not isinstance(statement.expressions[0], exp.Star) or any(
        statement.args.get(k) for k in ("joins", "where", "group", "having", "qualify", "order", "limit", "distinct")
    ):
        return statement
    item = statement.args["from_"].this if statement.args.get("from_") else None
    with_ = statement.args.get("with_")
    body = None
    if isinstance(item, exp.Subquery) and not (item.args.get("alias") and item.args["alias"].columns):
        body = item.this
    elif isinstance(item, exp.Table) and not item.args.get("db") and with_ is not None:
        ctes = [c for c in with_.expressions if c.alias.casefold() == item.name.casefold()]
        if ctes and not ctes[-1].args["alias"].columns and not (item.args.get("alias") and item.args["alias"].columns):
            body = ctes[-1].this
            kept = with_.expressions[: with_.expressions.index(ctes[-1])]
            with_ = exp.With(expressions=[c.copy() for c in kept]) if kept else None
    while isinstance(body, exp.Subquery):
        body = body.this
    if not isinstance(body, exp.Select) or body.args.get("having") is None or body.args.get("group") is None:
        return statement
    return with_ctes(body.copy(), with_)


def distinct_as_group_by(statement: exp.Query) -> exp.Query:
    """``SELECT DISTINCT <expressions>`` is a GROUP BY of them without aggregates: a counted group
    (its hidden count is the number of master rows behind each distinct row), maintained as an
    aggregate view. Rewritten so, in the outer query and in every CTE and derived table (then
    an aggregating query read whole, or joined on its keys: analysis/pullup.py), when it has no
    GROUP BY, aggregates, DISTINCT ON or
    ``*``, and selects a column; anything else keeps the DISTINCT, which the construct checks
    then refuse."""
    if any(s is not statement and s.args.get("distinct") for s in statement.find_all(exp.Select)):
        statement = statement.copy()
        for select in [s for s in statement.find_all(exp.Select) if s is not statement and s.args.get("distinct")]:
            grouped = _distinct_select_as_group_by(select)
            if grouped is not select:
                select.replace(grouped)
    return _distinct_select_as_group_by(statement)


def _distinct_select_as_group_by(statement: exp.Query) -> exp.Query:
    distinct = statement.args.get("distinct") if isinstance(statement, exp.Select) else None
    if distinct is None or distinct.args.get("on") or statement.args.get("group"):
        return statement
    selected = [p.this if isinstance(p, exp.Alias) else p for p in statement.expressions]
    # (constants are no GROUP BY items: GROUP BY 1 would name a position; the analysis makes a
    # selected constant a group key of its own, outputs.py)
    keys = [k for k in selected if k.find(exp.Column) is not None]
    if not keys or any(
        k.find(exp.Star) is not None or any(functions.is_aggregate(n) for n in k.walk()) for k in selected
    ):
        return statement
    grouped = statement.copy()
    grouped.set("distinct", None)
    grouped.set("group", exp.Group(expressions=[k.copy() for k in keys]))
    return grouped


def _windowing_parts(window_partition: Windowing | None) -> list[exp.Expr]:
    if window_partition is None:
        return []
    return [*window_partition.partition_by, *window_partition.post_conjuncts]


def _ranking_parts(ranking: Ranking | None) -> list[exp.Expr]:
    if ranking is None:
        return []
    return [*ranking.partition_by, *(o.this for o in ranking.order_by), *ranking.tie_break, *ranking.post_conjuncts]


def _refuse_ranking_over(
    ranking: Ranking,
    shape: RankingShape,
    occurrences: tuple[MasterOccurrence, ...],
    is_aggregate: bool,
) -> None:
    """A ranking window is refreshed over the rows of one master (filtered), selected as they are."""
    if len(occurrences) != 1:
        raise UnsupportedViewError(
            shape.written,
            "a ranking window is refreshed over one table: here its rows come from a join",
            "Rank the rows of one table (join in a model over the deduplicated one)",
        )
    if is_aggregate:
        raise UnsupportedViewError(
            shape.written,
            "a ranking window is refreshed when the query over it selects rows, not aggregates",
            "Aggregate in a model over the deduplicated one",
        )
    for part in _ranking_parts(ranking):
        found = next((n for n in part.walk() if isinstance(n, exp.Window) or functions.is_aggregate(n)), None)
        if found is not None:
            raise UnsupportedViewError(
                describe(found), "not allowed in a ranking window's PARTITION BY or ORDER BY", HINT
            )


def _view_class(
    is_aggregate: bool, tree: JoinTree, ranking: Ranking | None, window_partition: Windowing | None
) -> ViewClass:
    if ranking is not None:
        return ViewClass.RANKED
    if window_partition is not None:
        return ViewClass.WINDOWED
    if is_aggregate:
        return ViewClass.AGGREGATE
    if any(step.is_outer for step in tree.joins):
        return ViewClass.OUTER_JOIN
    return ViewClass.JOIN


def _refuse_aggregates_outside_select(query: ResolvedQuery) -> None:
    places: list[tuple[str, exp.Expr]] = [("WHERE", c) for c in query.where]
    places += [("ON", c) for join in query.joins for c in join.conjuncts]
    places += [("GROUP BY", e) for e in query.group_by or ()]
    places += [("WHERE", f) for o in query.occurrences for f in o.filters]
    for clause, expression in places:
        aggregate = next((n for n in expression.walk() if functions.is_aggregate(n)), None)
        if aggregate is not None:
            raise UnsupportedViewError(
                describe(aggregate),
                f"aggregates are not allowed in {clause}",
                "Aggregate in the SELECT list; filter on aggregates in a downstream model",
            )


def _refuse_keyless_masters(occurrences: Iterable[OccurrenceSource]) -> None:
    for occurrence in occurrences:
        master = occurrence.master
        if not master.key:
            raise UnsupportedViewError(
                master.name,
                "the master table needs a declared unique key: changed rows are matched to view rows by it",
                f"Declare the key of {master.name} (e.g. a unique/primary key in its model or source "
                "config); the refresh engine reads it with the table's change-log metadata",
            )
        for column in master.key:
            if master.find_column(column) is None:
                raise UnsupportedViewError(
                    master.name,
                    f"the declared key column {column} is not a column of the table",
                    f"Fix the key declared for {master.name}",
                )


def _referenced_columns(
    occurrences: tuple[MasterOccurrence, ...], *expression_groups: Iterable[exp.Expr]
) -> Mapping[str, frozenset[str]]:
    """The master columns each occurrence reads in the rendered query (outputs, hidden columns,
    filters, join conditions, grouping): what a schema change must not take away."""
    read: dict[str, set[str]] = {o.alias: set() for o in occurrences}
    for expressions in expression_groups:
        for expression in expressions:
            for column in expression.find_all(exp.Column):
                read[column.table].add(column.name)
    return MappingProxyType({alias: frozenset(columns) for alias, columns in read.items()})


def _rendered_parts(definition: ViewDefinition) -> Iterable[exp.Expr]:
    yield from _ranking_parts(definition.ranking)
    yield from _windowing_parts(definition.windowing)
    yield from (o.expression for o in definition.outputs)
    yield from (h.expression for h in definition.hidden_columns)
    yield from definition.where_conjuncts
    yield from (s.condition for s in definition.joins if s.condition is not None)
    yield from definition.group_by
    if definition.having is not None:
        yield definition.having


def _refuse_unrenderable(definition: ViewDefinition) -> None:
    """sqlglot must be able to write every expression back as Spark SQL without losing meaning
    (it raises instead of approximating, e.g. for a format argument it cannot express)."""
    for expression in _rendered_parts(definition):
        try:
            render.render_expression(expression)
        except SqlglotError as error:
            culprit = _smallest_unrenderable(expression)
            if isinstance(culprit, exp.Func) and not isinstance(culprit, exp.Anonymous):
                name = culprit.sql_name()
            else:
                name = culprit.key
            raise UnsupportedViewError(
                f"{name.lower()}(...)",
                f"sqlglot cannot write it back as Spark SQL without changing its meaning ({error})",
                "Rewrite the expression with other functions",
            ) from error


def _smallest_unrenderable(expression: exp.Expr) -> exp.Expr:
    """The deepest node of ``expression`` that cannot be rendered (the function to name)."""
    culprit = expression
    for node in expression.walk(bfs=True):
        try:
            render.render_expression(node)
        except SqlglotError:
            culprit = node
    return culprit
