"""A CTE or derived table that aggregates, joined to more tables on its group keys ("orders per
customer" joined back to customers, a ``SELECT DISTINCT`` of keys joined as a filter), read as
the aggregate view it equals.

``t JOIN (select k, agg(x) from s group by k) a ON a.k = t.c`` has one row per row of ``t`` (its
join is on every group key: each row of ``t`` meets at most one group), whose aggregates are those
of the rows of ``s`` with ``k = t.c``. That is ``t JOIN s ON s.k = t.c GROUP BY <t's row>``, an
aggregate over a join, which the aggregate view class maintains; ``<t's row>`` is every column
the query selects of the other tables, which must include each one's key (so each group is one
row of theirs). In that query each of the CTE's columns is read through an aggregate:

* an aggregate column as it is (its rows are the group's rows);
* a group-key column (or an expression of group keys, a constant) as ``MAX`` of it (it has one
  value in the group);
* after a LEFT JOIN, a row of ``t`` that meets no group has NULL in every column of the CTE, where
  the aggregate query would say ``COUNT(*) = 1`` or ``COALESCE(SUM(x), 0) = 0``: every column is
  ``CASE WHEN COUNT(<first group key>) = 0 THEN NULL ELSE <the column> END`` (a group key is never
  NULL on a matched row: NULL equals nothing).

Refused, naming the CTE: a join on anything but an equality of each group key to the other
tables; a RIGHT or FULL join, or a LEFT JOIN to a CTE over several tables; a HAVING in it; the
CTE first in FROM; two of them (their rows would multiply each other's); an outer query that
aggregates, or that reads the CTE's columns outside its SELECT list (in WHERE, or in another
table's ON); and one that does not select the key of every other table.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from dbt_incremental_mv.analysis import functions
from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.joins import references
from dbt_incremental_mv.analysis.model import JoinKind

_HINT = "Make it a separate fast_refresh model and ref() it: that model maintains it, this one reads it"


def refusal(label: str, reason: str, hint: str = _HINT) -> UnsupportedViewError:
    return UnsupportedViewError(
        label, f"a CTE or subquery that aggregates can be joined to more tables, but not here: {reason}", hint
    )


def check_join(
    label: str,
    aliases: frozenset[str],
    group_keys: Sequence[exp.Expr],
    conjuncts: Sequence[exp.Expr],
    kind: JoinKind,
    occurrences: int,
    columns: Sequence[tuple[str, exp.Expr]] = (),
) -> None:
    """Refuse a join to an aggregating CTE that is not an inner or LEFT join on an equality of
    each of its group keys to the tables before it."""
    if kind is JoinKind.RIGHT:
        raise refusal(label, "it is the preserved side of a RIGHT JOIN")
    if kind is JoinKind.LEFT and occurrences > 1:
        raise refusal(label, "it joins tables, and it is the null-supplying side of a LEFT JOIN")
    covered: set[int] = set()
    for conjunct in conjuncts:
        index = None
        if isinstance(conjunct, exp.EQ):
            for mine, other in ((conjunct.this, conjunct.expression), (conjunct.expression, conjunct.this)):
                if (
                    references(mine) <= aliases
                    and references(other)
                    and not references(other) & aliases
                    and not functions.contains_aggregate(other)
                    and mine in group_keys
                ):
                    index = list(group_keys).index(mine)
                    break
        if index is None:
            raise refusal(
                label,
                f"its join condition {describe(conjunct)} is not an equality of one of its group keys to "
                "the tables before it",
                f"Join {label} on its group keys only, each equal to a column of another table",
            )
        covered.add(index)
    if len(covered) < len(group_keys):
        named = {id(k): next((f"{label}.{n}" for n, e in columns if e == k), None) for k in group_keys}
        missing = ", ".join(named[id(k)] or describe(k) for i, k in enumerate(group_keys) if i not in covered)
        raise refusal(
            label,
            f"it is not joined on every group key (not on {missing}): a row could meet several of its groups",
            f"Join {label} on all of its group keys",
        )


def pulled_columns(
    columns: Sequence[tuple[str, exp.Expr]], group_keys: Sequence[exp.Expr], left: bool
) -> tuple[tuple[str, exp.Expr], ...]:
    """The CTE's columns as the aggregate query over the join reads them (module docstring)."""
    matched = exp.Count(this=group_keys[0].copy(), big_int=True)
    pulled = []
    for name, expression in columns:
        value = expression.copy() if functions.contains_aggregate(expression) else exp.Max(this=expression.copy())
        if left:
            value = exp.Case(
                ifs=[exp.If(this=exp.EQ(this=matched.copy(), expression=exp.Literal.number(0)), true=exp.Null())],
                default=value,
            )
        pulled.append((name, value))
    return tuple(pulled)


def check_outer_query(
    label: str,
    aliases: frozenset[str],
    select: exp.Select,
    conditions: Sequence[tuple[exp.Expr, exp.Expr]],
) -> None:
    """Refuse an outer query that aggregates itself or reads the CTE outside its SELECT list
    (``conditions``: each WHERE conjunct and other ON condition, as written and resolved)."""
    if select.args.get("group") is not None or any(functions.contains_aggregate(e) for e in select.expressions):
        raise refusal(label, "the query over it aggregates too (an aggregate of an aggregate)")
    for written, resolved in conditions:
        if references(resolved) & aliases:
            raise refusal(
                label,
                f"{describe(written)} reads its columns outside the SELECT list",
                "Select its columns and filter in a downstream model",
            )


def check_keys_selected(label: str, keys: Sequence[tuple[str, exp.Expr]], projections: Sequence[exp.Expr]) -> None:
    """Refuse when a key of another table is not selected: the view's rows would not be theirs."""
    for shown, key in keys:
        if not any(p == key for p in projections):
            raise refusal(
                label,
                f"the query does not select {shown}, the key of a table joined to it: its rows are "
                "counted per row of the other tables",
                f"Select {shown} too",
            )
