"""The columns of an aggregate view's delta (refresh/views/aggregate_view.py): the signed rows'
sign, the aggregated arguments each projected once, the per-group delta columns, and the hidden
counts and sums that the stored outputs are maintained from."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from dbt_incremental_mv.analysis import OutputKind, ViewDefinition
from dbt_incremental_mv.analysis.model import HiddenPurpose
from dbt_incremental_mv.sql_text import ident

SIGN = "_mv_sign"
RECOMPUTED = "_mv_recomputed"
RECOMPUTED_PREFIX = "_mv_r_"  # the recomputed value of a column, in the rows the writes read
STORED = "`_mv_t`"  # in the cached delta: the group's stored row, a struct of the view's columns


class Arguments:
    """The aggregated expressions of the view, each projected once by the delta terms."""

    def __init__(self, view: ViewDefinition) -> None:
        self.expressions: list[exp.Expr] = []
        self.by_column: dict[str, int] = {}
        for output in view.outputs:
            if output.argument is not None:
                self.by_column[output.name] = self._index(output.argument)
        for hidden in view.hidden_columns:
            if hidden.purpose not in (HiddenPurpose.ROW_COUNT, HiddenPurpose.RESERVE):  # (a reserve's: its output's)
                self.by_column[hidden.name] = self._index(hidden.expression.this)

    def _index(self, expression: exp.Expr) -> int:
        for index, known in enumerate(self.expressions):
            if known == expression:
                return index
        self.expressions.append(expression)
        return len(self.expressions) - 1

    @staticmethod
    def name(index: int) -> str:
        return f"_mv_x{index}"


def delta_name(column: str, tag: str) -> str:
    return f"_mv_d{tag}_{column}"


def counted_columns(view: ViewDefinition) -> list[str]:
    """COUNT(x) outputs and hidden non-NULL counts: maintained by adding the delta count."""
    names = [o.name for o in view.outputs if o.kind is OutputKind.COUNT]
    return names + [h.name for h in view.hidden_columns if h.purpose is HiddenPurpose.NONNULL_COUNT]


def summed_columns(view: ViewDefinition) -> list[str]:
    """SUM(x) outputs and hidden sums (for AVG): maintained by adding the delta sum."""
    names = [o.name for o in view.outputs if o.kind is OutputKind.SUM]
    return names + [h.name for h in view.hidden_columns if h.purpose is HiddenPurpose.SUM]


def nonnull_count_of(view: ViewDefinition, column: str) -> str:
    """The hidden COUNT(x) column serving the SUM/AVG output (or hidden sum) ``column``."""
    served = view.output(column).name if column in {o.name for o in view.outputs} else None
    for hidden in view.hidden_columns:
        if hidden.purpose is not HiddenPurpose.NONNULL_COUNT:
            continue
        if served is not None and served in hidden.outputs:
            return hidden.name
    # a hidden SUM column: the count serving the same outputs
    sum_column = next(h for h in view.hidden_columns if h.name == column)
    return next(
        h.name
        for h in view.hidden_columns
        if h.purpose is HiddenPurpose.NONNULL_COUNT and set(sum_column.outputs) & set(h.outputs)
    )


def group_match(left: str, right: str, columns: Sequence[str]) -> str:
    if not columns:
        return "true"
    return " and ".join(f"{left}.{ident(c)} <=> {right}.{ident(c)}" for c in columns)
