"""Views that read the clock (analysis/clock.py): a refresh's time written into the query as
literals, and what differs between the query's definitions at two times."""

import pytest

from dbt_incremental_mv.analysis import MasterTable, UnsupportedViewError, analyze_view, render_expression
from dbt_incremental_mv.analysis.clock import Clock, ClockError, ClockMove, at_times, clock_move, sql_reads_clock
from dbt_incremental_mv.refresh.phases.clock import crossing

MASTERS = {
    "s.orders": MasterTable(
        "s.orders",
        (("order_id", "bigint"), ("customer_id", "bigint"), ("due", "date"), ("received", "timestamp"), ("amount", "double")),
        ("order_id",),
    ),
    "s.customers": MasterTable("s.customers", (("customer_id", "bigint"), ("valid_to", "date")), ("customer_id",)),
}
MORNING, NOON, NEXT_DAY = Clock.of("2026-12-01 09:00"), Clock.of("2026-12-01 12:00:00"), Clock.of("2026-12-02")


def move(sql, before, after):
    return clock_move(analyze_view(sql, MASTERS, before), analyze_view(sql, MASTERS, after))


@pytest.mark.parametrize(
    "text, timestamp",
    [
        ("2026-12-01", "2026-12-01 00:00:00"),
        ("2026-12-01 09:30", "2026-12-01 09:30:00"),
        ("2026-12-01T09:30:15.25", "2026-12-01 09:30:15.25"),
    ],
)
def test_a_clock_is_a_time_in_the_session_time_zone(text, timestamp):
    assert Clock.of(text).timestamp == timestamp
    assert Clock.of(text).date == "2026-12-01"


@pytest.mark.parametrize("text", ["yesterday", "2026-12-01 9:30", "12/01/2026", ""])
def test_a_clock_setting_that_is_no_time_is_refused_saying_how_to_write_it(text):
    with pytest.raises(ClockError, match="YYYY-MM-DD HH:MM:SS"):
        Clock.of(text)


def test_each_clock_function_reads_as_the_refresh_time():
    sql = (
        "select o.order_id from s.orders o where o.due >= current_date and o.received <= now() "
        "and o.received < current_timestamp() and o.received < localtimestamp()"
    )
    assert sql_reads_clock(sql)
    conjuncts = [render_expression(c) for c in analyze_view(sql, MASTERS, NOON).where_conjuncts]
    assert conjuncts == [
        "`o`.`due` >= CAST('2026-12-01' AS DATE)",
        "`o`.`received` <= CAST('2026-12-01 12:00:00' AS TIMESTAMP)",
        "`o`.`received` < CAST('2026-12-01 12:00:00' AS TIMESTAMP)",
        "`o`.`received` < CAST('2026-12-01 12:00:00' AS TIMESTAMP_NTZ)",
    ]


def test_without_a_clock_the_analysis_refuses_the_clock_functions():
    assert not sql_reads_clock("select o.order_id from s.orders o")
    with pytest.raises(UnsupportedViewError, match="CURRENT_DATE"):
        analyze_view("select o.order_id from s.orders o where o.due >= current_date()", MASTERS)


def test_a_date_filter_does_not_move_within_the_day():
    sql = "select o.order_id from s.orders o where o.due >= date_add(current_date(), -30)"
    assert move(sql, MORNING, NOON) == ClockMove()
    moved = move(sql, NOON, NEXT_DAY)
    assert moved.elsewhere is None
    assert [(f.alias, render_expression(f.after)) for f in moved.filters] == [
        ("o", "`o`.`due` >= DATE_ADD(CAST('2026-12-02' AS DATE), -30)")
    ]


def test_filters_of_each_table_of_a_join_move_apart_from_the_others():
    sql = (
        "select o.order_id from s.orders o join s.customers c on o.customer_id = c.customer_id "
        "where c.valid_to >= current_date() and current_timestamp() >= o.received and o.amount > 0"
    )
    moved = move(sql, MORNING, NEXT_DAY)
    assert moved.elsewhere is None
    assert sorted(f.alias for f in moved.filters) == ["c", "o"]


def test_a_filter_of_the_null_supplying_table_in_an_outer_join_s_on_moves_as_a_filter_of_its_rows():
    sql = (
        "select o.order_id, c.valid_to from s.orders o left join s.customers c on o.customer_id = c.customer_id "
        "and c.valid_to >= current_date() where o.due < current_date()"
    )
    moved = move(sql, MORNING, NEXT_DAY)
    assert moved.elsewhere is None
    assert sorted((f.alias, render_expression(f.after)) for f in moved.filters) == [
        ("c", "`c`.`valid_to` >= CAST('2026-12-02' AS DATE)"),
        ("o", "`o`.`due` < CAST('2026-12-02' AS DATE)"),
    ]
    # at_times reads the ON filter as it was at the old time too (an aggregate's changes at that time)
    after = analyze_view(sql, MASTERS, NEXT_DAY)
    old = at_times(after, moved.filters, ["c"])
    assert "CAST('2026-12-01' AS DATE)" in render_expression(old.joins[0].condition)
    assert render_expression(old.joins[0].residual[0]) == "`c`.`valid_to` >= CAST('2026-12-01' AS DATE)"
    assert old.where_conjuncts == after.where_conjuncts  # (o's filter kept at the new time)


def test_a_having_comparing_a_max_or_min_with_the_time_moves_as_a_filter_of_the_values_it_aggregates():
    # the customers active in the last week (their latest order received then), with more than one order
    sql = (
        "select o.customer_id, count(*) as n from s.orders o group by o.customer_id "
        "having max(o.received) >= current_timestamp() - interval 7 days and count(*) > 1 and current_date() > min(o.due)"
    )
    moved = move(sql, MORNING, NEXT_DAY)
    assert moved.elsewhere is None
    assert [(f.alias, render_expression(f.before), render_expression(f.after)) for f in moved.filters] == [
        (
            "o",
            "`o`.`received` >= CAST('2026-12-01 09:00:00' AS TIMESTAMP) - INTERVAL '7' DAYS",
            "`o`.`received` >= CAST('2026-12-02 00:00:00' AS TIMESTAMP) - INTERVAL '7' DAYS",
        ),
        ("o", "CAST('2026-12-01' AS DATE) > `o`.`due`", "CAST('2026-12-02' AS DATE) > `o`.`due`"),
    ]
    # the rows whose value lies between the two times: a group's latest value can only cross the time there
    assert "BETWEEN" in render_expression(crossing(moved.filters[:1]))


@pytest.mark.parametrize(
    "sql, where",
    [
        ("select o.order_id, datediff(o.due, current_date()) as age from s.orders o", "a selected value"),
        (
            "select o.order_id from s.orders o left join s.customers c on o.customer_id = c.customer_id "
            "and c.valid_to >= date_add(current_date(), cast(o.amount as int))",
            "a join condition",
        ),
        (
            "select o.order_id from s.orders o join s.customers c on o.customer_id = c.customer_id "
            "where o.due >= current_date() or c.valid_to >= current_date()",
            "a join condition",
        ),
        (
            "select o.customer_id, count(*) as n from s.orders o group by o.customer_id "
            "having datediff(current_date(), max(o.due)) < 7",
            "HAVING",
        ),
    ],
)
def test_the_clock_read_elsewhere_is_said(sql, where):
    moved = move(sql, MORNING, NEXT_DAY)
    assert moved.elsewhere == where


def test_rows_that_crossed_are_read_within_the_span_of_the_two_times():
    sql = "select o.order_id from s.orders o where o.received <= current_timestamp() and (o.due < current_date() or o.amount < 0)"
    condition = render_expression(crossing(move(sql, MORNING, NEXT_DAY).filters))
    # a comparison with the time: only values between the two times can change its answer (pruned)
    assert (
        "`o`.`received` BETWEEN LEAST(CAST('2026-12-01 09:00:00' AS TIMESTAMP), CAST('2026-12-02 00:00:00' AS TIMESTAMP))"
        in condition
    )
    # any other filter: its answers at the two times compared, a NULL as false
    assert (
        "COALESCE((`o`.`due` < CAST('2026-12-01' AS DATE) OR `o`.`amount` < 0), FALSE) <> "
        "COALESCE((`o`.`due` < CAST('2026-12-02' AS DATE) OR `o`.`amount` < 0), FALSE)"
    ) in condition


def test_a_refusal_quotes_the_clock_functions_as_written_not_as_the_runs_time():
    sql = (
        "select c.customer_id from s.customers c where c.valid_to >= current_date() and c.customer_id = "
        "(select max(o.customer_id) from s.orders o where o.received <= current_timestamp())"
    )
    with pytest.raises(UnsupportedViewError) as refused:
        analyze_view(sql, MASTERS, NOON)
    assert "o.received <= CURRENT_TIMESTAMP()" in str(refused.value) and "2026" not in str(refused.value)


def test_the_date_of_a_timestamp_column_is_pruned_by_the_times_of_the_two_dates():
    sql = "select o.order_id from s.orders o where cast(o.received as date) >= current_date() - 30"
    filters = move(sql, MORNING, NEXT_DAY).filters
    types = {"received": "timestamp", "order_id": "bigint"}
    condition = render_expression(crossing(filters, types))
    assert "`o`.`received` >= CAST(LEAST(CAST('2026-12-01' AS DATE) - 30, CAST('2026-12-02' AS DATE) - 30) AS TIMESTAMP)" in condition
    assert "`o`.`received` < CAST(DATE_ADD(GREATEST(" in condition
    # a string column's date: no range of its values (strings need not sort as their dates)
    assert "`o`.`received` >=" not in render_expression(crossing(filters, {"received": "string"}))


def test_the_master_and_the_marked_images_are_read_by_one_query_that_stops_at_the_first_row():
    from dataclasses import dataclass

    from dbt_incremental_mv.refresh.phases.clock import crossed_rows

    @dataclass
    class Log:
        logged: tuple = ("order_id", "received")
        has_changes: bool = True

        def images(self, columns):
            return f"select {', '.join(columns)} from images"

    class Context:
        def __init__(self, rows):
            self.rows, self.sql = rows, []

        def query(self, sql):
            self.sql.append(sql)
            return self.rows

    sql = "select o.order_id from s.orders o where o.received <= current_timestamp()"
    filters = move(sql, MORNING, NOON).filters
    definition = analyze_view(sql, MASTERS, NOON)
    ctx = Context([])
    assert crossed_rows(ctx, definition, filters, {"s.orders": 12}, {"s.orders": Log()}) is None
    assert len(ctx.sql) == 1 and ctx.sql[0].count("select 1 from") == 2 and ctx.sql[0].endswith("limit 1")
    assert "`s`.`orders` version as of 12 as `o`" in ctx.sql[0] and "from images" in ctx.sql[0]
    found = crossed_rows(Context([(1,)]), definition, filters, {"s.orders": 12})
    assert found is not None and found.reason.startswith("rows crossed the view's time boundary (s.orders: ")
    # the keys of the master's rows that crossed, for a join view's refresh
    assert found.rows["o"].startswith("select * from `s`.`orders` version as of 12 as `o`\nwhere ")


def test_a_per_partition_view_moves_by_its_filters_of_one_tables_rows():
    # the latest order per customer among those received until now, the customers valid today:
    # each filter reads the rows of one table (in a CTE, in a semi join), their crossings are changes
    sql = (
        "with latest as (select o.*, row_number() over (partition by o.customer_id order by o.received desc) as rn "
        "from s.orders o where o.received <= current_timestamp() and o.amount > 0) "
        "select l.customer_id, l.order_id from latest l where l.rn = 1 and exists "
        "(select 1 from s.customers c where c.customer_id = l.customer_id and c.valid_to >= current_date())"
    )
    assert analyze_view(sql, MASTERS, MORNING).partition_query is not None
    moved = move(sql, MORNING, NEXT_DAY)
    assert moved.elsewhere is None
    assert [(f.alias, render_expression(f.after)) for f in moved.filters] == [
        ("o", "`o`.`received` <= CAST('2026-12-02 00:00:00' AS TIMESTAMP)"),
        ("c", "`c`.`valid_to` >= CAST('2026-12-02' AS DATE)"),
    ]
    assert move(sql, MORNING, MORNING) == ClockMove()


def test_a_per_partition_view_moves_by_a_filter_of_the_joined_table_in_its_on():
    # each customer's orders due from today on, numbered (a window over a LEFT JOIN, per customer): the filter in
    # the ON decides whether an order is in the join, as a WHERE filter of its rows would
    sql = (
        "select c.customer_id, o.order_id, row_number() over (partition by c.customer_id order by o.due, o.order_id) "
        "as n from s.customers c left join s.orders o on o.customer_id = c.customer_id and o.due >= current_date()"
    )
    assert analyze_view(sql, MASTERS, MORNING).partition_query is not None
    moved = move(sql, MORNING, NEXT_DAY)
    assert moved.elsewhere is None
    assert [(f.alias, render_expression(f.after)) for f in moved.filters] == [
        ("o", "`o`.`due` >= CAST('2026-12-02' AS DATE)")
    ]
    # a filter of the preserved side in the ON decides which customers find a match, not which rows there are
    preserved = sql.replace("o.due >= current_date()", "o.due >= current_date() and c.valid_to >= current_date()")
    assert move(preserved, MORNING, NEXT_DAY).elsewhere == "the query"


@pytest.mark.parametrize(
    "sql",
    [
        # selected; in a filter of a derived table's rows; of a LEFT JOIN's null-extended rows
        "select customer_id, count(*) as n, max(datediff(due, current_date())) as age from (select o.*, "
        "row_number() over (partition by o.customer_id order by o.order_id) as r from s.orders o) t where r <= 2 "
        "group by customer_id",
        "with latest as (select o.*, row_number() over (partition by o.customer_id order by o.order_id desc) as rn "
        "from s.orders o) select customer_id, count(*) as n from latest where rn = 1 and due >= current_date() "
        "group by customer_id",
        "select c.customer_id, count(o.order_id) as n from s.customers c left join s.orders o "
        "on o.customer_id = c.customer_id where coalesce(o.due, current_date()) >= current_date() group by c.customer_id",
    ],
)
def test_a_per_partition_view_reading_the_clock_elsewhere_is_recomputed(sql):
    assert analyze_view(sql, MASTERS, MORNING).partition_query is not None
    assert move(sql, MORNING, NEXT_DAY).elsewhere == "the query"
