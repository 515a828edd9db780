"""Sums and averages of decimals as Spark's SUM and AVG compute them (refresh/views/exact_decimals.py),
without Spark: which types take the narrow forms, and the forms. (Checked on Spark against SUM and AVG
by tests/functional/test_recomputed_types.py.)"""

from dbt_incremental_mv.refresh.views.exact_decimals import (
    average_guard, average_of, decimal_type, sum_guards, sum_of, wide_sum,
)


def test_decimal_types_are_read_from_spark_type_names():
    assert decimal_type("decimal(38,18)") == (38, 18)
    assert decimal_type("DECIMAL( 20 , 2 )") == (20, 2)
    assert decimal_type("double") is None and decimal_type(None) is None
    assert wide_sum("decimal(38,0)") == (38, 0) and wide_sum("decimal(37,8)") is None


def test_a_sum_of_38_digits_adds_two_values_of_37_so_spark_drops_no_digit():
    assert sum_of("o", "d", "decimal(20,2)") == "coalesce(o, 0) + coalesce(d, 0)"
    assert sum_of("o", "d", "bigint") == "coalesce(o, 0) + coalesce(d, 0)"
    assert sum_of("o", "d", "decimal(38,8)") == (
        "try_cast(coalesce(o, 0) as decimal(37,8)) + try_cast(coalesce(d, 0) as decimal(37,8))"
    )


def test_a_wide_sum_s_group_is_recomputed_when_it_overflowed_or_does_not_fit():
    assert sum_guards("o", "n", "d", "v", "decimal(20,2)") == []
    assert sum_guards("o", "n", "d", "v", "decimal(38,8)") == [
        "(o is null and coalesce(n, 0) > 0)",  # overflowed: ANSI off, SUM is NULL
        "(d is null and coalesce(v, 0) > 0)",  # the delta's own sum overflowed
        "(try_cast(o as decimal(37,8)) is null and o is not null)",
        "(try_cast(d as decimal(37,8)) is null and d is not null)",
    ]


def test_an_average_divides_as_spark_does_where_that_rounds_as_avg_does():
    # a decimal(20,2) sum: Spark's quotient has scale 20, 14 digits beyond decimal(14,6)'s
    assert average_of("s", "n", "decimal(20,2)", "decimal(14,6)") == (
        "case when n = 0 then null else cast((s) as decimal(20,2)) / (n) end"
    )
    # a decimal(38,2) sum: scale 6, the AVG's own: one rounding
    assert average_guard("s", "n", "decimal(38,2)", "decimal(38,6)") is None
    assert average_of("s", "n", "double", "double") == "case when n = 0 then null else cast((s) as double) / (n) end"
    assert average_guard("s", "n", "double", "double") is None


def test_an_average_of_a_wide_sum_takes_the_first_rung_that_fits_or_is_recomputed():
    # a decimal(38,18) sum: Spark's quotient would have scale 18 for an AVG of scale 22
    average = average_of("s", "n", "decimal(38,18)", "decimal(38,22)")
    assert average.startswith(
        "case when n = 0 then null when n < 1000 and try_cast(s as decimal(31,18)) is not null then "
        "cast(try_cast(s as decimal(31,18)) / cast(n as decimal(6,0)) as decimal(38,22)) when n < 1000000 and "
    )
    assert average.count(" when ") == 6 and average.endswith(" end")  # no values, then counts of 6 to 18 digits
    assert average_guard("s", "n", "decimal(38,18)", "decimal(38,22)") == (
        "(coalesce(n, 0) > 0 and not coalesce((n < 1000 and try_cast(s as decimal(31,18)) is not null) or "
        "(n < 1000000 and try_cast(s as decimal(28,18)) is not null) or "
        "(n < 1000000000 and try_cast(s as decimal(25,18)) is not null) or "
        "(n < 1000000000000 and try_cast(s as decimal(22,18)) is not null) or "
        "(n < 1000000000000000 and try_cast(s as decimal(19,18)) is not null), false))"
    )
