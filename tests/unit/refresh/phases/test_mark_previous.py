"""What the mark step says of the master snapshot a view reflected before its refresh
(MarkedLog.previous_master_snapshot): known only where the view's rows are exactly its query over
it, so that the rows a refresh deletes can be computed from the masters (join_view.py)."""

from dataclasses import replace

from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.phases.mark import previous_snapshot
from dbt_incremental_mv.refresh.state.bookkeeping import LogPosition
from tests.unit.fake_iceberg import FakeIceberg

CAPTURED = LogSpec("shop.mlog_orders", "shop.mlog_orders", "shop.orders", "shop.orders", ("order_id",), True)


def test_the_previous_master_snapshot_is_known_only_for_a_captured_log_consumed_whole_in_the_same_schema():
    fake = FakeIceberg()
    fake.table("shop.orders", [("order_id", "bigint"), ("amount", "double")])
    previous = fake.tables["shop.orders"].refs["main"]
    now = fake.commit("shop.orders", "overwrite")
    ctx = RefreshContext(fake.query, fake.execute, fake.metadata())
    position = LogPosition(4, previous)
    assert previous_snapshot(ctx, CAPTURED, position, now) == previous
    # a log written by ingestion: committed after its master, it may lag behind the snapshot recorded
    assert previous_snapshot(ctx, replace(CAPTURED, capture=False), position, now) is None
    # no position, commits applied on commit, a position past the log, no snapshot recorded
    assert previous_snapshot(ctx, CAPTURED, None, now) is None
    assert previous_snapshot(ctx, CAPTURED, replace(position, commits=(now,)), now) is None
    assert previous_snapshot(ctx, CAPTURED, replace(position, uncaptured=True), now) is None
    assert previous_snapshot(ctx, CAPTURED, LogPosition(4, None), now) is None
    # a snapshot expired since, or written with another schema (a column added or widened)
    assert previous_snapshot(ctx, CAPTURED, LogPosition(4, 999_999), now) is None
    # over SQL (schema ids unknown there): not read at all
    from dbt_incremental_mv.metadata import Metadata

    loads = []
    over_sql = Metadata(fake)
    over_sql.table = lambda name: loads.append(name)  # type: ignore[method-assign]
    assert previous_snapshot(RefreshContext(fake.query, fake.execute, over_sql), CAPTURED, position, now) is None
    assert loads == []
    table = fake.tables["shop.orders"]
    table.snapshots[now] = replace(table.snapshots[now], schema_id=1)
    ctx.metadata.forget("shop.orders")
    assert previous_snapshot(ctx, CAPTURED, position, now) is None
