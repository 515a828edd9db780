"""What an AVG's hidden sum adds up (analysis/summands.py): an integral argument as a double, as
Spark's AVG adds it up (a BIGINT SUM would wrap or fail where AVG does not); any other as it is."""

import pytest

from dbt_incremental_mv.analysis import MasterTable, analyze_view
from dbt_incremental_mv.analysis.model import HiddenPurpose

EVENTS = MasterTable(
    "shop.events",
    (("event_id", "bigint"), ("nanos", "bigint"), ("qty", "int"), ("amount", "decimal(38,0)"), ("ratio", "double"),
     ("label", "string")),
    ("event_id",),
)


def summand(argument: str) -> str:
    view = analyze_view(f"select label, avg({argument}) as a from shop.events e group by label", {"shop.events": EVENTS})
    (hidden,) = [h for h in view.hidden_columns if h.purpose is HiddenPurpose.SUM]
    return hidden.expression.sql(dialect="spark").replace("`", "")


@pytest.mark.parametrize("argument, expected", [
    ("e.nanos", "SUM(CAST(e.nanos AS DOUBLE))"),
    ("e.qty * 2", "SUM(CAST(e.qty * 2 AS DOUBLE))"),
    ("coalesce(e.qty, 0)", "SUM(CAST(COALESCE(e.qty, 0) AS DOUBLE))"),
    ("e.amount", "SUM(e.amount)"),  # a decimal: AVG's sum is SUM's decimal(p + 10, s)
    ("e.ratio", "SUM(e.ratio)"),
    ("e.qty / 2", "SUM(e.qty / 2)"),  # a double already
])
def test_an_integral_argument_is_summed_as_a_double_as_avg_sums_it(argument, expected):
    assert summand(argument) == expected


def test_a_union_all_branch_keeps_its_summands():
    view = analyze_view(
        "select label, avg(e.nanos) as a from shop.events e group by label "
        "union all select label, avg(e.amount) from shop.events e group by label", {"shop.events": EVENTS},
    )
    sums = [h.expression.sql(dialect="spark").replace("`", "") for b in view.branches for h in b.hidden_columns if h.purpose is HiddenPurpose.SUM]
    assert sums == ["SUM(CAST(e.nanos AS DOUBLE))", "SUM(e_2.amount)"]
