"""HAVING: a filter on the groups of an aggregate view, over the columns the view stores.

The view stores the groups that pass (what ``select`` from it returns is exactly the defining
query), each with its hidden state (counts, sums); a refresh applies the delta to a group's
stored row, or, for a group the view does not hold (it failed the filter, or did not exist),
recomputes it from the masters (refresh/views/aggregate_view.py), and keeps the groups that pass.

So the filter must be evaluable on a group's stored row: every aggregate it reads is one the
view stores (a selected one, ``COUNT(*)`` as the hidden ``_mv_count``, or one added as a hidden
output for the filter), and every other column it reads is grouped by. It is rewritten here
over the stored column names: ``having count(*) > 2 and sum(o.amount) > 10`` with
``sum(o.amount) as total`` selected becomes ``_mv_count > 2 and total > 10``; without it,
``_mv_count > 2 and _mv_a1_having > 10``.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from dbt_incremental_mv.analysis.model import MasterTable, OutputColumn
from dbt_incremental_mv.analysis.outputs import over_stored_columns
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
) -> tuple[exp.Expr, tuple[OutputColumn, ...]]:
    """The HAVING ``condition`` of ``statement`` (the query without it) over the view's stored
    column names, and the hidden outputs it adds (the aggregates it reads that no output
    computes); UnsupportedViewError when it reads what a stored row cannot hold."""
    probe = statement.copy()
    # after the SELECT list, which GROUP BY positions (``group by 1``) keep naming
    probe.set(
        "expressions",
        [
            *probe.expressions,
            exp.Alias(this=_expand_aliases(condition, statement), alias=exp.to_identifier(HAVING_PROJECTION)),
        ],
    )
    resolved = Resolver(masters).query(probe).projections[-1].expression
    keys = tuple((next(o.expression for o in outputs if o.name == name), name) for name in group_key_columns)
    known, hidden = list(outputs), list[OutputColumn]()
    rewritten = over_stored_columns(resolved, keys, known, hidden, "having", reader="HAVING")
    return rewritten, tuple(hidden)
