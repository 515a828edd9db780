"""Outer joins that are inner joins: a LEFT JOIN whose null-extended rows the query discards.

A row a LEFT JOIN null-extends has NULL in every column of the joined item. A condition that no
NULL satisfies (``c.segment = 'retail'``, ``c.region_id > 0``, ``c.id IS NOT NULL``) reading one of
them in WHERE, or in the ON of an inner join after it, discards every such row: the LEFT JOIN then
returns the rows an inner join returns, and is one (Spark's optimizer rule EliminateOuterJoin does
the same to the plan). Every view class reads it as the inner join it is
(:func:`with_outer_joins_made_inner`, part of analysis.parsed_query), so the join class maintains
``orders o left join customers c on ... where c.segment = 'retail'`` by its deltas instead of
refusing the filter. The per-partition class follows the NULL rows further, through the queries
that select such a column to a query that discards them (partitionwise._null_rejected).

Pure syntax: an item is found by its qualifier (or is the one item of its SELECT).
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

from dbt_incremental_mv.analysis.resolved import split_conjuncts, unparenthesized

# conditions no NULL side satisfies (NULL = x is NULL, not TRUE)
_NULL_REJECTING = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


def item_aliases(select: exp.Select) -> list[str]:
    """The (case-folded) aliases of a SELECT's FROM item and JOIN items, in order (position 0:
    the FROM item); empty without a FROM."""
    source = select.args.get("from_")
    if source is None:
        return []
    return [
        source.this.alias_or_name.casefold(),
        *(j.this.alias_or_name.casefold() for j in select.args.get("joins") or ()),
    ]


def position(column: exp.Column, select: exp.Select, aliases: list[str]) -> int | None:
    """The position of the FROM or JOIN item of ``select`` a column of its own clauses reads (by
    its qualifier, or the one item's), or None."""
    if column.parent_select is not select:
        return None
    if column.table:
        matches = [i for i, alias in enumerate(aliases) if alias == column.table.casefold()]
        return matches[0] if len(matches) == 1 else None
    return 0 if len(aliases) == 1 and not select.args.get("laterals") else None


def rejected_columns(conjunct: exp.Expr) -> Iterator[exp.Column]:
    """The columns a conjunct reads alone whose NULL makes it not true."""
    if isinstance(conjunct, _NULL_REJECTING):
        for side in (unparenthesized(conjunct.this), unparenthesized(conjunct.expression)):
            if isinstance(side, exp.Column) and not isinstance(side.this, exp.Star):
                yield side
    elif isinstance(conjunct, exp.Not) and isinstance(conjunct.this, exp.Is):
        tested = unparenthesized(conjunct.this.this)
        if isinstance(conjunct.this.expression, exp.Null) and isinstance(tested, exp.Column):
            yield tested


def rejected_by_conditions(select: exp.Select, after: int = 0) -> dict[int, set[str]]:
    """Per FROM or JOIN item of ``select`` (by position), the names of its columns whose NULL
    discards a row of the join: read alone by a WHERE conjunct or the ON conjunct of an inner join
    at a position above ``after``, no NULL satisfying it. Whichever join made the column NULL, such
    a condition discards the row: it is evaluated on every row joined before it."""
    aliases = item_aliases(select)
    where = select.args.get("where")
    conjuncts = split_conjuncts(where.this if where is not None else None)
    for at, join in enumerate(select.args.get("joins") or (), start=1):
        if at > after and _inner(join):
            conjuncts += split_conjuncts(join.args.get("on"))
    found: dict[int, set[str]] = {}
    for conjunct in conjuncts:
        for column in rejected_columns(conjunct):
            item = position(column, select, aliases)
            if item is not None:
                found.setdefault(item, set()).add(column.name.casefold())
    return found


def rejected_by_own_join(select: exp.Select, at: int) -> frozenset[str]:
    """The columns of the item a LEFT JOIN joins (at position ``at``) whose NULL its ON never
    matches: its rows with them NULL are not in the join."""
    aliases = item_aliases(select)
    join = select.args["joins"][at - 1]
    return frozenset(
        c.name.casefold()
        for conjunct in split_conjuncts(join.args.get("on"))
        for c in rejected_columns(conjunct)
        if position(c, select, aliases) == at
    )


def is_left_outer(join: exp.Join) -> bool:
    return _side(join) == "LEFT" and (join.args.get("kind") or "").upper() in ("", "OUTER")


def made_inner(join: exp.Join) -> None:
    """An outer join written as the inner join it is."""
    join.set("side", None)
    join.set("kind", None)


def with_outer_joins_made_inner(statement: exp.Query) -> exp.Query:
    """``statement`` with every LEFT or RIGHT join whose null-extended rows its own SELECT
    discards written as the inner join it is: a condition no NULL satisfies, in WHERE or in the ON
    of an inner join after it, reads a column of the item a LEFT JOIN joins, or of an item before a
    RIGHT JOIN. A join made inner may make another so (its ON then discards rows of the items
    before it). A FULL JOIN is left as written (the message of a refusal quotes what the user
    wrote)."""
    for select in statement.find_all(exp.Select):
        joins = select.args.get("joins") or ()
        changed = True
        while changed:
            changed = False
            for at, join in enumerate(joins, start=1):
                side = _side(join)
                if side not in ("LEFT", "RIGHT") or (join.args.get("kind") or "").upper() not in ("", "OUTER"):
                    continue
                rejected = rejected_by_conditions(select, after=at)
                if rejected.get(at) if side == "LEFT" else any(rejected.get(i) for i in range(at)):
                    made_inner(join)
                    changed = True
    return statement


def outer_joins_read_as_inner(statement: exp.Query) -> list[str]:
    """The items of the outer joins of ``statement`` (unchanged) that with_outer_joins_made_inner
    reads as inner joins, as written (``LEFT JOIN c``), for explain."""
    copy = statement.copy()
    joins = list(copy.find_all(exp.Join))
    written = [f"{_side(j)} JOIN {j.this.alias_or_name}" if _side(j) else "" for j in joins]
    with_outer_joins_made_inner(copy)
    return [w for w, j in zip(written, joins) if w and not _side(j)]


def _side(join: exp.Join) -> str:
    return (join.args.get("side") or "").upper()


def _inner(join: exp.Join) -> bool:
    return not join.args.get("side") and (join.args.get("kind") or "").upper() in ("", "INNER")
