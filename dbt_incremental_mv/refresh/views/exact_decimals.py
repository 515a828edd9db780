"""Sums and averages of decimals maintained as Spark's SUM and AVG compute them.

Spark types decimal arithmetic so that a result fits 38 digits by dropping scale (``DecimalPrecision``
with ``spark.sql.decimalOperations.allowPrecisionLoss``, its default): adding two ``decimal(38, 8)``
values gives a ``decimal(38, 7)``, and dividing a ``decimal(38, 18)`` sum by a count a
``decimal(38, 18)`` quotient. SUM and AVG drop nothing: SUM of a ``decimal(p, s)`` is a
``decimal(min(p + 10, 38), s)``, AVG divides its sum by its count and rounds once, half up, to
``decimal(p + 4, s + 4)``. So a refresh that adds a delta to a stored sum, or divides a sum by a
count, writes its operands in types narrow enough that Spark drops nothing:

- **A sum.** A stored ``decimal(38, s)`` sum adds the delta to it as two ``decimal(37, s)`` values,
  whose sum fits ``decimal(38, s)`` exactly. A value that does not fit 37 digits (``try_cast`` gives
  NULL), a stored sum that is NULL beside values (it overflowed: ANSI off, SUM is NULL then, and a
  delta added to that NULL is not the sum when it comes back into range) and a delta whose own sum
  overflowed make the group recomputed from the masters instead.
- **An average.** Spark divides a ``decimal(P, s)`` sum by a count (a ``decimal(20, 0)``) at scale
  ``r = max(38 - (P - s), 6)`` (``s + 21`` when that fits 38 digits). Rounding that quotient again
  to the AVG's scale ``t`` equals AVG's one rounding whenever the count is below ``10^(r - t)``: a
  quotient of a count below that cannot lie closer to a rounding boundary than the ``r - t`` digits
  beyond it (and where ``r = t`` it rounds once, as AVG does). Where ``r = t`` or ``r - t >= 12``
  (a sum of a ``decimal(10, 2)``: 14) the sum is divided so.
  Otherwise the quotient of a sum ``decimal(37 - k, s)`` by a count ``decimal(k, 0)`` has
  scale ``s + k + 1`` with nothing dropped (38 digits). Rounded to the AVG's scale ``s + 4`` it
  equals AVG's one rounding whenever the count is below ``10^(k - 3)`` (a quotient of a count below
  that cannot lie closer to a rounding boundary than the ``k - 3`` digits beyond the AVG's scale: the
  two roundings agree). The first of k = 6, 9, 12, 15, 18 whose bounds the group's sum and count
  meet computes it; a group that meets none is recomputed from the masters.

A sum or average of any other type (integral, floating point, a decimal sum of fewer than 38
digits) is computed as before: the stored value plus the delta, the sum over the count.
"""

from __future__ import annotations

import re

DECIMAL = re.compile(r"^\s*decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)\s*$", re.IGNORECASE)
RUNGS = (6, 9, 12, 15, 18)  # the digits of the count's decimal type, tried in turn (see above)


def decimal_type(spark_type: str | None) -> tuple[int, int] | None:
    """(precision, scale) of a ``decimal(p, s)`` type name, else None."""
    found = DECIMAL.match(spark_type or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def wide_sum(stored_type: str | None) -> tuple[int, int] | None:
    """(precision, scale) of a stored sum that Spark's addition could round or overflow: a
    ``decimal(38, s)``; None for any other type."""
    typed = decimal_type(stored_type)
    return typed if typed is not None and typed[0] >= 38 else None


def sum_of(old: str, delta: str, stored_type: str | None) -> str:
    """``old + delta`` (either NULL counting as 0) in the stored sum's type, nothing dropped: NULL
    for a wide sum whose operand does not fit 37 digits (sum_guards recomputes that group)."""
    wide = wide_sum(stored_type)
    if wide is None:
        return f"coalesce({old}, 0) + coalesce({delta}, 0)"
    narrow = f"decimal(37,{wide[1]})"
    return f"try_cast(coalesce({old}, 0) as {narrow}) + try_cast(coalesce({delta}, 0) as {narrow})"


def sum_guards(old: str, old_count: str, delta: str, delta_values: str, stored_type: str | None) -> list[str]:
    """When a wide sum's group is recomputed (see the module): ``old``/``old_count`` the stored sum
    and its count of values, ``delta`` the delta's sum and ``delta_values`` how many values it adds
    up (any sign). Nothing for a sum of another type."""
    wide = wide_sum(stored_type)
    if wide is None:
        return []
    narrow = f"decimal(37,{wide[1]})"
    return [
        f"({old} is null and coalesce({old_count}, 0) > 0)",
        f"({delta} is null and coalesce({delta_values}, 0) > 0)",
        f"(try_cast({old} as {narrow}) is null and {old} is not null)",
        f"(try_cast({delta} as {narrow}) is null and {delta} is not null)",
    ]


def _rungs(total: str, count: str, sum_scale: int, average_type: str) -> list[tuple[str, str]]:
    """(condition, quotient) of each rung an average of a decimal sum of scale ``sum_scale`` can use."""
    rungs = []
    for digits in RUNGS:
        if 37 - digits - sum_scale < 1:
            break
        narrow = f"decimal({37 - digits},{sum_scale})"
        condition = f"{count} < {10 ** (digits - 3)} and try_cast({total} as {narrow}) is not null"
        quotient = f"cast(try_cast({total} as {narrow}) / cast({count} as decimal({digits},0)) as {average_type})"
        rungs.append((condition, quotient))
    return rungs


PLAIN_DIGITS = 12  # digits beyond the AVG's scale that make Spark's own division exact (see above)


def _plain_division_exact(total: tuple[int, int], average: tuple[int, int]) -> bool:
    """Whether the sum (precision, scale) divided by a count as Spark divides decimals, then rounded
    to the average's scale, is AVG's value for any group of fewer than 10^PLAIN_DIGITS values."""
    precision, scale = total
    digits = precision - scale + scale + 21  # the quotient's precision before Spark bounds it
    quotient_scale = scale + 21 if digits <= 38 else max(38 - (precision - scale), 6)
    # (at the AVG's own scale, Spark rounds the quotient exactly as AVG does: once)
    return quotient_scale == average[1] or quotient_scale - average[1] >= PLAIN_DIGITS


def _laddered(total_type: str | None, average_type: str | None) -> tuple[int, int] | None:
    """(precision, scale) of a decimal sum whose average takes the rungs, else None."""
    summed, average = decimal_type(total_type), decimal_type(average_type)
    if summed is None or average is None or _plain_division_exact(summed, average):
        return None
    return summed


def average_of(total: str, count: str, total_type: str | None, average_type: str | None) -> str:
    """AVG as Spark computes it from the group's sum ``total`` (stored as ``total_type``) and count
    of values ``count``: NULL for no values; a decimal's rounded once to ``average_type`` (NULL when
    no rung applies: average_guard recomputes that group); any other, the sum over the count."""
    summed = _laddered(total_type, average_type)
    if summed is None:
        typed = f"cast(({total}) as {total_type})" if total_type else f"({total})"
        return f"case when {count} = 0 then null else {typed} / ({count}) end"
    assert average_type is not None
    rungs = "".join(
        f" when {condition} then {quotient}" for condition, quotient in _rungs(total, count, summed[1], average_type)
    )
    return f"case when {count} = 0 then null{rungs} end"


def average_guard(total: str, count: str, total_type: str | None, average_type: str | None) -> str | None:
    """When an average's group is recomputed: it has values and no rung applies (see the module);
    None for an average that average_of always computes."""
    summed = _laddered(total_type, average_type)
    if summed is None:
        return None
    assert average_type is not None
    met = " or ".join(f"({condition})" for condition, _ in _rungs(total, count, summed[1], average_type)) or "false"
    return f"(coalesce({count}, 0) > 0 and not coalesce({met}, false))"
