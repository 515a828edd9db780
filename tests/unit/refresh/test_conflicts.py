"""Concurrent commits: Iceberg refusing one is told apart from other errors, in one line; an
incremental refresh is published only on the view snapshot it read its state from."""

import pytest

from dbt_incremental_mv.refresh.state.bookkeeping import LogPosition, ViewState
from dbt_incremental_mv.conflicts import LOST_RACE, concurrent_commit_error, lost_race
from dbt_incremental_mv.metadata import Snapshot
from dbt_incremental_mv.refresh.engine import ConcurrentRefreshError, FastRefreshEngine
from tests.unit.fake_iceberg import FakeIceberg

THRIFT_MERGE = (
    "Database Error\n  org.apache.hive.service.cli.HiveSQLException: Error running query: "
    "org.apache.iceberg.exceptions.ValidationException: Found conflicting files that can contain records "
    "matching true: [/w/shop/v/data/00000-1.parquet]\n\tat org.apache.spark.sql.Dataset.<init>(Dataset.scala:220)"
)
SESSION_COMMIT = "org.apache.iceberg.exceptions.CommitFailedException: Table metadata refresh is required"


@pytest.mark.parametrize("text", [THRIFT_MERGE, SESSION_COMMIT])
def test_a_refused_concurrent_commit_becomes_one_line_that_says_so(text):
    message = concurrent_commit_error(text)
    assert message is not None and "\n" not in message
    assert LOST_RACE in message and "rerun" in message
    assert "Iceberg: " in message and message.split("Iceberg: ", 1)[1] in text


@pytest.mark.parametrize("text", [
    "[TABLE_OR_VIEW_NOT_FOUND] The table or view `shop`.`orders` cannot be found.",
    "org.apache.iceberg.exceptions.ValidationException: Cannot find field 'x' in struct",
    "[DIVIDE_BY_ZERO] Division by zero.",
])
def test_other_errors_are_left_alone(text):
    assert concurrent_commit_error(text) is None
    assert not lost_race(RuntimeError(text))


def test_lost_race_recognises_reported_refusals_and_failed_fast_forwards():
    assert lost_race(RuntimeError(concurrent_commit_error(SESSION_COMMIT)))
    assert lost_race(RuntimeError(THRIFT_MERGE))
    assert lost_race(RuntimeError("Cannot fast-forward: main is not an ancestor of mv_capture_1"))


# --- publishing an incremental refresh: only on the view snapshot its state was read from ---


def _publish(state, staged_parent):
    fake = FakeIceberg()
    fake.table("shop.v", [("a", "int")])
    fake.tables["shop.v"].snapshots.clear()
    fake.tables["shop.v"].refs["main"] = 600
    for snapshot_id, parent in ((500, None), (600, 500)):
        fake.tables["shop.v"].snapshots[snapshot_id] = Snapshot(snapshot_id, parent, "append")
    fake.tables["shop.v"].snapshots[900] = Snapshot(900, staged_parent, "overwrite", {"wap.id": state.encode()})
    if staged_parent == 500:
        fake.tables["shop.v"].refs["main"] = 500
    FastRefreshEngine(fake.query, fake.execute, fake.metadata()).publish("shop.v", state.encode())
    return fake.commits


FAST = ViewState(logs={"shop.mlog_o": LogPosition(7, 100)}, method="fast", base=500)


def test_a_fast_refresh_staged_on_another_refreshs_commit_is_not_published():
    with pytest.raises(ConcurrentRefreshError, match="another refresh of shop.v committed while this one ran"):
        _publish(FAST, staged_parent=600)  # another refresh published 600 on 500 meanwhile


def test_a_fast_refresh_staged_on_the_snapshot_it_read_is_fast_forwarded():
    commits = _publish(FAST, staged_parent=500)
    assert commits == ["fast_forward shop.v -> 900"], commits


def test_a_complete_refresh_recomputes_and_is_published_on_any_snapshot():
    complete = ViewState(logs=FAST.logs, method="complete", base=500)
    assert _publish(complete, staged_parent=600) == ["fast_forward shop.v -> 900"]


def test_a_publish_whose_main_moved_meanwhile_is_refused_and_changes_nothing():
    complete = ViewState(logs=FAST.logs, method="complete", base=500)
    with pytest.raises(ConcurrentRefreshError):
        _publish_moved(complete)


def _publish_moved(state):
    fake = FakeIceberg()
    fake.table("shop.v", [("a", "int")])
    staged = fake.commit("shop.v", "overwrite", branch=None, summary={"wap.id": state.encode()})
    fake.commit("shop.v", "replace")  # main moved after the refresh staged its commit
    FastRefreshEngine(fake.query, fake.execute, fake.metadata()).publish("shop.v", state.encode())
    assert staged


# --- a refresh of several writes: a write branch made where the state was read ---


def _branch_refresh(main_moves: bool):
    """A DELETE on the write branch, an INSERT staged on it, then the publish."""
    fake = FakeIceberg()
    fake.table("shop.v", [("a", "int")])
    base = fake.tables["shop.v"].refs["main"]
    state = ViewState(logs={"shop.mlog_t": LogPosition(7, 3)}, method="fast", base=base)
    fake.create_branch("shop.v", "mv_write_1", base)
    fake.execute("delete from `shop`.`v`.`branch_mv_write_1` where true")
    fake.execute(f"set spark.wap.id={state.encode()}")
    fake.execute("insert into `shop`.`v`.`branch_mv_write_1` values (1)")
    fake.execute("reset spark.wap.id")
    if main_moves:
        fake.commit("shop.v", "replace")  # a compaction, or another refresh, lands first
    engine = FastRefreshEngine(fake.query, fake.execute, fake.metadata())
    run = type("Run", (), {"write_branch": "mv_write_1", "context": None})()  # what publish reads of a RefreshRun
    return fake, base, lambda: engine.publish("shop.v", state.encode(), run)


def test_a_branch_refresh_publishes_every_write_in_one_move_and_drops_its_branch():
    fake, base, publish = _branch_refresh(main_moves=False)
    summary = publish()
    table = fake.tables["shop.v"]
    published = table.snapshots[table.refs["main"]]
    assert "wap.id" in published.summary and table.snapshots[published.parent_id].parent_id == base
    assert set(table.refs) == {"main"}
    # the staged write's counts and the branch's, added up, its totals (the fake's: records only), and the snapshot published
    assert summary == {"added-records": "1", "total-records": "0", "snapshot-id": str(table.refs["main"])}


def test_a_branch_refresh_that_loses_the_race_changes_nothing_and_drops_its_branch():
    fake, base, publish = _branch_refresh(main_moves=True)
    main = fake.tables["shop.v"].refs["main"]
    with pytest.raises(ConcurrentRefreshError, match="committed while this one ran"):
        publish()
    assert fake.tables["shop.v"].refs == {"main": main}


def test_write_branches_left_by_killed_refreshes_are_recognised_by_age():
    from dbt_incremental_mv.refresh.phases.publish import STALE_BRANCH_MS, stale_write_branches, write_branch

    now = 1_800_000_000_000
    fresh, old = write_branch(now - 1000), write_branch(now - STALE_BRANCH_MS - 1)
    assert fresh != write_branch(now - 1000)  # unique even within a millisecond
    assert stale_write_branches([fresh, old, "audit", "mv_capture_12"], now) == [old]
