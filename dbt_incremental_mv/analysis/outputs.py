"""The view's visible columns: names checked, aggregates classified, group keys found."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from sqlglot import exp

from dbt_incremental_mv.analysis import functions
from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.hidden import ROW_COUNT_COLUMN
from dbt_incremental_mv.analysis.model import OutputColumn, OutputKind
from dbt_incremental_mv.analysis.resolved import Projection

RESERVED_PREFIX = "_mv_"

_KINDS: dict[type[exp.Expr], OutputKind] = {
    exp.Sum: OutputKind.SUM,
    exp.Avg: OutputKind.AVG,
    exp.Min: OutputKind.MIN,
    exp.Max: OutputKind.MAX,
}


@dataclass(frozen=True)
class ClassifiedOutputs:
    outputs: tuple[OutputColumn, ...]
    group_key_columns: tuple[str, ...]
    group_by: tuple[exp.Expr, ...] = ()  # the GROUP BY, with the constants selected (see below)


def refuse_bad_output_names(names: Iterable[str]) -> None:
    """Stored column names must be distinct (case-insensitively, as in Spark) and leave the
    ``_mv_`` prefix to the plugin's hidden columns."""
    seen: set[str] = set()
    for name in names:
        if name.casefold().startswith(RESERVED_PREFIX):
            raise UnsupportedViewError(
                name,
                f"column names starting with {RESERVED_PREFIX} are reserved for the plugin's hidden columns",
                "Rename the column with AS",
            )
        if name.casefold() in seen:
            raise UnsupportedViewError(
                name, "more than one output column has this name", "Give each output column a distinct name with AS"
            )
        seen.add(name.casefold())


def classify_outputs(
    projections: tuple[Projection, ...], group_by: tuple[exp.Expr, ...], is_aggregate: bool
) -> ClassifiedOutputs:
    if not is_aggregate:
        return ClassifiedOutputs(tuple(OutputColumn(p.name, p.expression) for p in projections), (), group_by)
    # A constant selected next to a GROUP BY (``'web' as channel``, a UNION ALL branch's label) is
    # one more group key: grouping by it changes no group, and it is stored and matched like one.
    # Next to a global aggregate (``'all orders' as scope``) it is a plain column of its one row.
    constant = [_is_constant(p.expression) for p in projections]
    outputs: list[OutputColumn | None] = [
        (OutputColumn(p.name, _constant_key(p.expression)) if group_by else OutputColumn(p.name, p.expression.copy()))
        if is_constant
        else _aggregate_view_output(p, group_by)
        for p, is_constant in zip(projections, constant)
    ]
    if group_by:
        group_by = (*group_by, *(o.expression for o, is_constant in zip(outputs, constant) if o and is_constant))
    known = [o for o in outputs if o is not None]
    keys = _group_key_columns(tuple(known), group_by)
    # expressions over aggregates, once the group keys they may read are named
    hidden: list[OutputColumn] = []
    derived = _Derived(
        tuple((e, next(o.name for o in known if o.name in keys and o.expression == e)) for e in group_by)
    )
    for index, projection in enumerate(projections):
        if outputs[index] is None:
            outputs[index] = derived.output(projection, known, hidden)
    return ClassifiedOutputs((*(o for o in outputs if o is not None), *hidden), keys, group_by)


def _is_constant(expression: exp.Expr) -> bool:
    """Reads no column and aggregates nothing (the construct checks refused what is not deterministic)."""
    return expression.find(exp.Column) is None and not functions.contains_aggregate(expression)


def _constant_key(expression: exp.Expr) -> exp.Expr:
    """The constant as a GROUP BY expression: an integer literal cast to int (a bare ``GROUP BY 2``
    would name the second column, and Spark reads ``-1`` as a position too; the type is the
    literal's own)."""
    expression = _strip_parentheses(expression)
    literal = _strip_parentheses(expression.this) if isinstance(expression, exp.Neg) else expression
    if isinstance(literal, exp.Literal) and not literal.is_string and literal.is_int:
        value = int(literal.this) * (-1 if literal is not expression else 1)
        if -(2**31) <= value < 2**31:
            return exp.Cast(this=expression.copy(), to=exp.DataType.build("int"))
    return expression.copy()


def _aggregate_view_output(projection: Projection, group_by: tuple[exp.Expr, ...]) -> OutputColumn | None:
    """The output of one projection of an aggregate view; None for an expression over
    aggregates or over group keys (``md5(k)`` grouped by ``k``: ``_Derived``, once the group
    keys are known; it refuses a column neither aggregated nor grouped by)."""
    expression = _strip_parentheses(projection.expression)
    if functions.is_maintainable_aggregate(expression):
        return _aggregate_output(projection.name, expression)
    if functions.contains_aggregate(expression):
        return None
    if expression in group_by:
        return OutputColumn(projection.name, expression)
    if isinstance(expression, exp.Column) or not group_by:
        raise UnsupportedViewError(
            _shown(projection),
            "a column that is neither aggregated nor in GROUP BY",
            "Add the expression to GROUP BY, or aggregate it",
        )
    return None


def _aggregate_output(name: str, call: exp.Expr, hidden: bool = False) -> OutputColumn:
    if functions.is_recomputed_aggregate(call):
        return OutputColumn(name, call, OutputKind.RECOMPUTED, hidden=hidden)
    if isinstance(call, exp.Count):
        argument = call.this
        if isinstance(argument, exp.Star) or _is_non_null_constant(argument):
            return OutputColumn(name, exp.Count(this=exp.Star(), big_int=True), OutputKind.COUNT_STAR, hidden=hidden)
        return OutputColumn(name, call, OutputKind.COUNT, argument, hidden=hidden)
    return OutputColumn(name, call, _KINDS[type(call)], call.this, hidden=hidden)


def over_stored_columns(
    expression: exp.Expr,
    keys: tuple[tuple[exp.Expr, str], ...],
    known: list[OutputColumn],
    hidden: list[OutputColumn],
    owner: str,
    reader: str,
) -> exp.Expr:
    """``expression`` (a SELECT expression over aggregates, a HAVING condition) over the stored
    column names: each GROUP BY expression (``keys``: to the output holding it) and each aggregate
    replaced by the column holding it. An aggregate no output computes becomes a hidden output,
    ``_mv_a<n>_<owner>``, appended to ``known`` and ``hidden``; COUNT(*) is the view's own
    ``_mv_count``. Refuses an aggregate the view cannot maintain, and a column neither grouped by
    nor aggregated, each message saying who reads it (``reader``)."""

    def stored(node: exp.Expr) -> exp.Expr:
        bare = _strip_parentheses(node)
        for key, name in keys:
            if bare == key:
                return exp.column(name, quoted=True)
        if not functions.is_aggregate(bare):
            return node
        if not functions.is_maintainable_aggregate(bare) or functions.contains_aggregate(bare.this):
            raise UnsupportedViewError(
                describe(bare),
                f"{reader} reads an aggregate the view cannot maintain",
                "Use an aggregate the supported SQL page lists (COUNT, SUM, AVG, MIN, MAX, COUNT(DISTINCT), "
                "PERCENTILE, STDDEV, ...), or compute this column in a downstream model",
            )
        made = sum(1 for o in known if o.hidden and re.fullmatch(rf"_mv_a\d+_{re.escape(owner)}", o.name))
        candidate = _aggregate_output(f"_mv_a{made + 1}_{owner}", bare, hidden=True)
        for output in known:
            if output.kind is candidate.kind and output.expression == candidate.expression:
                return exp.column(output.name, quoted=True)
        if candidate.kind is OutputKind.COUNT_STAR:
            return exp.column(ROW_COUNT_COLUMN, quoted=True)
        known.append(candidate)
        hidden.append(candidate)
        return exp.column(candidate.name, quoted=True)

    rewritten = expression.copy().transform(stored)
    for column in rewritten.find_all(exp.Column):
        if column.table:
            raise UnsupportedViewError(
                describe(column),
                f"{reader} reads a column that is neither aggregated nor in GROUP BY",
                "Group by it, or aggregate it" + (", or filter it in WHERE" if reader == "HAVING" else ""),
            )
    return rewritten


@dataclass(frozen=True)
class _Derived:
    """Expressions over a group's aggregates and keys (``ROUND(SUM(x), 2)``, ``COALESCE(MAX(d),
    k)``, ``SUM(a) / COUNT(*)``): each aggregate is maintained as a column of its own (the
    selected output computing the same call, or a hidden one), and the expression is recomputed
    from the stored values, with Spark's own functions and types, whenever its group changes."""

    keys: tuple[tuple[exp.Expr, str], ...]  # GROUP BY expression -> the output holding it

    def output(self, projection: Projection, known: list[OutputColumn], hidden: list[OutputColumn]) -> OutputColumn:
        expression = _strip_parentheses(projection.expression)
        stored = over_stored_columns(
            expression, self.keys, known, hidden, projection.name, reader=f"column {projection.name}"
        )
        return OutputColumn(projection.name, expression.copy(), OutputKind.DERIVED, stored=stored)


def _is_non_null_constant(node: exp.Expr | None) -> bool:
    """COUNT(1), COUNT('x'): counts every row, exactly like COUNT(*)."""
    return isinstance(node, (exp.Literal, exp.Boolean))


def _group_key_columns(outputs: tuple[OutputColumn, ...], group_by: tuple[exp.Expr, ...]) -> tuple[str, ...]:
    names: list[str] = []
    for expression in group_by:
        holders = [o for o in outputs if not o.is_aggregate and o.expression == expression]
        if not holders:
            raise UnsupportedViewError(
                describe(expression),
                "every GROUP BY expression must also be selected: groups are matched by the stored group-by values",
                f"Add it to the SELECT list, e.g. {describe(expression)} AS <name>",
            )
        # every output of the expression is a group key (one expression selected under two names,
        # or the same constant twice): each stored column gets its group's value
        names.extend(holder.name for holder in holders if holder.name not in names)
    return tuple(names)


def _strip_parentheses(expression: exp.Expr) -> exp.Expr:
    while isinstance(expression, exp.Paren):
        expression = expression.this
    return expression


def _shown(projection: Projection) -> str:
    written = projection.written
    if isinstance(written, exp.Alias):
        written = written.this
    return describe(written if not isinstance(written, (exp.Column, exp.Star)) else projection.expression)
