"""UNION ALL views: a top-level ``UNION ALL`` of branches that are each fast refreshable.

Oracle fast refreshes a UNION ALL materialized view whose branches are each fast refreshable
and that selects a *UNION ALL marker*, a constant that differs per branch: a change to one
branch's masters is applied to that branch's rows only. The plugin adds the marker itself: the
stored table has a hidden ``_mv_branch`` column (1, 2, ... in written order), and every branch
is maintained by its own class (join, outer join, aggregate, HAVING, DISTINCT) on its own rows:

- each branch selects the union's columns (named as the first branch names them, by position)
  plus ``cast(<n> as int) as _mv_branch``; an aggregate branch also groups by it, so its groups
  are matched (deleted, read, recomputed) within its own rows only;
- occurrence aliases are made unique across branches (``o`` in branches 1 and 2 is ``o`` and
  ``o_2``), so a join branch's hidden key columns are its own: NULL on the other branches' rows,
  its DELETE cannot match them;
- the stored table holds the visible columns, ``_mv_branch``, then each branch's hidden columns
  (the counts of two aggregate branches, BIGINT in both, are one column: each row holds its own
  branch's value; a sum, a reserve and a SUM/AVG output's VALUE are named per branch, so each has
  its branch's own type, not the union's widening of it); a row leaves the other branches' hidden
  columns NULL;
- the union widens a branch's column to the visible column's type (a decimal AVG to double, say):
  a refresh computes the branch's value in the branch's type (its VALUE column, rounded as Spark
  rounds the branch's aggregate) and casts that, as the union does.

A refresh runs every changed branch's writes as one DELETE and one INSERT (refresh/views/union_view.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import cast

from sqlglot import exp

from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.hidden import aggregate_hidden_columns, key_hidden_columns
from dbt_incremental_mv.analysis.model import (
    EquiPair,
    HiddenColumn,
    HiddenPurpose,
    JoinStep,
    MasterOccurrence,
    OutputColumn,
    OutputKind,
    ViewClass,
    ViewDefinition,
)
from dbt_incremental_mv.analysis.parse import unwrap_parentheses, with_ctes
from dbt_incremental_mv.analysis.resolved import column_node

BRANCH_COLUMN = "_mv_branch"


def union_all_branches(statement: exp.Query) -> list[exp.Query] | None:
    """The branches of a top-level ``UNION ALL`` (nested ones flattened), left to right, each
    carrying the union's WITH clause; None when ``statement`` is not one. ORDER BY or LIMIT on
    the union stay on it (the construct checks refuse them)."""
    if not _is_union_all(statement):
        return None
    shared = statement.args.get("with_")
    return [with_ctes(branch, shared) for branch in _flattened(statement)]


def map_union_branches(statement: exp.Query, rewrite: Callable[[exp.Query], exp.Query]) -> exp.Query:
    """A copy of the top-level UNION ALL ``statement`` with each branch replaced by ``rewrite(branch)``."""
    copy = statement.copy()
    nodes = _union_nodes(copy)
    for node in nodes:
        for side in ("this", "expression"):
            child = _side(node, side)
            if not any(child is n for n in nodes):
                node.set(side, rewrite(child))
    return copy


def top_level_unions(statement: exp.Expr) -> list[exp.Expr]:
    """The UNION ALL nodes that make up a top-level UNION ALL (the construct checks accept them)."""
    return _union_nodes(statement) if isinstance(statement, exp.Query) and _is_union_all(statement) else []


def _side(union: exp.Expr, side: str) -> exp.Query:
    """A set operation's ``this`` or ``expression`` without its parentheses: a query (sqlglot
    parses each side of one as a query, a VALUES list as a SELECT from it)."""
    return cast(exp.Query, unwrap_parentheses(union.args[side]))


def _is_union_all(node: exp.Expr) -> bool:
    return isinstance(node, exp.Union) and not node.args.get("distinct")


def _union_nodes(statement: exp.Expr) -> list[exp.Expr]:
    nodes = [statement]
    for side in ("this", "expression"):
        child = _side(statement, side)
        if _is_union_all(child) and not any(child.args.get(k) for k in ("with_", "order", "limit", "offset")):
            nodes += _union_nodes(child)
    return nodes


def _flattened(statement: exp.Expr) -> list[exp.Query]:
    nodes = _union_nodes(statement)
    branches: list[exp.Query] = []
    for side in ("this", "expression"):
        child = _side(statement, side)
        branches += _flattened(child) if any(child is n for n in nodes[1:]) else [child]
    return branches


def named_projections(branch: exp.Query, names: Sequence[str]) -> exp.Query:
    """A later branch with its unnamed expressions named as the first branch names their column
    (UNION ALL takes the first branch's names; Spark would invent a name for them)."""
    projections = branch.expressions if isinstance(branch, exp.Select) else []
    if len(projections) != len(names) or any(_is_star(p) for p in projections):
        return branch
    named = branch.copy()
    taken = {p.alias_or_name.casefold() for p in projections}
    for position, (projection, name) in enumerate(zip(named.expressions, names)):
        if not isinstance(projection, (exp.Alias, exp.Column)):
            alias = name if name.casefold() not in taken else f"{name}_{position + 1}"
            projection.replace(exp.alias_(projection.copy(), exp.to_identifier(alias, quoted=True)))
    return named


def _is_star(projection: exp.Expr) -> bool:
    return (
        isinstance(projection, exp.Star) or isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
    )


def analyze_union(branches: Sequence[ViewDefinition]) -> ViewDefinition:
    """The UNION ALL of the analysed ``branches`` (in written order) as one ViewDefinition."""
    names = tuple(o.name for o in branches[0].visible_outputs)
    taken: set[str] = set()
    prepared = []
    for number, branch in enumerate(branches, start=1):
        _refuse_unmaintainable_branch(number, branch, len(names))
        aliases = _unique_aliases(branch, number, taken)
        # an aggregate branch is maintained on columns of its own (the union widens the visible ones)
        outputs = {
            o.name: own_column(number, name) if branch.is_aggregate else name for o, name in zip(branch.outputs, names)
        }
        prepared.append(_with_marker(_renamed(branch, aliases, outputs), number))
    keys: dict[str | None, list[HiddenColumn]] = {}  # alias -> its key columns, named over every join branch
    for column in key_hidden_columns(tuple(o for b in prepared if not b.is_aggregate for o in b.occurrences)):
        keys.setdefault(column.occurrence, []).append(column)
    prepared = [
        b
        if b.is_aggregate
        else replace(b, hidden_columns=tuple(h for o in b.occurrences for h in keys.get(o.alias, ())))
        for b in prepared
    ]
    marker = HiddenColumn(BRANCH_COLUMN, _marker(1), HiddenPurpose.BRANCH)
    first = prepared[0].outputs
    own_columns = [
        HiddenColumn(o.name, o.expression, HiddenPurpose.VALUE, outputs=(name,))
        for b in prepared
        if b.is_aggregate
        for o, name in zip(b.outputs, names)
    ]
    hidden = (marker, *own_columns, *_shared_hidden_columns(prepared))
    _refuse_name_collisions(names, hidden)
    return ViewDefinition(
        occurrences=tuple(o for b in prepared for o in b.occurrences),
        joins=(),
        where_conjuncts=(),
        outputs=tuple(OutputColumn(name, o.expression, o.kind, o.argument) for o, name in zip(first, names)),
        group_by=(),
        is_aggregate=False,
        view_class=ViewClass.UNION_ALL,
        hidden_columns=hidden,
        null_supplying=frozenset().union(*(b.null_supplying for b in prepared)),
        group_key_columns=(),
        referenced_columns=MappingProxyType({a: c for b in prepared for a, c in b.referenced_columns.items()}),
        branches=tuple(prepared),
    )


def own_column(number: int, name: str) -> str:
    """The column of aggregate branch ``number`` that holds its visible column ``name``."""
    return f"_mv_b{number}_{name}"


def visible_sources(branch: ViewDefinition, names: Sequence[str]) -> dict[str, str]:
    """The union's visible column ``names`` (in order), each to the branch's column holding it
    (an aggregate branch's own column, or the visible one itself)."""
    return dict(zip(names, (o.name for o in branch.outputs if o.name != BRANCH_COLUMN)))


def _refuse_name_collisions(names: Sequence[str], hidden: Sequence[HiddenColumn]) -> None:
    seen = {name.casefold() for name in names}
    for column in hidden:
        if column.name.casefold() in seen:
            raise UnsupportedViewError(
                column.name,
                "the UNION ALL needs a hidden column of this name twice (a branch's own column, "
                "an aggregate helper or an occurrence's key)",
                "Rename the table aliases of one of the branches",
            )
        seen.add(column.name.casefold())


def _refuse_unmaintainable_branch(number: int, branch: ViewDefinition, width: int) -> None:
    if len(branch.visible_outputs) != width:
        raise UnsupportedViewError(
            f"UNION ALL branch {number}",
            f"it selects {len(branch.visible_outputs)} columns and the first branch {width}",
            "Select the same number of columns in every branch",
        )
    derived = next((o for o in branch.outputs if o.kind is OutputKind.DERIVED), None)
    if derived is not None:
        raise UnsupportedViewError(
            describe(derived.expression),
            f"UNION ALL branch {number} computes an expression over aggregates, which a union's "
            "branch cannot maintain yet",
            "Select the aggregates themselves in the branch and compute the expression in a downstream "
            "model, or make the branch its own fast_refresh model",
        )
    if branch.is_aggregate and not branch.group_by:
        raise UnsupportedViewError(
            f"UNION ALL branch {number}",
            "it aggregates without GROUP BY: its one row exists even over no rows, which a branch's "
            "groups cannot express",
            "Group the branch by a column, or make it its own fast_refresh model",
        )
    unselected = next((o for o in branch.outputs if o.hidden), None)
    if unselected is not None:  # (the branch's columns are renamed per branch; its hidden aggregates are not yet)
        raise UnsupportedViewError(
            describe(unselected.expression),
            f"the HAVING of UNION ALL branch {number} reads an aggregate the branch does not select",
            "Select it in every branch (it becomes a column of the union), or make the branch its own "
            "fast_refresh model",
        )


def _unique_aliases(branch: ViewDefinition, number: int, taken: set[str]) -> dict[str, str]:
    """Each alias of ``branch`` renamed ``<alias>_<branch number>`` (then ``_2``, ...) when an
    earlier branch uses it; ``taken`` gains the branch's aliases."""
    own = set(branch.aliases)
    renamed = {}
    for alias in branch.aliases:
        new = alias
        if new in taken:
            new = f"{alias}_{number}"
            while new in taken or new in own:
                new += "_"
        renamed[alias] = new
        taken.add(new)
    return renamed


def _renamed(view: ViewDefinition, aliases: dict[str, str], names: dict[str, str]) -> ViewDefinition:
    """``view`` with its occurrences renamed by ``aliases`` and its outputs by ``names``."""

    def expression(node: exp.Expr) -> exp.Expr:
        def rename(column: exp.Expr) -> exp.Expr:
            if isinstance(column, exp.Column) and column.table in aliases:
                return column_node(aliases[column.table], column.name)
            return column

        return node.copy().transform(rename)

    def stored(node: exp.Expr) -> exp.Expr:  # HAVING reads stored names
        def rename(column: exp.Expr) -> exp.Expr:
            if isinstance(column, exp.Column) and not column.table and column.name in names:
                return exp.column(names[column.name], quoted=True)
            return column

        return node.copy().transform(rename)

    outputs = tuple(
        OutputColumn(names[o.name], expression(o.expression), o.kind, expression(o.argument) if o.argument else None)
        for o in view.outputs
    )
    summands = {  # what each AVG's hidden sum adds up (analysis/summands.py), renamed
        names[output]: expression(h.expression.this)
        for h in view.hidden_columns
        if h.purpose is HiddenPurpose.SUM
        for output in h.outputs
    }
    joins = tuple(
        JoinStep(
            aliases[s.alias],
            s.kind,
            tuple(EquiPair(expression(p.left), expression(p.right), p.null_safe) for p in s.equi_pairs),
            expression(s.condition) if s.condition is not None else None,
            tuple(expression(r) for r in s.residual),
        )
        for s in view.joins
    )
    return replace(
        view,
        occurrences=tuple(MasterOccurrence(aliases[o.alias], o.master) for o in view.occurrences),
        joins=joins,
        where_conjuncts=tuple(expression(c) for c in view.where_conjuncts),
        outputs=outputs,
        group_by=tuple(expression(g) for g in view.group_by),
        hidden_columns=aggregate_hidden_columns(outputs, bool(view.group_by), summands) if view.is_aggregate else (),
        null_supplying=frozenset(aliases[a] for a in view.null_supplying),
        group_key_columns=tuple(names[c] for c in view.group_key_columns),
        referenced_columns=MappingProxyType({aliases[a]: c for a, c in view.referenced_columns.items()}),
        having=stored(view.having) if view.having is not None else None,
    )


def _marker(number: int) -> exp.Expr:
    # (a cast, not a bare literal: GROUP BY 2 would name the second column)
    return exp.Cast(this=exp.Literal.number(number), to=exp.DataType.build("int"))


def _with_marker(branch: ViewDefinition, number: int) -> ViewDefinition:
    """The branch selecting ``_mv_branch`` = ``number`` too; an aggregate branch groups by it."""
    outputs = (*branch.outputs, OutputColumn(BRANCH_COLUMN, _marker(number)))
    if not branch.is_aggregate:
        return replace(branch, outputs=outputs)
    return replace(
        branch,
        outputs=outputs,
        group_by=(*branch.group_by, _marker(number)),
        group_key_columns=(*branch.group_key_columns, BRANCH_COLUMN),
    )


def _shared_hidden_columns(branches: Sequence[ViewDefinition]) -> list[HiddenColumn]:
    """Every branch's hidden columns, in branch order, one column per name: two branches share a
    name only for an aggregate helper of the same purpose (each row holds its own branch's)."""
    columns: dict[str, HiddenColumn] = {}
    for number, branch in enumerate(branches, start=1):
        for column in branch.hidden_columns:
            first = columns.get(column.name.casefold())
            if first is None:
                columns[column.name.casefold()] = column
            elif first.purpose is not column.purpose or column.purpose is HiddenPurpose.ROW_KEY:
                raise UnsupportedViewError(
                    column.name,
                    f"UNION ALL branch {number} needs a hidden column of this name for another purpose than an "
                    "earlier branch",
                    "Rename the table aliases of one of the branches",
                )
    return list(columns.values())
