"""Which of a view's snapshots a refresh expires (refresh/phases/expire.py), without Spark."""

from dbt_incremental_mv.metadata import Snapshot, TableMetadata
from dbt_incremental_mv.refresh.phases import expire

DAY = 24 * 60 * 60 * 1000
NOW = 1_800_000_000_000


def table(operations, properties=None, branches=None, minutes_apart=10, unreferenced=()):
    """A view whose main has one snapshot per operation, oldest first, ``minutes_apart`` apart and
    the newest at NOW."""
    snapshots = {}
    for index, operation in enumerate(operations):
        snapshots[index + 1] = Snapshot(
            index + 1,
            index or None,
            operation,
            timestamp_ms=NOW - (len(operations) - 1 - index) * minutes_apart * 60_000,
        )
    for snapshot_id, parent, age_ms in unreferenced:
        snapshots[snapshot_id] = Snapshot(snapshot_id, parent, "overwrite", timestamp_ms=NOW - age_ms)
    return TableMetadata("s.v", (("a", "bigint"),), properties or {}, snapshots, len(operations), branches or {})


def test_nothing_is_due_below_the_batch_or_within_the_age():
    # 99 snapshots over a day (10 minutes apart): those older than a day are fewer than the batch
    assert expire.expiry("s.v", table(["overwrite"] * 99), NOW) is None
    assert expire.expiry("s.v", table(["overwrite"] * 300, minutes_apart=1), NOW) is None  # all within the day


def test_the_snapshots_past_the_age_are_due_and_the_statement_names_them():
    planned = expire.expiry("s.v", table(["overwrite"] * 300), NOW)
    assert planned is not None
    assert planned.due == 300 - (DAY // 600_000 + 1)  # those younger than a day stay (145 of 300)
    assert planned.retain_last == 1 and planned.older_than_ms == NOW - DAY
    assert planned.statement == (
        "call system.expire_snapshots(table => '`s`.`v`', older_than => timestamp '2027-01-14 08:00:00.000Z', "
        "retain_last => 1)"
    )


def test_the_snapshot_holding_the_state_and_the_compactions_after_it_are_kept():
    # an age of 0: everything but what must stay is due; the state is 3 replace commits back
    view = table(["overwrite"] * 200 + ["replace"] * 3, {expire.AGE_PROPERTY: "0"})
    planned = expire.expiry("s.v", view, NOW)
    assert planned is not None and planned.retain_last == 4 and planned.due == 199


def test_the_view_properties_decide():
    view = table(["overwrite"] * 300, {expire.AGE_PROPERTY: str(7 * DAY)})
    assert expire.expiry("s.v", view, NOW) is None  # a week of snapshots kept
    view = table(["overwrite"] * 300, {expire.AGE_PROPERTY: "0", expire.KEEP_PROPERTY: "250"})
    assert expire.expiry("s.v", view, NOW) is None  # 50 due: fewer than the batch
    view = table(["overwrite"] * 400, {expire.AGE_PROPERTY: "0", expire.KEEP_PROPERTY: "250"})
    planned = expire.expiry("s.v", view, NOW)
    assert planned is not None and planned.retain_last == 250 and planned.due == 150
    assert expire.expiry("s.v", table(["overwrite"] * 300, {expire.GC_PROPERTY: "false"}), NOW) is None
    view = table(["overwrite"] * 300, {expire.AGE_PROPERTY: "not a number"})
    assert expire.expiry("s.v", view, NOW).older_than_ms == NOW - expire.EXPIRE_AGE_MS


def test_a_staged_branch_and_recent_unreferenced_snapshots_are_not_counted():
    # a refresher staging on a branch from snapshot 5 (old): its head stays; an unreferenced snapshot
    # of an hour ago stays (younger than the age), one of two days ago goes
    view = table(
        ["overwrite"] * 300,
        branches={"mv_write_1": 1001},
        unreferenced=[(1001, 5, 2 * DAY), (1002, 6, 3_600_000), (1003, 7, 2 * DAY)],
    )
    plain = expire.expiry("s.v", table(["overwrite"] * 300), NOW)
    planned = expire.expiry("s.v", view, NOW)
    assert planned is not None and plain is not None
    assert planned.due == plain.due + 1  # 1003 goes; 1001 (a branch head) and 1002 (recent) stay


def test_after_a_complete_refresh_or_a_build_any_due_snapshot_goes():
    from dbt_incremental_mv.refresh.phases.decide import RefreshAction

    view = table(["overwrite"] * 150)  # 5 older than a day
    assert expire.expiry("s.v", view, NOW) is None
    for action in (RefreshAction.COMPLETE, RefreshAction.BUILD):
        planned = expire.expiry("s.v", view, NOW, action)
        assert planned is not None and planned.due == 5


def test_over_sql_one_refresh_in_ten_reads_the_metadata():
    assert all(expire.checked(True, snapshot) for snapshot in range(1, 50))
    assert [snapshot for snapshot in range(1, 50) if expire.checked(False, snapshot)] == [10, 20, 30, 40]


def test_explain_describes_the_history():
    assert expire.describe(table(["overwrite"] * 300), NOW) == (
        "300 snapshots; a refresh expires those older than 24 h (history.expire.max-snapshot-age-ms) once 100 are "
        "due (155 now), never the one holding the view's state"
    )
    assert expire.describe(table(["overwrite"] * 3, {expire.GC_PROPERTY: "false"}), NOW) == (
        "3 snapshots; gc.enabled=false: never expired"
    )
