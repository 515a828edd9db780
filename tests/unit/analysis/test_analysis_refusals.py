"""Every construct that cannot be fast refreshed is refused, and the error names it."""

from __future__ import annotations

import pytest

from dbt_incremental_mv.analysis import MasterTable, UnsupportedViewError, analyze_view

O = "shop.orders o"
OC = "shop.orders o join shop.customers c on o.customer_id = c.customer_id"
OLC = "shop.orders o left join shop.customers c on o.customer_id = c.customer_id"

# (id, sql, a string the error's construct must contain, case-insensitively)
REFUSALS = [
    # non-deterministic functions (the clock's too, for an analysis without a clock: a run fixes one)
    ("rand", f"select rand() as r, o.order_id from {O}", "rand("),
    ("random", f"select random() as r, o.order_id from {O}", "rand("),
    ("randn", f"select randn(1) as r, o.order_id from {O}", "randn("),
    ("uuid", f"select uuid() as u, o.order_id from {O}", "uuid("),
    ("shuffle", f"select shuffle(array(o.order_id)) as s from {O}", "shuffle("),
    ("current_timestamp()", f"select current_timestamp() as t, o.order_id from {O}", "current_timestamp"),
    ("current_timestamp bare", f"select o.order_id from {O} where o.order_date < current_timestamp",
     "current_timestamp"),
    ("now", f"select now() as t, o.order_id from {O}", "now("),
    ("current_date", f"select o.order_id from {O} where o.order_date = current_date", "current_date"),
    ("localtimestamp", f"select localtimestamp as t, o.order_id from {O}", "localtimestamp"),
    ("unix_timestamp()", f"select unix_timestamp() as t, o.order_id from {O}", "unix_timestamp("),
    ("monotonically_increasing_id", f"select monotonically_increasing_id() as i from {O}",
     "monotonically_increasing_id("),
    ("spark_partition_id", f"select spark_partition_id() as p, o.order_id from {O}", "spark_partition_id("),
    ("input_file_name", f"select input_file_name() as f, o.order_id from {O}", "input_file_name("),
    ("current_user", f"select current_user() as u, o.order_id from {O}", "current_user"),
    # windows
    ("sum over", f"select o.order_id, sum(o.amount) over () as total from {O}", "over ("),
    ("row_number without over", f"select row_number() as rn from {O}", "row_number("),
    ("window clause", f"select o.order_id from {O} window w as (partition by o.customer_id)", "window"),
    ("ranking without partition", f"select o.order_id from {O} qualify row_number() over (order by o.order_id) = 1",
     "row_number() over (order by"),
    # row-subset and ordering clauses
    ("limit", f"select o.order_id from {O} limit 10", "limit 10"),
    ("offset", f"select o.order_id from {O} offset 5", "offset 5"),
    ("tablesample", f"select o.order_id from shop.orders o tablesample (10 percent)", "tablesample"),
    ("order by with limit", f"select o.order_id from {O} order by o.order_id limit 3", "order by"),
    ("sort by", f"select o.order_id from {O} sort by o.order_id", "sort by"),
    ("cluster by", f"select o.order_id from {O} cluster by o.order_id", "cluster by"),
    ("distribute by", f"select o.order_id from {O} distribute by o.order_id", "distribute by"),
    ("distinct with aggregates", f"select distinct count(*) as n from {O}", "select distinct"),
    # set operations
    ("union all of different widths", f"select o.order_id, o.amount from {O} union all select o.order_id from {O}",
     "union all branch 2"),
    ("union all branch without group by", f"select o.status, count(*) as n from {O} group by o.status "
     f"union all select max(o.status), count(*) from {O}", "union all branch 2"),
    ("union all ordered and limited", f"select o.order_id from {O} union all select o.order_id from {O} order by 1 "
     "limit 3", "order by"),
    ("union all limited", f"select o.order_id from {O} union all select o.order_id from {O} limit 3", "limit"),
    ("union all branch with a window", f"select o.order_id from {O} union all "
     f"select row_number() over (order by o.order_id) as n from {O}", "over ("),
    ("union all under union", f"(select o.order_id + 1 as k from {O} union all select o.order_id from {O}) union "
     f"select o.order_id from {O}", "union"),
    # (set operations over columns the query partitions by are maintained per partition)
    ("union", f"select upper(o.status) as s from {O} union select upper(o.status) from {O}", "union"),
    ("intersect", f"select upper(o.status) as s from {O} intersect select upper(o.status) from {O}", "intersect"),
    ("except", f"select upper(o.status) as s from {O} except select upper(o.status) from {O}", "except"),
    ("union in cte, an expression over a column of mixed types",
     "with u as (select o.amount as a from shop.orders o union all select l.unit_price from shop.order_lines l) "
     "select a * 2 as doubled from u", "a * 2"),
    ("union in cte, a filter on a column of mixed types",
     "with u as (select o.customer_id as k from shop.orders o union all select l.line_no from shop.order_lines l) "
     "select k from u where k > 1", "k > 1"),
    # subqueries in expressions
    ("scalar subquery in where",
     f"select o.order_id from {O} where o.amount > (select avg(unit_price) from shop.order_lines)", "(select"),
    ("exists", f"select o.order_id from {O} where exists (select 1 from shop.customers c where c.customer_id = 1)",
     "exists"),
    ("scalar subquery in select", f"select (select max(amount) from shop.orders) as m, o.order_id from {O}",
     "(select max(amount)"),
    ("scalar subquery in where", f"select o.order_id from {O} where o.amount > (select avg(amount) from shop.orders)",
     "(select avg(amount)"),
    ("subquery in on", f"select o.order_id from {O} join shop.customers c "
                       "on c.customer_id = (select max(customer_id) from shop.customers)", "(select max(customer_id)"),
    ("any subquery", f"select o.order_id from {O} where o.amount = any (select amount from shop.orders)", "any"),
    # grouping
    ("having without group by", f"select count(*) as n from {O} having count(*) > 1", "count(*) > 1"),
    ("having an unmaintainable aggregate",
     f"select o.status, count(*) as n from {O} group by o.status having max_by(o.amount, o.order_id) > 1",
     "max_by(o.amount, o.order_id)"),
    ("having an ungrouped column", f"select o.status, count(*) as n from {O} group by o.status having n > 1 "
     "or o.amount > 2", "o.amount"),
    ("grouping sets", f"select o.status, count(*) as n from {O} group by grouping sets ((o.status), ())",
     "grouping sets"),
    ("rollup", f"select o.status, count(*) as n from {O} group by rollup (o.status)", "rollup"),
    ("cube", f"select o.status, count(*) as n from {O} group by cube (o.status)", "cube"),
    ("with rollup", f"select o.status, count(*) as n from {O} group by o.status with rollup", "rollup"),
    # aggregates
    ("collect_set of maps", f"select o.status, collect_set(map(o.order_id, 1)) as ids from {O} group by o.status",
     "collect_set("),
    ("max_by", f"select o.status, max_by(o.order_id, o.amount) as biggest from {O} group by o.status", "max_by("),
    ("mode", f"select o.status, mode(o.amount) as m from {O} group by o.status", "mode("),
    ("collect_list of maps", f"select o.status, collect_list(map(o.order_id, 1)) as ids from {O} group by o.status",
     "collect_list("),
    ("percentile_approx", f"select percentile_approx(o.amount, 0.5) as median from {O}", "percentile_approx("),
    ("first", f"select o.status, first(o.amount) as f from {O} group by o.status", "first("),
    ("any_value", f"select o.status, any_value(o.amount) as v from {O} group by o.status", "any_value("),
    ("mean", f"select mean(o.amount) as m from {O}", "mean("),
    ("nested aggregate", f"select max(sum(o.amount)) as m from {O}", "max(sum("),
    ("expression over an unmaintainable aggregate",
     f"select o.status, round(percentile_approx(o.amount, 0.5), 2) as p from {O} group by o.status",
     "percentile_approx(o.amount, 0.5)"),
    ("expression over an aggregate and an ungrouped column",
     f"select o.status, sum(o.amount) + o.amount as x from {O} group by o.status", "o.amount"),
    ("having on an unselected aggregate in a union branch",
     f"select o.status, count(*) as n from {O} group by o.status having sum(o.amount) > 1 union all "
     "select upper(c.country), count(*) from shop.customers c group by upper(c.country)", "sum(o.amount)"),
    ("expression over aggregates in a union branch",
     f"select o.status, count(*) as n from {O} group by o.status union all "
     "select upper(c.country), cast(count(*) as int) from shop.customers c group by upper(c.country)",
     "cast(count(*) as int)"),
    ("non-aggregated column", f"select o.status, o.amount, count(*) as n from {O} group by o.status", "amount"),
    ("filter on an aggregate that does not ignore NULLs", f"select o.customer_id, first(o.amount) filter (where o.amount > 1) as f from {O} group by o.customer_id", "filter"),
    ("multi-argument count", f"select count(o.amount, o.status) as n from {O}", "count("),
    ("aggregate in where", f"select o.order_id from {O} where sum(o.amount) > 1", "sum("),
    ("group by aggregate ordinal", f"select count(*) as n, o.status from {O} group by 1", "group by 1"),
    ("group by ordinal out of range", f"select o.status, count(*) as n from {O} group by 3", "group by 3"),
    ("aggregate over aggregating cte", "with a as (select status, count(*) as n from shop.orders group by status) "
                                       "select sum(n) as total from a", "a"),
    ("filter over a global aggregate cte", "with a as (select count(*) as n, 1 as one from shop.orders) "
                                           "select n from a where one = 2", "1 = 2"),
    # functions
    ("unrenderable function", f"select to_char(o.amount, '999') as s from {O}", "to_char("),
    ("udf", f"select my_udf(o.order_id) as x from {O}", "my_udf("),
    ("udf in where", f"select o.order_id from {O} where is_valid(o.status)", "is_valid("),
    ("reflect", f"select reflect('java.util.UUID', 'randomUUID') as u from {O}", "reflect("),
    ("explode", f"select explode(array(count(*))) as x from {O}", "explode("),
    ("posexplode", f"select posexplode(array(o.order_id)) from {O}", "posexplode("),
    ("inline", f"select inline(array(struct(o.order_id))) from {O}", "inline("),
    ("stack", f"select stack(1, o.order_id) from {O}", "stack("),
    ("json_tuple", f"select json_tuple(o.status, 'a') from {O}", "json_tuple("),
    ("lateral view", f"select o.order_id from {O} lateral view explode(array(1, 2)) t", "lateral view"),
    ("lateral subquery", f"select o.order_id from {O}, lateral (select o.amount as a)", "lateral"),
    ("parameter", f"select o.order_id from {O} where o.status = :status", ":status"),
    # relations
    ("version as of", "select o.order_id from shop.orders version as of 12 o", "version as of 12"),
    ("timestamp as of", "select order_id from shop.orders timestamp as of '2024-01-01'", "timestamp as of"),
    ("table-valued function", "select id from range(10)", "range("),
    ("values", "select a from values (1), (2) as v(a)", "values"),
    ("pivot", f"select * from {O} pivot (sum(amount) for status in ('a', 'b'))", "pivot"),
    ("parenthesised join",
     "select o.order_id from (shop.orders o join shop.customers c on o.customer_id = c.customer_id)",
     "join"),
    ("unknown table", "select x from shop.unknown", "shop.unknown"),
    ("unknown table in cte", "with a as (select * from other.things) select * from a", "other.things"),
    ("keyless master", "select event_id from shop.events", "shop.events"),
    # joins
    ("full outer join", "select o.status, count(*) as n from shop.orders o full outer join shop.customers c "
                        "on o.customer_id = c.customer_id group by o.status", "full outer join"),
    ("full join", "select o.order_id, row_number() over (partition by o.status order by o.order_id) as r from "
                  "shop.orders o full join shop.customers c on o.customer_id = c.customer_id", "full outer join"),
    ("natural join", "select o.order_id from shop.orders o natural join shop.customers c", "natural join"),
    ("right join using", "select * from shop.orders o right join shop.customers c using (customer_id)", "using ("),
    ("left semi join", "select o.order_id from shop.orders o left semi join shop.customers c "
                       "on o.customer_id = c.customer_id", "semi join"),
    ("left anti join", "select o.order_id from shop.orders o left anti join shop.customers c "
                       "on o.customer_id = c.customer_id", "anti join"),
    ("non-equi outer join without an equality", "select o.order_id from shop.orders o left join shop.customers c "
     "on o.customer_id > c.customer_id", "on o.customer_id > c.customer_id"),
    ("or in outer join without an equality", "select o.order_id from shop.orders o left join shop.customers c "
     "on o.customer_id = c.customer_id or c.name = o.status", " or "),
    ("outer join without equality", "select o.order_id from shop.orders o left join shop.customers c "
                                    "on c.country = 'NL'", "left join c"),
    ("outer join without on", "select o.order_id from shop.orders o left join shop.customers c", "left join c"),
    ("joined cte aggregates", "with n as (select country, count(*) as k from shop.customers group by country) "
                              "select o.order_id from shop.orders o join n on n.k = o.customer_id", "n"),
    ("joining cte with a right join inside, joined after the first table",
     "with j as (select n.country, c.customer_id from shop.customers c right join shop.countries n "
     "on c.country = n.country) select o.order_id from shop.orders o join j "
     "on j.customer_id = o.customer_id", "j"),
    ("join condition reading what a joining cte null-extends",
     "with j as (select c.customer_id, n.region from shop.customers c left join shop.countries n "
     "on c.country = n.country) select o.order_id from shop.orders o join j "
     "on coalesce(j.region, 'none') = o.status", "j_n"),
    ("joining cte with a right join after it",
     "with j as (select c.customer_id from shop.customers c join shop.countries n "
     "on c.country = n.country) select o.order_id, p.name from shop.orders o join j "
     "on j.customer_id = o.customer_id right join shop.products p on p.product_id > o.order_id", "j"),
    ("joining and aggregating cte joined", "with j as (select c.country, count(*) as k from shop.customers c "
     "join shop.countries n on c.country = n.country group by c.country) select o.order_id from shop.orders o "
     "join j on j.k = o.customer_id", "j"),
    ("derived table without alias in a join",
     "select o.order_id from shop.orders o join (select customer_id from shop.customers) on 1 = 1",
     "(select customer_id"),
    ("self-join without aliases", "select 1 as x from shop.orders join shop.orders on 1 = 1", "orders"),
    ("duplicate aliases", "select 1 as x from shop.orders a join shop.customers a on 1 = 1", "a"),
    # names and columns
    ("unknown column", f"select o.order_id, nope from {O}", "nope"),
    ("unknown qualified column", f"select o.nope from {O}", "o.nope"),
    ("unknown qualifier", f"select x.order_id from {O}", "x.order_id"),
    ("ambiguous column", f"select customer_id from {OC}", "customer_id"),
    ("duplicate output names", f"select o.order_id, o.customer_id as order_id from {O}", "order_id"),
    ("duplicate names from star", f"select * from {OC}", "customer_id"),
    ("reserved prefix", f"select o.order_id as _mv_order from {O}", "_mv_order"),
    ("reserved prefix any case", f"select o.order_id as _MV_order from {O}", "_mv_order"),
    ("expression without alias", f"select o.amount * 2 from {O}", "amount * 2"),
    ("function without alias", f"select upper(o.status) from {O}", "upper(o.status)"),
    ("cte column list mismatch", "with c(a) as (select customer_id, name from shop.customers) select a from c", "c(a)"),
    # statements
    ("multiple statements", f"select o.order_id from {O}; select 1", "multiple statements"),
    ("insert", f"insert into shop.orders select * from {O}", "insert"),
    ("create table as", f"create table t as select o.order_id from {O}", "create"),
    ("recursive cte", "with recursive r as (select order_id from shop.orders) select order_id from r",
     "with recursive"),
    ("parse error", "select (order_id from shop.orders", "sql near 'from'"),
    ("empty", "   ", "empty sql"),
]


@pytest.mark.parametrize("sql, construct", [pytest.param(s, c, id=i) for i, s, c in REFUSALS])
def test_refused_with_the_construct_named(view, sql, construct):
    with pytest.raises(UnsupportedViewError) as caught:
        view(sql)
    error = caught.value
    assert construct.lower() in error.construct.lower()
    assert error.reason and error.hint
    assert str(error).startswith(f"cannot fast refresh: {error.construct}: {error.reason}.")


def test_there_are_plenty_of_refusal_cases():
    assert len(REFUSALS) >= 60


def test_parse_error_carries_sqlglot_message(view):
    with pytest.raises(UnsupportedViewError) as caught:
        view("select (order_id from shop.orders")
    assert "does not parse" in caught.value.reason
    assert "line 1" in caught.value.reason


def test_keyless_master_message_says_to_declare_a_key(view):
    with pytest.raises(UnsupportedViewError) as caught:
        view("select e.event_id from shop.events e")
    assert "unique key" in caught.value.reason
    assert "Declare the key of shop.events" in caught.value.hint


def test_declared_key_must_be_a_column():
    masters = {"s.t": MasterTable("s.t", (("a", "int"),), ("b",))}
    with pytest.raises(UnsupportedViewError) as caught:
        analyze_view("select a from s.t", masters)
    assert caught.value.construct == "s.t" and "b" in caught.value.reason


def test_unnamed_expression_hint_suggests_an_alias(view):
    with pytest.raises(UnsupportedViewError) as caught:
        view("select amount * 2 from shop.orders")
    assert "as <name>" in caught.value.hint


def test_an_outer_join_needs_an_equality_beside_its_other_conditions(view):
    with pytest.raises(UnsupportedViewError) as non_equi:
        view("select o.order_id from shop.orders o left join shop.customers c on o.customer_id < c.customer_id")
    assert "at least one equality" in non_equi.value.reason and "o.customer_id < c.customer_id" in non_equi.value.construct
    # beside an equality, a range to a validity interval or an OR reading both sides is maintained
    ranged = view("select o.order_id, c.name from shop.orders o left join shop.customers c "
                  "on o.customer_id = c.customer_id and o.amount between length(c.name) and length(c.country)")
    ored = view("select o.order_id, c.name from shop.orders o left join shop.customers c "
                "on o.customer_id = c.customer_id and (o.status = c.segment or c.segment is null)")
    assert [len(d.joins[0].residual) for d in (ranged, ored)] == [1, 1]


def test_first_problem_in_a_fixed_order_is_reported(view):
    # a window and a LIMIT: clauses are checked before expressions
    with pytest.raises(UnsupportedViewError) as caught:
        view(f"select row_number() over (order by o.order_id) as rn from {O} limit 1")
    assert caught.value.construct == "LIMIT 1"


# ---------------------------------------------------------------- defects found on real dbt models
def test_assert_true_is_a_deterministic_builtin_not_an_unknown_function(masters):
    # dbt-spark's own dateadd/datediff macros emit it
    sql = f"select o.order_id, assert_true(o.amount >= 0) as checked from {O}"
    assert analyze_view(sql, masters).view_class.value == "join"


@pytest.mark.parametrize("quantifier", ["like any", "like all", "not like any", "ilike any"])
def test_like_any_is_a_predicate_not_the_any_aggregate(quantifier, masters):
    sql = f"select o.order_id from {O} where o.status {quantifier} ('paid%', 'ship%')"
    view = analyze_view(sql, masters)
    assert view.view_class.value == "join" and not view.is_aggregate


@pytest.mark.parametrize("function", ["lag(o.amount)", "sum(o.amount)", "first_value(o.amount)", "row_number()"])
def test_a_window_function_is_reported_once(function):
    from dbt_incremental_mv.analysis.analyze import construct_refusals

    # a window in a UNION ALL branch is no shape the windowed views maintain
    sql = (
        f"select o.order_id, {function} over (partition by o.customer_id order by o.order_id) as w from {O} "
        f"union all select o.order_id, o.customer_id from {O}"
    )
    found = [str(e) for e in construct_refusals(sql)]
    assert len(found) == 1 and "this window function is not in a form that is fast refreshed" in found[0], found
