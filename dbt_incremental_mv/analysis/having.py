"""HAVING: a filter on the groups of an aggregate view, over the columns the view stores.

The view stores the groups that pass (what ``select`` from it returns is exactly the defining
query), each with its hidden state (counts, sums); a refresh applies the delta to a group's
stored row, or, for a group the view does not hold (it failed the filter, or did not exist),
recomputes it from the masters (refresh/views/aggregate_view.py), and keeps the groups that pass.

So the filter must be evaluable on a group's stored row: every aggregate it reads is one the
view selects (or ``COUNT(*)``, which the view keeps as its hidden ``_mv_count``), and every
other column it reads is grouped by. It is rewritten here over the stored column names:
``having count(*) > 2 and sum(o.amount) > 10`` with ``sum(o.amount) as total`` selected becomes
``_mv_count > 2 and total > 10``.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from dbt_incremental_mv.analysis import functions
from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.hidden import ROW_COUNT_COLUMN
from dbt_incremental_mv.analysis.model import MasterTable, OutputColumn
from dbt_incremental_mv.analysis.resolver import Resolver

HAVING_PROJECTION = "_mv_having"


def split_having(statement: exp.Query) -> tuple[exp.Query, exp.Expr | None]:
    """The outer query without its HAVING (when it has a GROUP BY), and that HAVING's condition.
    Anything else keeps its HAVING, which the construct checks refuse."""
    if not isinstance(statement, exp.Select) or statement.args.get("having") is None or not statement.args.get("group"):
        return statement, None
    condition = statement.args["having"].this.copy()
    without = statement.copy()
    without.set("having", None)
    return without, condition


def _expand_aliases(condition: exp.Expr, statement: exp.Select) -> exp.Expr:
    """``condition`` with each unqualified column that names a SELECT alias replaced by the
    aliased expression (Spark resolves HAVING names against the SELECT list)."""
    aliases = {p.alias.casefold(): p.this for p in statement.expressions if isinstance(p, exp.Alias) and p.alias}

    def expand(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name.casefold() in aliases:
            return exp.Paren(this=aliases[node.name.casefold()].copy())
        return node

    return condition.copy().transform(expand)


def resolve_having(
    condition: exp.Expr,
    statement: exp.Select,
    masters: Mapping[str, MasterTable],
    outputs: tuple[OutputColumn, ...],
    group_key_columns: tuple[str, ...],
) -> exp.Expr:
    """The HAVING ``condition`` of ``statement`` (the query without it) over the view's stored
    column names; UnsupportedViewError when it reads what a stored row does not hold."""
    probe = statement.copy()
    probe.set(
        "expressions",
        [exp.Alias(this=_expand_aliases(condition, statement), alias=exp.to_identifier(HAVING_PROJECTION))],
    )
    resolved = Resolver(masters).query(probe).projections[0].expression
    keys = {name: next(o.expression for o in outputs if o.name == name) for name in group_key_columns}
    aggregates = [o for o in outputs if o.is_aggregate]

    def stored(node: exp.Expr) -> exp.Expr:
        bare = node.unnest() if isinstance(node, exp.Paren) else node
        for name, expression in keys.items():
            if bare == expression:
                return exp.column(name, quoted=True)
        if functions.is_aggregate(bare):
            for output in aggregates:
                if bare == output.expression:
                    return exp.column(output.name, quoted=True)
            if isinstance(bare, exp.Count) and isinstance(bare.this, exp.Star) and not bare.args.get("distinct"):
                return exp.column(ROW_COUNT_COLUMN, quoted=True)
            raise UnsupportedViewError(
                describe(bare),
                "HAVING reads an aggregate the view does not select: a group's stored row does not hold it",
                f"Select it (e.g. {describe(bare)} as some_name) and the HAVING can read it",
            )
        return node

    rewritten = resolved.copy().transform(stored)
    for column in rewritten.find_all(exp.Column):
        if column.table:
            raise UnsupportedViewError(
                describe(column),
                "HAVING reads a column that is neither grouped by nor aggregated",
                "Group by it, or filter it in WHERE",
            )
    return rewritten
