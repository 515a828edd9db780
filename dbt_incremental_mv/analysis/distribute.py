"""A UNION ALL that a query reads as its only FROM item, maintained as the UNION ALL view it equals.

dbt writes unions inside CTEs and derived tables (``dbt_utils.union_relations``, hand-written
staging unions): ``with unioned as (<a> union all <b>) select * from unioned``, often with a
projection or a filter on top. A SELECT that neither aggregates, deduplicates nor ranks, reading
one UNION ALL alone, is the UNION ALL of that SELECT over each branch: projecting and filtering
are row by row. So the query is rewritten, before the analysis, into a top-level UNION ALL
whose branch n is the outer SELECT over ``(<branch n>) AS <its alias>(<the union's columns>)``
(the column list renames by position, as a union does), and analysed as a UNION ALL view
(analysis/union.py). A CTE over such a query is rewritten first, so ``select * from final``
over ``final as (select ... from unioned)`` is too. A branch with DISTINCT or HAVING stays as it
is (the analysis takes those apart at a query's top level only): the UNION ALL is then refused.

One thing differs: a union widens each column to one type before the outer query reads it (an
INT branch beside a BIGINT one gives BIGINT), while the rewritten query reads each branch's own
type, and the top-level union widens only the outer query's results. Selected as it is, a
column ends up widened alike; read by an expression or a filter it is only exact when every
branch gives it the same type (a column of the same type, or a CAST to one type, as
union_relations writes): otherwise the query is refused, naming the column.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp
from sqlglot.errors import SqlglotError

from dbt_incremental_mv.analysis import functions
from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.model import MasterTable
from dbt_incremental_mv.analysis.parse import unwrap_parentheses, with_ctes
from dbt_incremental_mv.analysis.resolved import ResolvedQuery
from dbt_incremental_mv.analysis.resolver import Resolver, alias_name
from dbt_incremental_mv.analysis.union import named_projections, union_all_branches

# clauses of the outer SELECT that make it more than a projection and filter of each row
_NOT_ROW_BY_ROW = ("joins", "group", "having", "qualify", "order", "limit", "offset", "distinct", "windows", "laterals")


def distributed_union(statement: exp.Query, masters: Mapping[str, MasterTable]) -> exp.Query:
    """``statement`` as a top-level UNION ALL when it projects and filters a UNION ALL read
    alone (through CTEs and derived tables); else ``statement`` itself."""
    if not isinstance(statement, exp.Select) or not _row_by_row(statement):
        return statement
    ctes = _ctes(statement)
    item = statement.args["from_"].this
    found = _union_behind(item, ctes, masters)
    if found is None:
        return statement
    union, name, column_list = found
    branches = union_all_branches(union)
    assert branches is not None
    if column_list:  # the list names the columns: a branch's unnamed expressions are named by it
        branches = [named_projections(b, column_list) for b in branches]
    first = _resolved(branches[0], statement, masters)
    if first is None:
        return statement  # a branch the analysis refuses anyway: the UNION ALL's own message says so
    names = column_list or [p.name for p in first.projections]
    # later branches' unnamed columns named as the union names them (the first branch's names)
    branches = [branches[0], *(named_projections(b, [p.name for p in first.projections]) for b in branches[1:])]
    resolved = [first, *(_resolved(b, statement, masters) for b in branches[1:])]
    if any(r is None for r in resolved) or not all(_plain(b) for b in branches):
        return statement
    if any(r is not None and len(r.projections) != len(names) for r in resolved):
        return statement  # branches of different widths: Spark refuses the query itself
    alias = alias_name(item) or name
    _refuse_reads_of_mixed_types(statement, alias, names, resolved)
    rewritten = []
    for branch in branches:
        outer = statement.copy()
        subquery = exp.Subquery(
            this=branch.copy(),
            alias=exp.TableAlias(
                this=exp.to_identifier(alias), columns=[exp.to_identifier(n, quoted=True) for n in names]
            ),
        )
        outer.set("from_", exp.From(this=subquery))
        rewritten.append(_without_unused_ctes(outer))
    result: exp.Query = rewritten[0]
    for branch in rewritten[1:]:
        result = exp.Union(this=result, expression=branch, distinct=False)
    return result


def _plain(branch: exp.Query) -> bool:
    """Whether a branch reads as the SELECT it is inside a derived table: not with DISTINCT or
    HAVING, which the analysis takes apart at a query's top level only."""
    return isinstance(branch, exp.Select) and not branch.args.get("distinct") and not branch.args.get("having")


def _row_by_row(select: exp.Select) -> bool:
    if select.args.get("from_") is None or any(select.args.get(k) for k in _NOT_ROW_BY_ROW):
        return False
    return not any(functions.contains_aggregate(e) or e.find(exp.Window) is not None for e in select.expressions)


def _ctes(select: exp.Select) -> dict[str, exp.CTE]:
    with_ = select.args.get("with_")
    return {cte.alias.casefold(): cte for cte in with_.expressions} if with_ is not None else {}


def _union_behind(
    item: exp.Expr, ctes: Mapping[str, exp.CTE], masters: Mapping[str, MasterTable]
) -> tuple[exp.Query, str, list[str] | None] | None:
    """(the UNION ALL a FROM item reads, the name it goes by, the column names a column list
    gives it) for a CTE reference or derived table whose query is, or is rewritten into, a
    top-level UNION ALL; else None."""
    lists: list[list[str]] = []
    if isinstance(item, exp.Table) and not item.args.get("db") and item.name.casefold() in ctes:
        cte = ctes[item.name.casefold()]
        body, name = cte.this, cte.alias
        lists.append([c.name for c in cte.args["alias"].columns] if cte.args.get("alias") else [])
    elif isinstance(item, exp.Subquery):
        body, name = unwrap_parentheses(item.this), alias_name(item) or "u"
    else:
        return None
    alias = item.args.get("alias")
    lists.append([c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else [])
    if isinstance(body, exp.Select) and not body.args.get("with_"):
        # a query over a union in its turn (``final`` over ``unioned``): the CTEs it sees are the
        # ones defined before it, which the outer WITH holds
        shared = exp.With(expressions=[c.copy() for c in ctes.values()]) if ctes else None
        body = distributed_union(with_ctes(body, shared), masters)
    if not (isinstance(body, exp.Union) and not body.args.get("distinct")):
        return None
    chosen = next((names for names in reversed(lists) if names), None)
    return body, name, chosen


def _resolved(branch: exp.Query, outer: exp.Select, masters: Mapping[str, MasterTable]) -> ResolvedQuery | None:
    """A branch resolved with the CTEs the outer query defines (None when it cannot be)."""
    try:
        return Resolver(masters).query(with_ctes(branch, outer.args.get("with_")))
    except UnsupportedViewError:
        return None


def _column_type(expression: exp.Expr, query: ResolvedQuery) -> str | None:
    """The Spark type of a branch's column where it is plain: a master column, or a CAST."""
    while isinstance(expression, exp.Paren):
        expression = expression.this
    if isinstance(expression, (exp.Cast, exp.TryCast)):
        return _normalized(expression.to)
    if isinstance(expression, exp.Column):
        for occurrence in query.occurrences:
            if occurrence.alias == expression.table:
                wanted = expression.name.casefold()
                found = next((t for c, t in occurrence.master.columns if c.casefold() == wanted), None)
                return _normalized(found) if found is not None else None
    return None


def _normalized(spark_type: str | exp.DataType) -> str | None:
    """A type as one spelling (``decimal(12,2)`` and ``DECIMAL(12, 2)`` alike), None if unreadable."""
    try:
        return exp.DataType.build(spark_type, dialect="spark").sql(dialect="spark").casefold()
    except (ValueError, SqlglotError):
        return None


def _refuse_reads_of_mixed_types(
    outer: exp.Select,
    alias: str,
    names: list[str],
    resolved: list[ResolvedQuery | None],
) -> None:
    """Refuse an expression or filter of the outer query that reads a column whose type the
    branches do not agree on (Spark would compute it on the widened type, the branches on theirs)."""
    position = {n.casefold(): i for i, n in enumerate(names)}
    read: list[exp.Expr] = []
    for item in outer.expressions:
        bare = item.this if isinstance(item, exp.Alias) else item
        if isinstance(bare, exp.Star) or (
            isinstance(bare, exp.Column) and _reads_union(bare, alias, position) is not None
        ):
            continue  # selected as it is: widened by the top-level union alike
        read.append(item)
    where = outer.args.get("where")
    if where is not None:
        read.append(where.this)
    for expression in read:
        for column in expression.find_all(exp.Column):
            index = _reads_union(column, alias, position)
            if index is None:
                continue
            types = [_column_type(r.projections[index].expression, r) for r in resolved if r is not None]
            if None in types or len(set(types)) > 1:
                shown = ", ".join(t or "an expression" for t in types)
                raise UnsupportedViewError(
                    describe(expression),
                    f"this reads {names[index]} of the UNION ALL {alias}, whose branches give it different "
                    f"or unknown types ({shown}): Spark computes it on the type the union widens them to",
                    f"Cast {names[index]} to one type in every branch of the UNION ALL, e.g. "
                    f"cast(... as {next((t for t in types if t), 'bigint')}) as {names[index]}",
                )


def _reads_union(column: exp.Column, alias: str, position: Mapping[str, int]) -> int | None:
    """The union column a reference reads (its position), or None."""
    parts = [p.name for p in column.parts]
    if isinstance(column.this, exp.Star):
        return None
    if len(parts) >= 2 and parts[0].casefold() == alias.casefold() and parts[1].casefold() in position:
        return position[parts[1].casefold()]
    if parts[0].casefold() in position:
        return position[parts[0].casefold()]
    return None


def _without_unused_ctes(select: exp.Select) -> exp.Select:
    """``select`` without the CTEs nothing in it reads (the one rewritten into its branches)."""
    with_ = select.args.get("with_")
    if with_ is None:
        return select
    defined = {cte.alias.casefold(): cte for cte in with_.expressions}
    body = select.copy()
    body.set("with_", None)
    needed: set[str] = set()
    pending = [body]
    while pending:
        node = pending.pop()
        for table in node.find_all(exp.Table):
            name = table.name.casefold()
            if not table.args.get("db") and name in defined and name not in needed:
                needed.add(name)
                pending.append(defined[name].this)
    kept = [cte for cte in with_.expressions if cte.alias.casefold() in needed]
    select.set("with_", exp.With(expressions=kept) if kept else None)
    return select
