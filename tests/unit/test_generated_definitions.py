"""The view generator (tests/fuzz, issue 37) without Spark: reproducible, covering every
construct it is meant to, and every definition judged by the analysis as the generator
expects: a maintainable one accepted, a refused one refused naming its construct."""

from collections import Counter

import pytest

from dbt_incremental_mv.analysis import UnsupportedViewError, analyze_view
from dbt_incremental_mv.analysis.clock import Clock, sql_reads_clock
from dbt_incremental_mv.analysis.states import split_into_states
from tests.fuzz.generator import Generator, analysis_tables

TABLES = analysis_tables()


def judged(definition):
    """None when the analysis accepts the definition, or refuses it as one view but it splits into
    internal states the materialization maintains in steps (refresh/units.py), else its refusal's message."""
    clock = Clock.of("2026-12-01") if sql_reads_clock(definition.sql()) else None  # (a filter by the time)
    try:
        analyze_view(definition.sql(), TABLES, clock)
    except UnsupportedViewError as exc:
        if not sql_reads_clock(definition.sql()) and split_into_states(definition.sql(), TABLES) is not None:
            return None
        return str(exc)
    return None


def test_the_same_seed_gives_the_same_definitions_and_another_seed_others():
    assert Generator(5).definitions(50) == Generator(5).definitions(50)
    assert Generator(5).definitions(50) != Generator(6).definitions(50)


@pytest.mark.parametrize("seed, count", [(37, 2000), (2026, 500)])
def test_every_definition_is_judged_as_generated(seed, count):
    wrong = []
    for definition in Generator(seed).definitions(count):
        refusal = judged(definition)
        if definition.refused is None and refusal is not None:
            wrong.append(f"{definition.name} refused although supported: {refusal}\n  {definition.sql()}")
        elif definition.refused is not None and (refusal is None or definition.refused not in refusal.lower()):
            wrong.append(f"{definition.name} not refused for {definition.refused!r}: {refusal}\n  {definition.sql()}")
    assert not wrong, "\n".join(wrong[:10])


def test_the_definitions_cover_every_construct_of_issue_37():
    definitions = Generator(37).definitions(2000)
    features = Counter(f for d in definitions for f in d.features)
    for construct in ("join", "left", "right", "on filter", "where", "expression", "aggregate", "having",
                      "distinct", "union", "constant key", "constant label", "double", "recomputed aggregate",
                      "windowed", "windowed filter", "aggregate of a left join discarding its null group",
                      "inner join after an outer one (made inner)", "split into states", "filter by the time"):
        assert features[construct] >= 20, (construct, features)
    for refused in ("window", "full outer", "order-dependent aggregate", "nondeterministic", "limit", "subquery",
                    "set operation", "outer where", "on preserved"):
        assert features[f"refused: {refused}"] >= 5, (refused, features)
    sql = " ".join(d.sql() for d in definitions)
    for piece in ("case when", "coalesce(", "cast(", "upper(", "count(*)", "sum(", "avg(", "min(", "max(",
                  "count(o", "customers c2 on c1.referrer_id = c2.customer_id", "intersect", "except",
                  ".credit", ".rate", "avg(o1.quantity)", "lead(", "lag(", "first_value(", "rows between 1 preceding"):
        assert piece in sql, piece
    classes = Counter(d.view_class for d in definitions if d.refused is None)
    assert set(classes) - {"per partition"} == {"single table", "join", "outer join", "aggregate", "aggregate over join",
                                                "aggregate over outer join", "union all", "ranked", "windowed"}, classes


def test_a_failing_definition_is_shrunk_to_what_still_fails():
    from tests.fuzz.generator import Definition
    from tests.fuzz.shrink import shrink

    big = Definition("g0001", (
        "select c1.segment as c0, coalesce(r2.region, 'none') as c1, o3.amount as c2, count(*) as c3 "
        "from {customers} c1 join {regions} r2 on c1.region_id = r2.region_id and r2.rank > 1 "
        "left join {orders} o3 on c1.customer_id = o3.customer_id "
        "where c1.segment is not null and c1.referrer_id > 0 "
        "group by c1.segment, coalesce(r2.region, 'none'), o3.amount having count(*) > 1 "
        "union all select o1.status, o1.status, o1.amount, o1.quantity from {orders} o1"
    ))
    tried = []

    def fails(definition):  # stands for the check on Spark: it fails while a coalesce reads regions
        tried.append(definition)
        return "coalesce(r2.region" in definition.sql().lower()

    small = shrink(big, fails)
    sql = small.sql().lower()
    assert "union" not in sql and "orders" not in sql and "having" not in sql and "where" not in sql
    assert "coalesce(r2.region, 'none')" in sql and "join shop.regions as r2 on c1.region_id = r2.region_id" in sql
    assert "r2.rank" not in sql and len(tried) < 200
    assert small.template.count("{") == 2  # the masters are placeholders again


def test_an_expression_selected_twice_under_two_names_is_a_group_key_twice():
    """Found by the generator (seed 5): the second name was no group key column, and the fast
    refresh failed with KeyError on it (the regression cases r001-r002 run on Spark)."""
    from tests.fuzz.shrink import regressions

    cases = regressions()
    assert [c.name for c in cases][:2] == ["r001", "r002"]
    assert sorted(analyze_view(cases[0].sql(), TABLES).group_key_columns) == ["c0", "c1", "c2"]
    grouped = ("select cast(c.region_id as decimal(10,2)) as k1, cast(c.region_id as decimal(10,2)) as k2, "
               "sum(c.region_id) as s from shop.customers c group by cast(c.region_id as decimal(10,2))")
    assert analyze_view(grouped, TABLES).group_key_columns == ("k1", "k2")
    assert all(judged(c) is None for c in cases)


def test_a_shrunk_candidate_must_fail_as_the_definition_did():
    from tests.fuzz.check import failure_kind

    crossed = (
        "g0028: round 0: refresh failed: Runtime Error in model g0028 (models/g0028.sql)\n"
        "  Model 'g0028' cannot be fast refreshed: rows crossed the view's time boundary (s.orders: `o`.`q` < 3).\n"
        "    select o.q from shop.orders o"
    )
    broken = (
        "r010: round 1: refresh failed: Runtime Error in model r010 (models/r010.sql)\n"
        "  [NUM_COLUMNS_MISMATCH] UNION can only be performed on inputs with the same number of columns\n"
        "    select 1 union all select 1, 2"
    )
    assert failure_kind(crossed) == failure_kind(crossed.replace("g0028", "r011").replace("round 0", "round 2"))
    assert failure_kind(crossed) != failure_kind(broken)  # a cut that broke the SQL is not the same failure
    differs = "g0077: differs from its query after round 1: missing [(4, None, 4)], extra []\n    select 1"
    assert failure_kind(differs) == failure_kind(differs.replace("round 1: missing [(4, None, 4)]", "round 0: missing []"))
