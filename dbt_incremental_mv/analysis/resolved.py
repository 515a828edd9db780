"""What name resolution (resolver.py) makes of a query: its projections, its FROM items as
occurrences of master tables, its joins and conditions, every column as ``<alias>.<column>``."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dbt_incremental_mv.analysis import functions
from dbt_incremental_mv.analysis.model import JoinKind, MasterTable


def column_node(alias: str, column: str) -> exp.Column:
    """``alias.column`` with both identifiers quoted (the canonical form of every column)."""
    return exp.Column(this=exp.to_identifier(column, quoted=True), table=exp.to_identifier(alias, quoted=True))


def split_conjuncts(condition: exp.Expr | None) -> list[exp.Expr]:
    """``a AND (b AND c)`` as [a, b, c]; parentheses around a whole conjunct are dropped (the
    renderer puts them back where an OR needs them)."""
    if condition is None:
        return []
    node = condition
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return split_conjuncts(node.this) + split_conjuncts(node.expression)
    return [node]


def unparenthesized(expression: exp.Expr) -> exp.Expr:
    """Parentheses around a whole SELECT item or GROUP BY item mean nothing: drop them so
    ``(a + b)`` and ``a + b`` compare equal."""
    while isinstance(expression, exp.Paren):
        expression = expression.this
    return expression


@dataclass(frozen=True)
class Projection:
    """One SELECT-list item after resolution; ``written`` is the item as the user wrote it."""

    name: str
    expression: exp.Expr
    written: exp.Expr


@dataclass(frozen=True)
class OccurrenceSource:
    """A master occurrence and the filters its CTE/derived table applied to it (already over
    ``alias``)."""

    alias: str
    master: MasterTable
    filters: tuple[exp.Expr, ...]


@dataclass(frozen=True)
class RawJoin:
    """A join as written: its kind and its ON conjuncts, resolved."""

    alias: str
    kind: JoinKind
    conjuncts: tuple[exp.Expr, ...]
    written: exp.Join


@dataclass(frozen=True)
class ResolvedQuery:
    """The whole query over master occurrences, before join normalization and classification.

    ``group_by`` is None when the query has no GROUP BY (it can still be a global aggregate).
    """

    occurrences: tuple[OccurrenceSource, ...]
    joins: tuple[RawJoin, ...]
    where: tuple[exp.Expr, ...]
    projections: tuple[Projection, ...]
    group_by: tuple[exp.Expr, ...] | None

    @property
    def is_aggregate(self) -> bool:
        return self.group_by is not None or any(functions.contains_aggregate(p.expression) for p in self.projections)
