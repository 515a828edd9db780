"""Refusal of SQL constructs that can never be maintained incrementally, wherever they appear.

Each check walks the whole statement (CTE bodies and derived tables included) and yields every
offending node, so the user gets the construct itself named rather than a knock-on error from a
later stage. Checks run in a fixed order, most structural first: a refresh reports the first (a
query with several problems always reports the same one), explain_fast_refresh all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sqlglot import exp

from dbt_incremental_mv.analysis import functions
from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.union import top_level_unions

_SEPARATE_MODEL = "Compute it in a separate (table or view) model and ref() that model, or compute it downstream"
_STORAGE_ORDER_HINT = "Remove it; order or cluster the stored table with table properties"


def refuse_unsupported_constructs(statement: exp.Expr, *, windowed: bool = False) -> None:
    """Raise UnsupportedViewError for the first construct no fast refresh can maintain."""
    for refusal in unsupported_constructs(statement, windowed=windowed):
        raise refusal


def unsupported_constructs(
    statement: exp.Expr, *, windowed: bool = False, partitioned: bool = False
) -> Iterator[UnsupportedViewError]:
    """Every construct no fast refresh can maintain, in the checks' order; a construct inside
    one already refused for the same reason (the function of a refused window) is not repeated.
    ``windowed``: the query's windows are maintained (analysis/windowing.py took their shape);
    ``partitioned``: its joins, set operations, DISTINCTs, HAVINGs and QUALIFYs too, wherever
    they are (analysis/partitionwise.py)."""
    seen: list[UnsupportedViewError] = []
    for check in _CHECKS:
        if windowed and check is _refuse_window_functions:
            continue
        if partitioned and check in (_refuse_set_operations, _refuse_unsupported_joins):
            continue
        if partitioned and check is _refuse_select_clauses:
            refusals = _refuse_select_clauses(statement, _PARTITIONED_CLAUSES)
        elif partitioned and check is _refuse_expression_subqueries:
            refusals = _refuse_expression_subqueries(statement, semi_joins=True)
        elif partitioned and check is _refuse_unsupported_relations:
            refusals = _refuse_unsupported_relations(statement, row_generators=True)
        elif partitioned and check is _refuse_generators:
            refusals = _refuse_generators(statement, row_generators=True)
        else:
            refusals = check(statement)
        for refusal in refusals:
            if any(r.reason == refusal.reason and refusal.construct in r.construct for r in seen):
                continue
            seen.append(refusal)
            yield refusal


def _nodes(statement: exp.Expr, *types: type[exp.Expr]) -> Iterator[exp.Expr]:
    """Nodes of the given types in a stable depth-first, left-to-right order."""
    return (node for node in statement.dfs() if isinstance(node, types))


def _refuse_set_operations(statement: exp.Expr) -> Iterator[UnsupportedViewError]:
    """Every set operation but a top-level UNION ALL (analysis/union.py), and clauses on that one."""
    top = top_level_unions(statement)
    for node in top:
        yield from _refuse_clauses(node, _ALLOWED_UNION_ARGS)
    for node in _nodes(statement, exp.SetOperation):
        if any(node is t for t in top):
            continue
        names: dict[type[exp.Expr], str] = {exp.Union: "UNION", exp.Intersect: "INTERSECT", exp.Except: "EXCEPT"}
        name = names.get(type(node), "set operation")
        if isinstance(node, exp.Union) and not node.args.get("distinct"):
            yield UnsupportedViewError(
                "UNION ALL",
                "UNION ALL is fast refreshed as the outermost query, or in a subquery or CTE that a query "
                "reads alone, selecting and filtering its rows (here it is joined, aggregated, under another "
                "set operation, or a branch has DISTINCT or HAVING)",
                "Make the UNION ALL the model's query itself, or its branches separate models",
            )
            continue
        yield UnsupportedViewError(
            name,
            "set operations other than UNION ALL are maintained when the query partitions its rows by columns "
            "every branch selects as they are, not otherwise: whether a row is in the result depends on the other "
            "branches' rows",
            "Use UNION ALL of fast-refreshable branches (and a DISTINCT or GROUP BY in a downstream model), "
            "or make each branch its own fast_refresh model and combine them downstream",
        )


def relation_position(subquery: exp.Subquery) -> bool:
    """Whether a parenthesised query stands where a table would (FROM/JOIN, a set operation's
    operand), not in an expression."""
    parent = subquery.parent
    while isinstance(parent, exp.Subquery):
        parent = parent.parent
    return parent is None or isinstance(parent, (exp.From, exp.Join, exp.With, exp.CTE, exp.Lateral, exp.SetOperation))


@dataclass(frozen=True)
class SemiJoin:
    """A semi or anti join written as a WHERE conjunct: ``EXISTS (query)``, ``NOT EXISTS (query)``
    (``value`` None), ``value IN (query)``, ``value NOT IN (query)`` (``negated``: a NULL among the
    query's values makes it NULL for every row, and a NULL value is TRUE only when the query has no
    row)."""

    query: exp.Expr
    value: exp.Expr | None
    negated: bool = False


def semi_join_query(node: exp.Expr) -> exp.Query | None:
    """The query an ``EXISTS (query)`` or ``x IN (query)`` reads; None for any other node."""
    query = node.this if isinstance(node, exp.Exists) else node.args.get("query") if isinstance(node, exp.In) else None
    return query if isinstance(query, exp.Query) else None


def semi_join(conjunct: exp.Expr) -> SemiJoin | None:
    """The semi or anti join ``conjunct`` is, or None."""
    node, negated = conjunct, False
    while isinstance(node, (exp.Paren, exp.Not)):
        negated ^= isinstance(node, exp.Not)
        node = node.this
    query = semi_join_query(node)
    if query is None:
        return None
    return SemiJoin(query, node.this, negated) if isinstance(node, exp.In) else SemiJoin(query, None)


def _refuse_expression_subqueries(statement: exp.Expr, semi_joins: bool = False) -> Iterator[UnsupportedViewError]:
    """Subqueries in expressions; ``semi_joins``: but EXISTS, IN and scalar subqueries
    (analysis/partitionwise.py matches their rows, or refuses them)."""
    accepted: list[exp.Expr] = []
    for node in statement.dfs():
        query = semi_join_query(node)
        if semi_joins and query is not None:
            accepted.append(query)
            continue
        if any(node is a for a in accepted):
            continue
        offending: exp.Expr | None = None
        if query is not None:
            offending = node
        elif isinstance(node, (exp.Any, exp.All)) and isinstance(node.this, exp.Query):
            offending = node.parent if isinstance(node.parent, exp.Predicate) else node
        elif isinstance(node, exp.Subquery) and not relation_position(node) and not semi_joins:
            offending = node
        if offending is not None:
            yield UnsupportedViewError(
                describe(offending),
                "subqueries in SELECT, WHERE or ON (IN/EXISTS/scalar subqueries) are maintained in queries "
                "recomputed per partition, matched to the query around them by equalities (their correlation, "
                "x IN (select c ...)); this one is not, so a change to the subquery's table could change every "
                "row of the view",
                "Correlate the subquery by an equality, rewrite it as a join (for IN/EXISTS, a join to a model with "
                "one row per key), or filter in a downstream model",
            )


_CLAUSE_REFUSALS: tuple[tuple[str, str, str, str], ...] = (
    # (arg key, construct prefix, reason, hint)
    (
        "distinct",
        "SELECT DISTINCT",
        "DISTINCT is not supported",
        "Use GROUP BY over the selected columns instead; grouped views are maintained incrementally",
    ),
    (
        "having",
        "",
        "HAVING is fast refreshed on the outer query's GROUP BY only (here it has none, or it "
        "filters a subquery or CTE)",
        "Move the grouping and its HAVING to the outer query, or filter in a downstream model",
    ),
    ("qualify", "", "QUALIFY is not supported (it filters on window functions)", _SEPARATE_MODEL),
    (
        "windows",
        "WINDOW clause",
        "named windows (a WINDOW clause) are not supported",
        "Write each window's OVER (PARTITION BY ... ORDER BY ...) in full",
    ),
    (
        "laterals",
        "",
        "LATERAL VIEW generates rows from a column: it is maintained in queries recomputed per partition, and "
        "this one is not (see its other constructs)",
        "Explode the column in a separate model and ref() that model",
    ),
    ("pivots", "", "PIVOT/UNPIVOT is not supported", "Pivot in a downstream model"),
    (
        "order",
        "",
        "ORDER BY alone is ignored (a table keeps no order), but with LIMIT or OFFSET it keeps the rows it orders "
        "first, which no change can be propagated to",
        "Remove the LIMIT, or keep the top rows of each partition (row_number() over (partition by ... order by ...) "
        "<= n)",
    ),
    ("sort", "", "SORT BY is not supported", _STORAGE_ORDER_HINT),
    ("cluster", "", "CLUSTER BY is not supported", _STORAGE_ORDER_HINT),
    ("distribute", "", "DISTRIBUTE BY is not supported", "Remove it"),
    (
        "limit",
        "",
        "LIMIT keeps an arbitrary subset of rows that no change can be propagated to",
        "Remove it, or apply it in a downstream model",
    ),
    (
        "offset",
        "",
        "OFFSET keeps an arbitrary subset of rows that no change can be propagated to",
        "Remove it, or apply it in a downstream model",
    ),
    ("sample", "", "TABLESAMPLE reads a random subset of rows", "Remove it"),
)

_ALLOWED_SELECT_ARGS = frozenset({"expressions", "from_", "joins", "where", "group", "with_", "hint", "kind"})
_ALLOWED_SUBQUERY_ARGS = frozenset({"this", "alias"})
_ALLOWED_UNION_ARGS = frozenset({"this", "expression", "distinct", "with_"})


def _clause_construct(prefix: str, value: object) -> str:
    if prefix:
        return prefix
    if isinstance(value, list):
        return ", ".join(describe(v) for v in value)
    return describe(value)  # type: ignore[arg-type]  # a clause's value: a node


def _refuse_clauses(node: exp.Expr, allowed: frozenset[str]) -> Iterator[UnsupportedViewError]:
    for key, prefix, reason, hint in _CLAUSE_REFUSALS:
        value = node.args.get(key)
        if value and key not in allowed:
            yield UnsupportedViewError(_clause_construct(prefix, value), reason, hint)
    refused = {key for key, *_ in _CLAUSE_REFUSALS}
    for key, value in node.args.items():
        if value and key not in allowed and key not in refused:
            yield UnsupportedViewError(
                key.rstrip("_").upper(), "this clause is not supported in a fast_refresh model", "Remove it"
            )
    if node.args.get("kind"):
        yield UnsupportedViewError(
            f"SELECT {node.args['kind']}", "this SELECT form is not supported", "Use a plain SELECT"
        )


_PARTITIONED_CLAUSES = frozenset({"distinct", "having", "qualify", "laterals"})


def _refuse_select_clauses(
    statement: exp.Expr, allowed: frozenset[str] = frozenset()
) -> Iterator[UnsupportedViewError]:
    """Clauses of SELECTs and derived tables no refresh maintains (but ``allowed`` ones)."""
    for node in statement.dfs():
        if isinstance(node, exp.Select):
            yield from _refuse_clauses(node, _ALLOWED_SELECT_ARGS | allowed)
            with_ = node.args.get("with_")
            if with_ is not None and with_.args.get("recursive"):
                yield UnsupportedViewError("WITH RECURSIVE", "recursive CTEs are not supported", _SEPARATE_MODEL)
        elif isinstance(node, exp.Subquery):
            yield from _refuse_clauses(node, _ALLOWED_SUBQUERY_ARGS)


def _refuse_grouping_extensions(statement: exp.Expr) -> Iterator[UnsupportedViewError]:
    for node in _nodes(statement, exp.Group):
        for key in ("grouping_sets", "cube", "rollup", "totals"):
            if node.args.get(key):
                yield UnsupportedViewError(
                    describe(node),
                    "GROUPING SETS, ROLLUP and CUBE are not supported",
                    "Make one fast_refresh model per grouping and combine them downstream",
                )
    for node in _nodes(statement, exp.GroupingSets, exp.Rollup, exp.Cube):
        yield UnsupportedViewError(
            describe(node),
            "GROUPING SETS, ROLLUP and CUBE are not supported",
            "Make one fast_refresh model per grouping and combine them downstream",
        )


_TIME_TRAVEL_ARGS = ("version", "when", "system_time", "changes")


def row_generator(node: exp.Expr) -> bool:
    """Whether ``node`` is a generator that expands each row it reads into rows of its own (explode,
    posexplode, inline, stack, json_tuple and their OUTER forms), where Spark runs one: as a
    ``LATERAL VIEW``, or a column of a SELECT named by ``AS`` (``AS (pos, value)`` for several), alone
    there, the SELECT neither grouping, aggregating, windowing, deduplicating nor reading another
    LATERAL VIEW (its arguments are values, not Snowflake's ``input =>``)."""
    if not functions.is_generator(node) or isinstance(node, (exp.Unnest, exp.ExplodingGenerateSeries)):
        return False
    if any(isinstance(a, (exp.Kwarg, exp.PropertyEQ)) for a in node.iter_expressions()):
        return False
    parent = node.parent
    if isinstance(parent, exp.Lateral):
        return bool(parent.args.get("view")) and parent.this is node
    if not isinstance(parent, (exp.Alias, exp.Aliases)):
        return False  # (unnamed, or inside an expression)
    select = node.parent_select
    if not isinstance(select, exp.Select) or not any(parent is p for p in select.expressions):
        return False
    generators = [
        p for p in select.expressions if isinstance(p, (exp.Alias, exp.Aliases)) and functions.is_generator(p.this)
    ]
    return (
        len(generators) == 1
        and not any(select.args.get(k) for k in ("group", "distinct", "laterals"))
        and not any(
            functions.is_aggregate(n) or isinstance(n, exp.Window) for p in select.expressions for n in p.walk()
        )
    )


def _refuse_unsupported_relations(statement: exp.Expr, row_generators: bool = False) -> Iterator[UnsupportedViewError]:
    """Table modifiers, VALUES, LATERAL (but, ``row_generators``, a LATERAL VIEW of a row generator)
    and TABLESAMPLE."""
    for node in statement.dfs():
        if isinstance(node, exp.Table):
            yield from _refuse_table_modifiers(node)
        elif isinstance(node, exp.Values):
            yield UnsupportedViewError(
                "VALUES",
                "inline VALUES lists are not supported as a source",
                "Load the rows into a table (e.g. a dbt seed) and ref() it",
            )
        elif isinstance(node, exp.Lateral) and not (row_generators and row_generator(node.this)):
            yield UnsupportedViewError(
                describe(node),
                "LATERAL subqueries, and LATERAL views of anything but a generator of rows given values (explode, "
                "posexplode, inline, stack, json_tuple; not FLATTEN's input => ...), are not supported",
                "Write it as LATERAL VIEW explode(tags) t AS tag, or compute it in a separate model and ref() it",
            )
        elif isinstance(node, exp.TableSample):
            yield UnsupportedViewError(describe(node), "TABLESAMPLE reads a random subset of rows", "Remove it")


def _refuse_table_modifiers(table: exp.Table) -> Iterator[UnsupportedViewError]:
    if not isinstance(table.this, exp.Identifier):
        yield UnsupportedViewError(
            describe(table),
            "table-valued functions are not supported as a source",
            "Materialize the function's rows in a separate model and ref() it",
        )
    for key in _TIME_TRAVEL_ARGS:
        if table.args.get(key):
            yield UnsupportedViewError(
                describe(table),
                "time travel in the definition is not supported: the view must follow the current table",
                "Remove VERSION/TIMESTAMP AS OF; the refresh itself reads consistent snapshots",
            )
    if table.args.get("sample"):
        yield UnsupportedViewError(describe(table), "TABLESAMPLE reads a random subset of rows", "Remove it")
    if table.args.get("pivots"):
        yield UnsupportedViewError(describe(table), "PIVOT/UNPIVOT is not supported", "Pivot in a downstream model")
    if table.args.get("joins"):
        yield UnsupportedViewError(
            describe(table), "parenthesised joins are not supported", "Write the joins as one left-to-right chain"
        )
    for key, value in table.args.items():
        if value and key not in ("this", "db", "catalog", "alias"):
            yield UnsupportedViewError(
                describe(table), f"table {key.rstrip('_')} modifiers are not supported", "Remove them"
            )


def _refuse_unsupported_joins(statement: exp.Expr) -> Iterator[UnsupportedViewError]:
    for join in _nodes(statement, exp.Join):
        side = (join.args.get("side") or "").upper()
        kind = (join.args.get("kind") or "").upper()
        method = (join.args.get("method") or "").upper()
        if method:
            yield UnsupportedViewError(
                f"{method} JOIN",
                f"{method} joins are not supported",
                "Write the join condition explicitly with ON a.col = b.col",
            )
        if side == "FULL":
            yield UnsupportedViewError(
                "FULL OUTER JOIN",
                "a full outer join null-extends both sides, so no master is present in every view row to slice "
                "the refresh by (inner, LEFT and RIGHT joins are fast refreshed; a FULL join when nothing groups or "
                "partitions the query's rows, or it groups or partitions them by COALESCE of the two sides of its "
                "key)",
                "Use a LEFT or RIGHT JOIN, or build the full join downstream from fast_refresh views "
                "(a LEFT JOIN view plus the unmatched rows of the other side)",
            )
        elif kind in ("SEMI", "ANTI"):
            yield UnsupportedViewError(
                f"{side or 'LEFT'} {kind} JOIN",
                f"{kind.lower()} joins are not supported (they are EXISTS/NOT EXISTS)",
                "Use an inner join to a model with one row per key, or filter downstream",
            )
        elif kind not in ("", "INNER", "CROSS", "OUTER"):
            yield UnsupportedViewError(
                f"{kind} JOIN", "this join type is not supported", "Use an inner, LEFT or RIGHT join"
            )
        for key, value in join.args.items():
            if value and key not in ("this", "on", "side", "kind", "method", "using"):
                yield UnsupportedViewError(
                    describe(join), f"join {key.rstrip('_')} modifiers are not supported", "Remove them"
                )


def _refuse_window_functions(statement: exp.Expr) -> Iterator[UnsupportedViewError]:
    for node in statement.dfs():
        if isinstance(node, exp.Window) and not node.args.get("partition_by"):
            yield unpartitioned_window(node)
        elif isinstance(node, exp.Window) or (
            isinstance(node, functions.WINDOW_ONLY_TYPES) and not functions.is_windowed(node)
        ):
            yield UnsupportedViewError(
                describe(node),
                "this window function is not in a form that is fast refreshed: windows are maintained "
                "when one SELECT computes them over the rows of one table, each partitioned by a common "
                "PARTITION BY expression, and the queries over it only select and filter its rows",
                _SEPARATE_MODEL,
            )


def unpartitioned_window(window: exp.Window) -> UnsupportedViewError:
    return UnsupportedViewError(
        describe(window),
        "a window without PARTITION BY reads every row: a change to one row could change every row of the view",
        "Partition the window by a key of the rows it reads (PARTITION BY customer_id), or build the "
        "view in a table model of its own",
    )


def _refuse_nondeterministic_functions(statement: exp.Expr) -> Iterator[UnsupportedViewError]:
    for node in statement.dfs():
        if functions.is_nondeterministic(node):
            shown = node.parent if isinstance(node.parent, exp.StrToUnix) else node  # unix_timestamp()
            yield UnsupportedViewError(
                describe(shown),
                "non-deterministic functions are not supported: the stored rows could not be recomputed "
                "to the same values on refresh",
                "Compute the value in a separate model, or store it in the master table",
            )


def _refuse_generators(statement: exp.Expr, row_generators: bool = False) -> Iterator[UnsupportedViewError]:
    """Generator functions (but, ``row_generators``, those expanding each row: row_generator)."""
    for node in statement.dfs():
        if functions.is_generator(node) and not (row_generators and row_generator(node)):
            yield UnsupportedViewError(
                describe(node),
                "a generator function (explode, posexplode, inline, stack, ...) is maintained as a LATERAL VIEW or "
                "as a SELECT column of its own named with AS, not inside an expression, unnamed, or beside a "
                "GROUP BY, aggregate, window, DISTINCT or LATERAL VIEW of the same SELECT",
                "Write it as LATERAL VIEW explode(tags) t AS tag",
            )


def _refuse_unsupported_aggregates(statement: exp.Expr) -> Iterator[UnsupportedViewError]:
    for node in statement.dfs():
        if isinstance(node, exp.Filter):
            yield UnsupportedViewError(
                describe(node),
                "FILTER is maintained on an aggregate of one value that ignores NULLs (COUNT, SUM, AVG, MIN, MAX,"
                " COUNT(DISTINCT), PERCENTILE, COLLECT_LIST/SET, LISTAGG, ...), not on this one",
                "Use one of those, or move the condition inside the aggregate",
            )
        if not functions.is_aggregate(node) or functions.is_windowed(node):
            continue  # a window's function: maintained with its window, or refused with it, once
        if not functions.is_maintainable_aggregate(node):
            yield _unmaintainable(node)
        if node.expressions:
            yield UnsupportedViewError(
                describe(node),
                "aggregates over several arguments are not supported",
                "Aggregate a single expression, e.g. COUNT(CASE WHEN a IS NOT NULL AND b IS NOT NULL THEN 1 END)",
            )
        for inner in node.this.walk() if node.this is not None else ():
            if functions.is_aggregate(inner):
                yield UnsupportedViewError(
                    describe(node),
                    "nested aggregates are not supported",
                    "Aggregate in one model and aggregate again in a downstream model",
                )


def _unmaintainable(node: exp.Expr) -> UnsupportedViewError:
    """Why the aggregate ``node`` cannot be maintained, and what to use instead."""
    if isinstance(node, functions.COLLECTIONS):
        return UnsupportedViewError(
            describe(node),
            "the order of a collected array is the order Spark reads the rows in, which differs between runs",
            f"Sort it: ARRAY_SORT({describe(node)})",
        )
    if isinstance(node, functions.CONCATENATIONS):
        value = node.this.sql(dialect="spark") if node.this is not None else "x"
        return UnsupportedViewError(
            describe(node),
            "the values are joined in the order Spark reads the rows in, which differs between runs",
            f"Order them: LISTAGG({value}, ...) WITHIN GROUP (ORDER BY {value}) on Spark 4, or "
            f"ARRAY_JOIN(ARRAY_SORT(COLLECT_LIST({value})), ...)",
        )
    if isinstance(node, tuple(functions.NOT_RECOMPUTABLE_ALTERNATIVES)):
        return UnsupportedViewError(
            describe(node),
            "its answer depends on the order Spark reads the rows in",
            functions.NOT_RECOMPUTABLE_ALTERNATIVES[type(node)],
        )
    name = node.name.lower() if isinstance(node, exp.Anonymous) else ""
    return UnsupportedViewError(
        describe(node),
        "this aggregate cannot be maintained incrementally",
        functions.AGGREGATE_ALTERNATIVES.get(
            name,
            "Use an aggregate the supported SQL page lists (COUNT, SUM, AVG, MIN, MAX, their DISTINCT forms, "
            "PERCENTILE, STDDEV, ...), or compute this one in a separate model or downstream",
        ),
    )


def _refuse_unknown_functions(statement: exp.Expr) -> Iterator[UnsupportedViewError]:
    for node in statement.dfs():
        if (
            isinstance(node, (exp.Anonymous, exp.AnonymousAggFunc))
            and node.name.lower() not in functions.DETERMINISTIC_BUILTIN_NAMES
        ):
            yield UnsupportedViewError(
                f"{node.name}()",
                "unknown or user-defined functions are not supported: the refresh cannot tell "
                "whether they are deterministic",
                "Use Spark built-in functions, or compute the value in a separate model",
            )


def _refuse_parameters(statement: exp.Expr) -> Iterator[UnsupportedViewError]:
    for node in _nodes(statement, exp.Placeholder, exp.Parameter, exp.SessionParameter):
        yield UnsupportedViewError(
            describe(node),
            "query parameters and variables are not supported",
            "Render the value into the SQL with Jinja (e.g. a var())",
        )


_CHECKS: tuple[Callable[[exp.Expr], Iterator[UnsupportedViewError]], ...] = (
    _refuse_set_operations,
    _refuse_expression_subqueries,
    _refuse_select_clauses,
    _refuse_grouping_extensions,
    _refuse_unsupported_relations,
    _refuse_unsupported_joins,
    _refuse_window_functions,
    _refuse_nondeterministic_functions,
    _refuse_generators,
    _refuse_unsupported_aggregates,
    _refuse_unknown_functions,
    _refuse_parameters,
)
