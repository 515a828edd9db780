"""refresh_method='force' (the default) without Spark: a complete refresh chosen before the
capture skips it, the view records that it reflects the master past its log, and the next
capture stops at that snapshot so that a fast refresh goes on from there (refresh/phases/force.py,
refresh/phases/capture.py, refresh/phases/mark.py)."""

from __future__ import annotations

from dbt_incremental_mv.refresh.state.bookkeeping import ViewState
from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.engine import FastRefreshEngine
from tests.unit.fake_iceberg import statement_kinds
from tests.unit.warehouse import Warehouse

MB = 1024**2


def sized(warehouse: Warehouse, name: str, total: int, added: int = 0, removed: int = 0, operation="overwrite") -> int:
    """A commit on ``name`` whose summary gives its size (and what it changed)."""
    return warehouse.fake.commit(name, operation, summary={
        "total-files-size": str(total), "total-records": str(total // 100),
        "added-files-size": str(added), "removed-files-size": str(removed),
    })


def built() -> Warehouse:
    warehouse = Warehouse("aggregate")
    sized(warehouse, "shop.orders", 100 * MB, operation="append")
    sized(warehouse, "shop.customers", 10 * MB, operation="append")
    assert warehouse.refresh().startswith("build (")
    sized(warehouse, "shop.orders", 100 * MB, operation="append")  # captured by the next refresh
    warehouse.refresh()
    sized(warehouse, "shop.v", MB, operation="replace")  # compaction: the view's size, its state looked through
    return warehouse


def state(warehouse: Warehouse) -> ViewState:
    view = warehouse.fake.load("shop.v")
    for snapshot in view.ancestry():
        if snapshot.operation != "replace":
            return ViewState.decode(snapshot.summary["wap.id"])
    raise AssertionError("no state")


def test_a_rewrite_of_most_of_a_master_is_recomputed_without_capturing_it():
    warehouse = built()
    rewrite = sized(warehouse, "shop.orders", 100 * MB, added=90 * MB, removed=90 * MB)
    line, statements, _ = warehouse.measured()
    assert line.startswith("complete (estimated "), line
    assert "capture of shop.orders not needed" in line, line
    assert not any(kind.startswith("capture") for kind in statement_kinds(warehouse.fake.statements)), statements
    # nor is the log counted or purged: the view consumes none of it (it resumes at the snapshot)
    assert statements == ["write: overwrite"], statements  # (staged through the session: no statement)
    position = state(warehouse).logs["shop.mlog_orders"]
    assert (position.uncaptured, position.master_snapshot) == (True, rewrite)


def test_the_next_capture_stops_at_the_snapshot_a_recomputed_view_reflects_and_the_view_goes_on_from_it():
    warehouse = built()
    rewrite = sized(warehouse, "shop.orders", 100 * MB, added=90 * MB, removed=90 * MB)
    warehouse.refresh()
    small = sized(warehouse, "shop.orders", 100 * MB, added=MB // 10, removed=MB // 10)
    line, statements, _ = warehouse.measured()
    assert line.startswith("fast refresh: "), line
    assert f"stopped at master snapshot {rewrite} (a view reflects it)" in line, line
    # two appends, each with its watermark: at the rewrite, then at the small commit; the
    # rewrite's changes are needed by no view (the only one reflects it): not read
    assert "skip (every view reading the log reflects master snapshot" in line, line
    assert statements[:3] == [
        "capture: append to mlog_orders", "capture: changelog of orders", "capture: append to mlog_orders",
    ], statements
    appends = [sql for sql in warehouse.fake.statements if sql.startswith("insert into `shop`.`mlog_orders`")]
    assert [f"'W', {rewrite}," in appends[0], f"'W', {small}," in appends[1]] == [True, True]
    # the rewrite's changes were skipped: only the small commit's are consumed (one count more)
    assert statements.count("mark: log counts") == 2, statements
    assert "shop.orders: mixed (+1/-1)" in line, line
    position = state(warehouse).logs["shop.mlog_orders"]
    assert (position.uncaptured, position.master_snapshot, state(warehouse).method) == (False, small, "fast")
    assert warehouse.refresh().startswith("fast refresh: nothing marked"), "nothing left to consume"


def test_a_capture_past_that_snapshot_in_one_piece_makes_the_next_refresh_complete():
    warehouse = built()
    sized(warehouse, "shop.orders", 100 * MB, added=90 * MB, removed=90 * MB)
    warehouse.refresh()
    sized(warehouse, "shop.orders", 100 * MB, added=MB // 10, removed=MB // 10)
    sized(warehouse, "shop.orders", 100 * MB, added=MB // 10, removed=MB // 10)
    fake = warehouse.fake
    spec = next(s for s in _specs(warehouse) if s.master_relation == "shop.orders")
    FastRefreshEngine(fake.query, fake.execute, fake.metadata()).capture(spec, None)  # no graph: no stops
    line = warehouse.refresh()
    assert line.startswith(
        "complete (fast refresh impossible: the change log of shop.orders was captured past master snapshot"
    ), line
    assert not state(warehouse).logs["shop.mlog_orders"].uncaptured


def test_a_capture_that_knows_the_project_stops_for_its_views():
    warehouse = built()
    rewrite = sized(warehouse, "shop.orders", 100 * MB, added=90 * MB, removed=90 * MB)
    warehouse.refresh()
    sized(warehouse, "shop.orders", 100 * MB, added=MB // 10, removed=MB // 10)
    fake = warehouse.fake
    spec = next(s for s in _specs(warehouse) if s.master_relation == "shop.orders")
    done = FastRefreshEngine(fake.query, fake.execute, fake.metadata()).capture(spec, None, warehouse.graph)
    assert f"stopped at master snapshot {rewrite}" in done, done
    assert warehouse.refresh().startswith("fast refresh: "), "the view resumes at its snapshot"


def test_a_small_change_is_captured_and_refreshed_fast():
    warehouse = built()
    sized(warehouse, "shop.orders", 1000 * MB, added=MB // 10, removed=MB // 10)  # a small change of a big master
    line, statements, _ = warehouse.measured()
    assert line.startswith("fast refresh: "), line
    assert "force: estimated" in line, line
    assert statements[:3] == ["capture: changelog of orders", "capture: append to mlog_orders", "mark: log counts"]
    assert not state(warehouse).logs["shop.mlog_orders"].uncaptured


def _specs(warehouse: Warehouse):
    from dbt_incremental_mv.logs.contract import log_specs_from_graph

    return log_specs_from_graph(warehouse.graph)


def test_mv_status_of_a_view_recomputed_past_its_log_counts_what_came_after():
    from dbt_incremental_mv.refresh.operations.status import status

    warehouse = built()
    sized(warehouse, "shop.orders", 100 * MB, added=90 * MB, removed=90 * MB)
    warehouse.refresh()
    fake = warehouse.fake

    def line() -> str:
        return status(RefreshContext(fake.query, fake.execute, fake.metadata()), warehouse.model, "shop.v", warehouse.graph).line()

    assert line() == "v: fresh"
    sized(warehouse, "shop.orders", 100 * MB, added=MB // 10, removed=MB // 10)
    assert line() == "v: stale (changes pending: shop.orders: 1 uncaptured commit(s))"
    spec = next(s for s in _specs(warehouse) if s.master_relation == "shop.orders")
    FastRefreshEngine(fake.query, fake.execute, fake.metadata()).capture(spec, None)  # past it in one piece
    assert line().startswith("v: needs rebuild (the change log of shop.orders was captured past master snapshot")


def test_mv_status_recommends_compacting_a_view_its_refreshes_left_many_delete_files_in():
    from dbt_incremental_mv.refresh.operations.status import status

    warehouse = built()
    fake = warehouse.fake

    def line() -> str:
        return status(RefreshContext(fake.query, fake.execute, fake.metadata()), warehouse.model, "shop.v", warehouse.graph).line()

    assert line() == "v: fresh"
    fake.commit("shop.v", "replace", summary={"total-data-files": "42", "total-delete-files": "5", "total-files-size": "3000000"})
    assert line() == (
        "v: fresh; compaction recommended (42 data files and 5 delete files, 2.9 MB: a full scan opens and applies "
        "them all): dbt run-operation mv_compact --args '{models: [v]}'"
    )


def _view_with_delete_files(data_files: int, delete_files: int, auto_compact: bool = True) -> Warehouse:
    """A join view of 400 MB (a rewrite leaves 7 files: due at 128 extra files) whose refreshes left
    ``data_files`` and ``delete_files``, then a small change of the orders."""
    warehouse = Warehouse("join")
    warehouse.model["config"]["auto_compact"] = auto_compact
    sized(warehouse, "shop.orders", 100 * MB, operation="append")
    sized(warehouse, "shop.customers", 10 * MB, operation="append")
    assert warehouse.refresh().startswith("build (")
    warehouse.fake.commit("shop.v", "replace", summary={
        "total-data-files": str(data_files), "total-delete-files": str(delete_files), "total-files-size": str(400 * MB),
        "total-records": "4000000",
    })
    sized(warehouse, "shop.orders", 100 * MB, added=MB // 10, removed=MB // 10)
    return warehouse


def test_force_prices_the_compaction_a_fast_refresh_would_make_due():
    # 100 files of 4 MB; the fake plans no pruning: the refresh's DELETE meets every file, which then
    # has a delete file; with its INSERT, 101 data files, 94 over 7, and 101 delete files: due
    warehouse = _view_with_delete_files(100, 9)
    line = warehouse.refresh()
    choice = warehouse.last[1].facts.cost_choice
    assert choice.fast.compaction_statements == 2, line  # rewrite_data_files, rewrite_position_delete_files
    # and the compaction rewrites the view
    assert choice.fast.bytes_compacted == 400 * MB + choice.fast.bytes_written
    assert "then compacts the view (0.39 GB rewritten)" in choice.why
    # rewriting the view's 400 MB costs more than recomputing it from 110 MB of masters
    assert line.startswith("complete (estimated "), line
    assert choice.short.endswith("s fast (its compaction with it) vs %.1f s complete" % choice.complete.seconds)
    # 10 files of 40 MB: 11 data files, 4 over 7, and 10 delete files: 14, not due
    for left in (_view_with_delete_files(10, 0), _view_with_delete_files(100, 9, auto_compact=False)):
        left.refresh()
        choice = left.last[1].facts.cost_choice
        assert (choice.fast.compaction_statements, choice.fast.bytes_compacted) == (0, 0)
        assert "compacts" not in choice.why
        assert left.last[3].startswith("fast refresh: "), left.last[3]
