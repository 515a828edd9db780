"""What a refresh reads, without Spark: the fake catalog (fake_iceberg.py) answers the metadata
seam and records every SQL statement, so a read the engine no longer needs cannot creep back in."""

from dbt_incremental_mv.refresh.state.bookkeeping import LogPosition, ViewState
from dbt_incremental_mv.logs import properties as log_properties
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh.context import RefreshContext, StatsRequest
from dbt_incremental_mv.refresh.engine import FastRefreshEngine
from dbt_incremental_mv.refresh.state.view_state import view_state_at
from tests.unit.fake_iceberg import LOG_COLUMNS, FakeIceberg

SPEC = LogSpec("logs.mlog_orders", "shop.mlog_orders", "orders", "shop.orders", ("order_id",), True)
ORDERS = [("order_id", "bigint"), ("amount", "int")]


def warehouse(vouched: bool = True):
    fake = FakeIceberg()
    fake.table("shop.orders", ORDERS)
    log = fake.table("shop.mlog_orders", ORDERS + LOG_COLUMNS, {"format-version": "3"})
    master = fake.tables["shop.orders"].refs["main"]
    fake.log_rows(log.name, "W", commit=master)
    if vouched:
        log.properties.update(log_properties.capture_property(master, log.refs["main"]))
    return fake, master


def engine(fake):
    return FastRefreshEngine(fake.query, fake.execute, fake.metadata())


def test_a_log_vouched_captured_through_the_current_snapshot_is_not_read():
    fake, master = warehouse()
    plan = engine(fake).capture_plan(SPEC, {"shop.mlog_orders": fake.tables["shop.mlog_orders"].refs["main"], "shop.orders": master})
    assert plan.method == "none"
    assert fake.statements == []


def test_a_log_without_the_capture_property_counts_its_watermark():
    fake, master = warehouse(vouched=False)
    plan = engine(fake).capture_plan(SPEC, {"shop.mlog_orders": fake.tables["shop.mlog_orders"].refs["main"], "shop.orders": master})
    assert plan.method == "none"
    assert len(fake.statements) == 1 and "max_by(`_mv_commit`" in fake.statements[0]


def test_the_capture_property_no_longer_holds_after_an_append_it_did_not_record():
    fake, master = warehouse()
    fake.commit("shop.mlog_orders", "append")  # e.g. a capture by an older plugin version
    log = fake.load("shop.mlog_orders")
    assert log_properties.captured_through(log) is None
    fake.commit("shop.mlog_orders", "overwrite")
    assert log_properties.captured_through(fake.load("shop.mlog_orders")) is None


def test_a_newer_master_snapshot_is_captured_from_its_history_in_metadata():
    fake, master = warehouse()
    new = fake.commit("shop.orders", "overwrite")
    plan = engine(fake).capture_plan(SPEC, {"shop.mlog_orders": fake.tables["shop.mlog_orders"].refs["main"], "shop.orders": new})
    assert (plan.method, plan.commits) == ("changelog", (new,))
    assert fake.statements == []


def test_log_counts_are_read_once_per_log_snapshot_and_position_in_one_statement():
    fake, _ = warehouse(vouched=False)
    ctx = RefreshContext(fake.query, fake.execute, fake.metadata())
    snapshot = fake.tables["shop.mlog_orders"].refs["main"]
    other = LogSpec("logs.mlog_c", "shop.mlog_c", "c", "shop.c", ("id",), True)
    fake.table("shop.mlog_c", [("id", "bigint")] + LOG_COLUMNS)
    ctx.stats(StatsRequest(SPEC, snapshot, 5, (38,)), StatsRequest(other, fake.tables["shop.mlog_c"].refs["main"], 0))
    assert len(fake.statements) == 1 and fake.statements[0].count("as request") == 2
    ctx.stats(StatsRequest(SPEC, snapshot, 5, (38,)))  # read already
    assert len(fake.statements) == 1
    assert ctx.stats_at("shop.mlog_orders", snapshot)["watermarks"] == 1  # any position's counts serve purge
    ctx.stats(StatsRequest(SPEC, snapshot + 1, 5, (38,)))  # another log snapshot: read
    assert len(fake.statements) == 2


def test_a_views_state_and_the_snapshot_it_was_read_from_come_from_its_metadata():
    fake = FakeIceberg()
    fake.table("shop.v", [("a", "int")])
    state = ViewState(logs={"shop.mlog_orders": LogPosition(7, 100)}, method="fast", base=500)
    fake.commit("shop.v", "overwrite", summary={"wap.id": state.encode()})
    fake.commit("shop.v", "replace")  # compaction is looked through
    found, read_at = view_state_at(fake.metadata(), "shop.v")
    assert (found, read_at) == (state, fake.tables["shop.v"].refs["main"])
    assert fake.statements == []
    assert view_state_at(fake.metadata(), "shop.missing") == (None, None)


def test_a_recorded_purge_is_not_counted_across_only_for_views_that_consumed_what_it_purged():
    from dbt_incremental_mv.refresh.phases.plan import log_out_of_step

    fake, _ = warehouse()
    log = fake.tables["shop.mlog_orders"]
    read_at = log.refs["main"]
    purge = fake.commit("shop.mlog_orders", "overwrite")
    log.properties.update(log_properties.purges_property(log.properties, purge, 7))
    assert log_properties.purge_snapshots(log.properties) == {purge: 7}

    def counted(sequence):
        fake.statements.clear()
        ctx = RefreshContext(fake.query, fake.execute, fake.metadata())
        log_out_of_step(ctx, SPEC, LogPosition(sequence, 1, log_snapshot=read_at), True)
        return [sql for sql in fake.statements if "count_if(" in sql]

    assert counted(7) == [] and counted(9) == []  # the purge deleted only rows this view had consumed
    assert len(counted(5)) == 1  # it purged further than this view consumed (another project): counted
