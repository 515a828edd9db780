"""What the hidden sum of an ``AVG(x)`` adds up: ``x`` as Spark's ``AVG`` adds it up.

Spark's ``AVG`` keeps a sum and a count: for a decimal ``x`` a ``decimal(p + 10, s)`` sum (what
``SUM(x)`` is), for any other ``x`` a ``double`` sum. A view's hidden sum is ``SUM(x)`` but for an
integral ``x``, where it is ``SUM(CAST(x AS DOUBLE))``: ``SUM`` of a ``BIGINT`` is a ``BIGINT``,
which wraps (ANSI off) or fails (ANSI on) where ``AVG``'s double sum does not.

Whether ``x`` is integral is read from the masters' column types through sqlglot's type
annotation (the class of type only: integral or not). An expression it cannot type keeps
``SUM(x)``, as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.schema import MappingSchema

from dbt_incremental_mv.analysis.model import MasterOccurrence, OutputColumn, OutputKind
from dbt_incremental_mv.analysis.parse import DIALECT


def average_summands(outputs: Sequence[OutputColumn], occurrences: Sequence[MasterOccurrence]) -> dict[str, exp.Expr]:
    """For each AVG output (by name), what its hidden sum adds up."""
    averages = [o for o in outputs if o.kind is OutputKind.AVG and o.argument is not None]
    if not averages:
        return {}
    tables: dict[str, object] = {f"_mv_t{i}": dict(o.master.columns) for i, o in enumerate(occurrences)}
    schema = MappingSchema(tables, dialect=DIALECT)
    summands = {}
    for output in averages:
        assert output.argument is not None
        argument = output.argument.copy()
        summands[output.name] = (
            exp.Cast(this=argument, to=exp.DataType.build("double"))
            if _integral(argument, occurrences, schema)
            else argument
        )
    return summands


def _integral(argument: exp.Expr, occurrences: Sequence[MasterOccurrence], schema: MappingSchema) -> bool:
    query = exp.select(argument.copy()).from_(exp.to_table("_mv_t0").as_(occurrences[0].alias, quoted=True))
    for index, occurrence in enumerate(occurrences[1:], start=1):
        query = query.join(exp.to_table(f"_mv_t{index}").as_(occurrence.alias, quoted=True))
    try:
        typed = annotate_types(query, schema=schema, dialect=DIALECT).selects[0].type
    except SqlglotError:
        return False
    return typed is not None and typed.is_type(*exp.DataType.INTEGER_TYPES)
