from dbt_incremental_mv.logs.capture import SnapshotInfo, plan_capture


def chain(*ids, deletes=()):
    infos, parent = [], None
    for i in ids:
        infos.append(SnapshotInfo(i, parent, 1 if i in deletes else 0, 1 if any(d <= i for d in deletes) else 0))
        parent = i
    return infos


def test_nothing_to_do_when_up_to_date_or_empty():
    assert plan_capture(3, True, 3, chain(1, 2, 3)).method == "none"
    assert plan_capture(None, True, None, []).method == "none"


def test_copy_on_write_history_uses_the_changelog():
    plan = plan_capture(1, True, 3, chain(1, 2, 3))
    assert (plan.method, plan.start, plan.end) == ("changelog", 1, 3)
    assert "2 new master commit" in plan.reason


def test_from_the_beginning_when_the_log_has_no_watermark():
    plan = plan_capture(None, False, 2, chain(1, 2))
    assert (plan.method, plan.start, plan.end) == ("changelog", None, 2)


def test_a_watermark_of_an_empty_master_captures_everything():
    plan = plan_capture(None, True, 2, chain(1, 2))
    assert (plan.method, plan.start) == ("changelog", None)


def test_delete_files_switch_to_the_snapshot_diff():
    assert plan_capture(1, True, 3, chain(1, 2, 3, deletes=(3,))).method == "diff"
    assert plan_capture(2, True, 3, chain(1, 2, 3, deletes=(2,))).method == "diff"  # older delete files still live


def test_broken_history_resets():
    assert plan_capture(7, True, 3, chain(1, 2, 3)).method == "reset"  # not an ancestor
    assert plan_capture(1, True, 3, chain(2, 3)[1:]).method == "reset"  # snapshot 2 expired
    expired_start = [SnapshotInfo(3, 2, 1, 1), SnapshotInfo(2, 1, 0, 0)]
    assert plan_capture(1, True, 3, expired_start).method == "reset"  # the diff needs the start snapshot
