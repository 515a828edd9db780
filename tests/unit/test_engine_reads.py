"""What a refresh reads, without Spark: a fake catalog answers the engine's metadata queries and
records them, so a read the engine no longer needs cannot creep back in unnoticed."""

from dbt_incremental_mv import catalog
from dbt_incremental_mv.bookkeeping import LogPosition, ViewState
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh.engine import FastRefreshEngine

SPEC = LogSpec("logs.mlog_orders", "shop.mlog_orders", "orders", "shop.orders", ("order_id",), True)


def engine(answer):
    asked = []

    def query(sql):
        asked.append(sql)
        return answer(sql)

    return FastRefreshEngine(query, asked.append), asked


def log_stats(captured_through, watermarks=1):
    # log_relation, max_sequence, inserts, deletes, captured_through, watermarks, watermark_sequence,
    # reset_sequence, oldest_change
    return [("shop.mlog_orders", 9, 2, 1, captured_through, watermarks, 9, None, 3)]


def test_a_log_captured_through_the_current_snapshot_needs_no_master_history():
    refresh, asked = engine(lambda sql: log_stats(captured_through=42))
    plan = refresh.capture_plan(SPEC, {"shop.mlog_orders": 7, "shop.orders": 42})
    assert plan.method == "none"
    assert len(asked) == 1 and "max_by(`_mv_commit`" in asked[0]


def test_a_newer_master_snapshot_reads_the_history_to_capture_it():
    def answer(sql):
        if "`snapshots`" in sql:
            return [(41, None, 0, 0), (42, 41, 0, 0)]
        return log_stats(captured_through=41)

    refresh, asked = engine(answer)
    plan = refresh.capture_plan(SPEC, {"shop.mlog_orders": 7, "shop.orders": 42})
    assert (plan.method, plan.commits) == ("changelog", (42,))
    assert len(asked) == 2


def test_the_counts_of_a_capture_that_found_nothing_serve_the_mark_after_it():
    refresh, asked = engine(lambda sql: log_stats(captured_through=42))
    position = LogPosition(5, 40, commits=(38,))
    refresh.capture_plan(SPEC, {"shop.mlog_orders": 7, "shop.orders": 42}, position)
    again = refresh._stats(SPEC, 7, position.sequence, position.commits)
    assert again["inserts"] == 2 and len(asked) == 1
    refresh._stats(SPEC, 8, position.sequence, position.commits)  # another log snapshot: read
    assert len(asked) == 2


def test_a_views_state_and_the_snapshot_it_was_read_from_come_in_one_statement():
    state = ViewState(logs={"shop.mlog_orders": LogPosition(7, 100)}, method="fast", base=500)
    rows = [(500, None, "append", None, 600), (600, 500, "overwrite", state.encode(), 600), (700, 600, "append", "x", 600)]
    asked = []
    found, read_at = catalog.view_state_at(lambda sql: asked.append(sql) or rows, "shop.v")
    assert (found, read_at, len(asked)) == (state, 600, 1)
    assert catalog.view_state_at(lambda sql: [], "shop.v") == (None, None)  # no table or no snapshot
