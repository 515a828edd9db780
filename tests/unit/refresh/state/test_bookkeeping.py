from dbt_incremental_mv.refresh.state.bookkeeping import PREFIX, LogPosition, ViewState


def test_round_trip_and_deterministic():
    state = ViewState(logs={"shop.mlog_b": LogPosition(7, 123), "shop.mlog_a": LogPosition(3, None)}, method="fast")
    encoded = state.encode()
    assert encoded.startswith(PREFIX)
    assert encoded == ViewState(logs=dict(reversed(list(state.logs.items()))), method="fast").encode()
    assert ViewState.decode(encoded) == state
    assert set(encoded[len(PREFIX):]) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_foreign_or_broken_ids_decode_to_none():
    assert ViewState.decode(None) is None
    assert ViewState.decode("someone-elses-wap-id") is None
    assert ViewState.decode(PREFIX + "not base64 json!") is None


def test_the_base_snapshot_makes_ids_of_identical_refreshes_differ():
    first = ViewState(logs={"l": LogPosition(1, 2)}, method="complete", base=10)
    second = ViewState(logs={"l": LogPosition(1, 2)}, method="complete", base=11)
    assert first.encode() != second.encode()
    assert ViewState.decode(second.encode()).base == 11


def test_two_refreshes_from_the_same_state_stage_distinct_wap_ids():
    """Racing refreshes each find and publish their own staged snapshot, never the other's."""
    from dbt_incremental_mv.refresh.phases.publish import commit_state

    marked = {}
    first, second = commit_state(marked, "fast", base=41), commit_state(marked, "fast", base=41)
    assert first.encode() != second.encode()
    assert ViewState.decode(first.encode()) == first
    # a state recorded before runs were named still decodes
    old = ViewState(logs={"s.mlog_t": LogPosition(3, 9)}, method="fast", base=41)
    assert ViewState.decode(old.encode()) == old and old.run is None


def test_a_position_past_its_log_round_trips_and_older_ids_decode_as_captured():
    """A complete refresh that skipped the capture records the master snapshot it reflects past
    the log; ids written before the flag existed (four elements or fewer) decode without it."""
    past = ViewState(logs={"l": LogPosition(4, 99, uncaptured=True), "m": LogPosition(5, 7, log_snapshot=3)})
    assert ViewState.decode(past.encode()) == past
    assert ViewState.decode(ViewState(logs={"l": LogPosition(4, 99, log_snapshot=8)}).encode()).logs["l"].uncaptured is False


def test_the_time_a_views_rows_reflect_round_trips_and_older_ids_have_none():
    state = ViewState(logs={"s.l": LogPosition(3, 7)}, method="fast", base=1, clock="2026-12-01 09:00:00")
    assert ViewState.decode(state.encode()) == state
    assert ViewState.decode(ViewState(logs={"s.l": LogPosition(3, 7)}).encode()).clock is None


def test_a_view_in_steps_records_its_internal_states_and_older_states_read_without():
    state = ViewState(logs={"l": LogPosition(1, 2)}, method="fast", states=("shop.v__mv_state_a", "shop.v__mv_state_b"))
    assert ViewState.decode(state.encode()) == state
    plain = ViewState(logs={"l": LogPosition(1, 2)}, method="fast")
    assert "states" not in plain.encode() and ViewState.decode(plain.encode()).states == ()
