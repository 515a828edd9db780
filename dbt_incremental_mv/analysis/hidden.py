"""The hidden columns the plugin stores next to the view's own columns, and their names.

Join views (inner or outer) store every occurrence's key, named ``_mv_{alias}_{column}``: the
DEL step of a refresh finds the view rows a changed master row produced by these columns (for a
null-supplying occurrence they are NULL on null-extended rows). Should two of those names
collide (alias ``a_b`` with column ``c`` and alias ``a`` with column ``b_c`` both give
``_mv_a_b_c``, also compared case-insensitively), every key column is named
``_mv_{len(alias)}_{alias}_{column}`` instead, which cannot collide: the length says where the
alias ends.

Aggregate views store ``_mv_count`` = COUNT(*) (a group disappears at zero); for each SUM(x)
and AVG(x) output ``_mv_cnt_{output}`` = COUNT(x) (a sum over only NULLs is NULL, not 0); and for
each AVG(x) output ``_mv_sum_{output}`` = SUM(x), of an integral x SUM(CAST(x AS DOUBLE)), as AVG
adds x up (analysis/summands.py; the average is recomputed as AVG computes it, sum / count); for each MIN(x) and MAX(x) output ``_mv_cnt_{output}`` = COUNT(x) and ``_mv_top_{output}``,
its reserve: the RESERVE most extreme distinct values of x with their counts (a refresh that
deletes the extreme takes the next one from it). Two outputs needing the same helper share one
column, named after the first of them. Output names cannot start with ``_mv_`` and are unique,
so none of these names can collide. (A UNION ALL's aggregate branch n names its own columns
``_mv_b{n}_{column}``, and their helpers ``_mv_cnt_b{n}_{column}``, ...: analysis/union.py.)
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from dbt_incremental_mv.analysis.model import HiddenColumn, HiddenPurpose, MasterOccurrence, OutputColumn, OutputKind
from dbt_incremental_mv.analysis.resolved import column_node, unparenthesized

ROW_COUNT_COLUMN = "_mv_count"
RESERVE = 4  # values a MIN/MAX reserve keeps per group


def key_column_name(alias: str, column: str, *, length_prefixed: bool = False) -> str:
    if length_prefixed:
        return f"_mv_{len(alias)}_{alias}_{column}"
    return f"_mv_{alias}_{column}"


def key_hidden_columns(occurrences: tuple[MasterOccurrence, ...]) -> tuple[HiddenColumn, ...]:
    """Each occurrence's key columns, in occurrence then key order."""
    keys = [(o.alias, o.master.find_column(k) or k) for o in occurrences for k in o.master.key]
    simple_names = [key_column_name(alias, column).casefold() for alias, column in keys]
    length_prefixed = len(set(simple_names)) < len(simple_names)
    return tuple(
        HiddenColumn(
            name=key_column_name(alias, column, length_prefixed=length_prefixed),
            expression=column_node(alias, column),
            purpose=HiddenPurpose.ROW_KEY,
            occurrence=alias,
            source_column=column,
        )
        for alias, column in keys
    )


def aggregate_hidden_columns(
    outputs: tuple[OutputColumn, ...],
    grouped: bool = True,
    summands: Mapping[str, exp.Expr] | None = None,
) -> tuple[HiddenColumn, ...]:
    """``_mv_count``, then per SUM/AVG/MIN/MAX output (in output order) its COUNT(x) and, for AVG,
    the SUM of its summand (``summands``, by output: what AVG adds up, analysis/summands.py; x when
    not given), for MIN/MAX of a GROUP BY (``grouped``) its reserve. (A global aggregate's reserve
    would rank all its rows in one task: its MIN/MAX is recomputed when its extreme goes.)"""
    columns: list[HiddenColumn] = [
        HiddenColumn(ROW_COUNT_COLUMN, exp.Count(this=exp.Star(), big_int=True), HiddenPurpose.ROW_COUNT)
    ]
    for output in outputs:
        if output.kind not in (OutputKind.SUM, OutputKind.AVG, OutputKind.MIN, OutputKind.MAX):
            continue
        assert output.argument is not None
        needed: list[tuple[HiddenPurpose, exp.Expr, str]] = [
            (HiddenPurpose.NONNULL_COUNT, exp.Count(this=output.argument.copy(), big_int=True), "cnt")
        ]
        if output.kind is OutputKind.AVG:
            summand = (summands or {}).get(output.name, output.argument)
            needed.append((HiddenPurpose.SUM, exp.Sum(this=summand.copy()), "sum"))
        for purpose, expression, tag in needed:
            candidate = HiddenColumn(helper_name(tag, output.name), expression, purpose, outputs=(output.name,))
            _add_or_share(columns, candidate)
        if output.kind in (OutputKind.MIN, OutputKind.MAX) and grouped:
            columns.append(
                HiddenColumn(
                    helper_name("top", output.name),
                    output.argument.copy(),
                    HiddenPurpose.RESERVE,
                    outputs=(output.name,),
                )
            )
    return tuple(columns)


def helper_name(tag: str, output: str) -> str:
    """``_mv_{tag}_{output}``; of a UNION ALL aggregate branch's own column ``_mv_b{n}_{column}``
    (analysis/union.py), ``_mv_{tag}_b{n}_{column}``."""
    return f"_mv_{tag}_{output[len('_mv_') :] if output.startswith('_mv_') else output}"


def _add_or_share(columns: list[HiddenColumn], candidate: HiddenColumn) -> None:
    for index, existing in enumerate(columns):
        if existing.purpose is candidate.purpose and existing.expression == candidate.expression:
            columns[index] = HiddenColumn(
                existing.name, existing.expression, existing.purpose, outputs=existing.outputs + candidate.outputs
            )
            return
    columns.append(candidate)


def holders(
    expressions: tuple[exp.Expr, ...],
    outputs: tuple[OutputColumn, ...],
    hidden: list[HiddenColumn],
    prefix: str,
    purpose: HiddenPurpose,
) -> tuple[str, ...]:
    """The stored column holding each of ``expressions`` (a window's partition or ORDER BY
    expressions): a visible output equal to it, else one of ``hidden``, else a new hidden column
    ``<prefix><position>`` of ``purpose``, appended to ``hidden``."""
    columns = []
    for index, expression in enumerate(expressions, start=1):
        holder = next((o.name for o in outputs if not o.hidden and unparenthesized(o.expression) == expression), None)
        holder = holder or next((h.name for h in hidden if h.expression == expression), None)
        if holder is None:
            holder = f"{prefix}{index}"
            hidden.append(HiddenColumn(holder, expression.copy(), purpose))
        columns.append(holder)
    return tuple(columns)
