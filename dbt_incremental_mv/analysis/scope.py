"""The scope of one SELECT: the FROM items a column reference can name, and what each
reference means (an expression over master-table occurrences), as Spark resolves names."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlglot import exp

from dbt_incremental_mv.analysis import functions
from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.resolved import split_conjuncts


@dataclass(frozen=True)
class ScopeEntry:
    """A FROM item as column references see it: the names that qualify it and its columns."""

    label: str
    qualifiers: frozenset[tuple[str, ...]]
    columns: tuple[tuple[str, exp.Expr], ...]
    # columns a JOIN ... USING merged into an earlier FROM item's: an unqualified reference means
    # that item's column (Spark's semantics for inner and LEFT joins), a qualified one still this one
    merged: frozenset[str] = frozenset()

    def unqualified(self, name: str) -> tuple[str, exp.Expr] | None:
        """The column an unqualified reference ``name`` means here (None when a USING merged it away)."""
        return None if name.casefold() in self.merged else self.lookup(name)

    def lookup(self, name: str) -> tuple[str, exp.Expr] | None:
        wanted = name.casefold()
        for column, expression in self.columns:
            if column.casefold() == wanted:
                return column, expression
        return None


_ATOMIC = (exp.Column, exp.Literal, exp.Null, exp.Boolean, exp.Paren, exp.Bracket, exp.Dot)


_OPERATOR_PARENTS = (exp.Binary, exp.Unary, exp.Predicate, exp.Bracket, exp.Interval)


def _is_atomic(node: exp.Expr) -> bool:
    if isinstance(node, _ATOMIC):
        return True
    return isinstance(node, exp.Func) and not isinstance(node, (exp.Binary, exp.Predicate, exp.Unary))


def _fit_into(position: exp.Expr, replacement: exp.Expr) -> exp.Expr:
    """``replacement`` ready to stand where ``position`` stood: sqlglot prints trees as they are,
    so an operator substituted under another operator needs explicit parentheses."""
    parent = position.parent
    if _is_atomic(replacement) or isinstance(parent, exp.Paren) or not isinstance(parent, _OPERATOR_PARENTS):
        return replacement
    return exp.Paren(this=replacement)


class Scope:
    """The FROM items visible to an expression, and resolution of column references."""

    def __init__(self, entries: Iterable[ScopeEntry]) -> None:
        self.entries = tuple(entries)

    def entry_for(self, qualifier: tuple[str, ...]) -> ScopeEntry | None:
        for entry in self.entries:
            if qualifier in entry.qualifiers:
                return entry
        return None

    def reference(self, column: exp.Column) -> tuple[str, exp.Expr] | None:
        """(output name, expression) for a column reference, or None when no FROM item has it.

        ``a.b.c`` may be column ``c`` of table ``a.b`` or field ``c`` of struct column ``b`` of
        ``a``; as in Spark, the longest qualifier that names a FROM item wins. The output name
        is the last name as written (Spark names ``select ID`` ``ID`` even for column ``id``).
        """
        parts = [p.name for p in column.parts]
        lowered = [p.casefold() for p in parts]
        for width in range(len(parts) - 1, -1, -1):
            qualifier, name, fields = tuple(lowered[:width]), parts[width], parts[width + 1 :]
            found = self._find(qualifier, name, column)
            if found is not None:
                expression = found[1].copy()
                for field_name in fields:
                    expression = exp.Dot(this=expression, expression=exp.to_identifier(field_name, quoted=True))
                return (fields[-1] if fields else name), expression
        return None

    def _find(self, qualifier: tuple[str, ...], name: str, column: exp.Column) -> tuple[str, exp.Expr] | None:
        if qualifier:
            entry = self.entry_for(qualifier)
            if entry is None:
                return None
            found = entry.lookup(name)
            if found is None:
                raise UnsupportedViewError(
                    describe(column),
                    f"{entry.label} has no column {name}",
                    f"Check the column name; {entry.label} has: {', '.join(c for c, _ in entry.columns)}",
                )
            return found
        matches = [(entry, found) for entry in self.entries if (found := entry.unqualified(name)) is not None]
        if len(matches) > 1:
            raise UnsupportedViewError(
                name,
                f"ambiguous column: it exists in {', '.join(e.label for e, _ in matches)}",
                f"Qualify it, e.g. {matches[0][0].label}.{name}",
            )
        return matches[0][1] if matches else None

    def resolve_column(self, column: exp.Column) -> tuple[str, exp.Expr]:
        if isinstance(column.this, exp.Star):
            raise UnsupportedViewError(describe(column), "a star is only allowed as a SELECT item", "List the columns")
        found = self.reference(column)
        if found is not None:
            return found
        name = column.name
        if len(column.parts) == 1 and name.casefold() in functions.NONDETERMINISTIC_BARE_WORDS:
            raise UnsupportedViewError(
                name,
                "non-deterministic functions are not supported: the stored rows could not be "
                "recomputed to the same values on refresh",
                "Compute the value in a separate model, or store it in the master table",
            )
        qualifier = tuple(p.name.casefold() for p in column.parts[:-1])
        if qualifier and not any(self.entry_for(qualifier[:w]) for w in range(1, len(qualifier) + 1)):
            raise UnsupportedViewError(
                describe(column),
                f"no table or alias named {'.'.join(qualifier)} in FROM",
                f"Use one of: {', '.join(e.label for e in self.entries)}",
            )
        raise UnsupportedViewError(
            describe(column), "unknown column", "Check the column name against the tables in FROM"
        )

    def resolve(self, expression: exp.Expr) -> exp.Expr:
        """A copy of ``expression`` with every column reference replaced by its resolution."""

        def substitute(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Column):
                return _fit_into(node, self.resolve_column(node)[1])
            return node

        return expression.transform(substitute)

    def resolve_conjuncts(self, condition: exp.Expr | None) -> tuple[exp.Expr, ...]:
        """The resolved conjuncts of a condition, without literal TRUEs (sqlglot writes
        ``ON TRUE`` for a join written without ON)."""
        resolved = (c for written in split_conjuncts(condition) for c in split_conjuncts(self.resolve(written)))
        return tuple(c for c in resolved if not (isinstance(c, exp.Boolean) and c.this is True))
