from dbt_incremental_mv.refresh.state.bookkeeping import LogPosition, ViewState
from dbt_incremental_mv.metadata import commits_since
from dbt_incremental_mv.refresh.state.staleness import (
    PendingChanges, Staleness, out_of_step,
    snapshots_to_count, unconsumed_counts, view_status,
)

LOG = "shop.mlog_orders"
# the log's history: 1 <- 2 <- 3 <- 4 (4 is current)
PARENTS = {1: None, 2: 1, 3: 2, 4: 3}


def check(position, operations, counts=None, current=4, parents=PARENTS, capture=True, exists=True):
    return out_of_step(
        LOG, position, log_exists=exists, current=current, parents=parents, operations=operations,
        counts=counts or {current: (0, 1)}, capture=capture,
    )


def test_chain_since_the_recorded_snapshot():
    assert commits_since(2, 4, PARENTS) == [3, 4]
    assert commits_since(4, 4, PARENTS) == []
    assert commits_since(7, 4, PARENTS) is None  # recreated: the recorded snapshot is not an ancestor
    assert commits_since(1, 4, {4: 3, 3: 2}) is None  # expired in between


def test_only_non_append_commits_and_their_parents_are_counted():
    ops = {2: "append", 3: "overwrite", 4: "append"}
    assert snapshots_to_count([3, 4], ops, PARENTS) == [2, 3]
    assert snapshots_to_count([3, 4], {3: "append", 4: "append"}, PARENTS) == []


def test_appends_and_the_plugins_purges_keep_the_view_in_step():
    position = LogPosition(5, 100, log_snapshot=2)
    # 3 purged consumed rows (the unconsumed count did not drop), 4 appended
    assert check(position, {3: "overwrite", 4: "append"}, {2: (2, 1), 3: (2, 1), 4: (5, 1)}) is None
    assert check(position, {3: "replace", 4: "append"}, {2: (2, 1), 3: (2, 1), 4: (5, 1)}) is None  # compaction


def test_a_foreign_delete_of_unconsumed_changes_is_out_of_step():
    position = LogPosition(5, 100, log_snapshot=2)
    reason = check(position, {3: "delete", 4: "append"}, {2: (4, 1), 3: (1, 1), 4: (3, 1)})
    assert reason is not None and "3 change(s)" in reason and LOG in reason and "commit 3 (delete)" in reason


def test_a_recreated_or_missing_log_is_out_of_step():
    position = LogPosition(5, 100, log_snapshot=2)
    assert "no longer holds the snapshot 2" in check(position, {}, current=9, parents={9: None})
    assert "no longer exists" in check(position, {}, exists=False)


def test_a_deleted_capture_watermark_is_out_of_step_for_captured_logs_only():
    position = LogPosition(5, 100, log_snapshot=4)
    assert "capture watermark" in check(position, {}, {4: (0, 0)})
    assert check(position, {}, {4: (0, 0)}, capture=False) is None


def test_positions_without_a_log_snapshot_are_not_checked():
    assert check(LogPosition(5, 100), {}, current=9, parents={9: None}) is None
    assert check(None, {}) is None


def test_the_log_snapshot_round_trips_and_old_states_decode():
    state = ViewState(logs={LOG: LogPosition(3, 7, (9,), log_snapshot=42)}, method="fast")
    assert ViewState.decode(state.encode()) == state
    old = ViewState(logs={LOG: LogPosition(3, 7)}, method="fast")
    assert ViewState.decode(old.encode()).logs[LOG].log_snapshot is None


def test_count_query_reads_each_snapshot_with_the_views_unconsumed_predicate():
    sql = unconsumed_counts("shop.mlog`x", LogPosition(5, 1, (8,)), [2, 3])
    assert sql.count("union all") == 1
    assert "`shop`.`mlog``x` version as of 2" in sql and "version as of 3" in sql
    assert "`_last_updated_sequence_number` > 5" in sql and "`_mv_commit` not in (8)" in sql


def test_view_status_precedence():
    pending = [PendingChanges("shop.orders", 3, 1), PendingChanges("shop.customers", 0, 0)]
    assert view_status("v", built=False).status == Staleness.NOT_BUILT
    assert view_status("v", built=True, unusable="no log", rebuild=["x"]).line() == "v: unusable (no log)"
    assert view_status("v", built=True, rebuild=["a", "b"], pending=pending).line() == "v: needs rebuild (a; b)"
    stale = view_status("v", built=True, pending=pending)
    assert stale.status == Staleness.STALE
    assert stale.detail == "changes pending: shop.orders: 3 logged change(s) + 1 uncaptured commit(s)"
    assert view_status("v", built=True, pending=pending[1:]).line() == "v: fresh"
    assert view_status("v", built=True).status == Staleness.FRESH
    assert Staleness.UNUSABLE and Staleness.NEEDS_REBUILD


def test_nothing_to_refresh_from_snapshot_ids_alone():
    from dbt_incremental_mv.refresh.state.staleness import positions_current as nothing_to_refresh

    captured = LogPosition(sequence=7, master_snapshot=100, log_snapshot=50)
    ingested = LogPosition(sequence=3, master_snapshot=None, log_snapshot=60)
    positions = [(True, "s.orders", "s.mlog_orders", captured), (False, "s.customers", "s.mlog_customers", ingested)]
    assert nothing_to_refresh(positions, {"s.orders": 100, "s.mlog_customers": 60})
    # a master commit since, a new log commit, a log purged meanwhile (still idle for a captured one)
    assert not nothing_to_refresh(positions, {"s.orders": 101, "s.mlog_customers": 60})
    assert not nothing_to_refresh(positions, {"s.orders": 100, "s.mlog_customers": 61})
    assert nothing_to_refresh(positions[:1], {"s.orders": 100, "s.mlog_orders": 99})
    # no record, commits consumed on commit (older commits may be pending), no logs, unknown snapshot
    assert not nothing_to_refresh([(True, "s.orders", "s.mlog_orders", None)], {"s.orders": 100})
    on_commit = LogPosition(sequence=7, master_snapshot=100, commits=(100,), log_snapshot=50)
    assert not nothing_to_refresh([(True, "s.orders", "s.mlog_orders", on_commit)], {"s.orders": 100})
    assert not nothing_to_refresh([], {})
    assert not nothing_to_refresh(positions, {})
