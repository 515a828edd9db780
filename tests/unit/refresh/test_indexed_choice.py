"""indexed_state='auto': the record of what a join view's refreshes changed, and the priced choice
(refresh/indexed_choice.py). The sizes below are those of the TPC-H benchmark's 3-way join
(docs/benchmarks.md, An indexed join state): its facts' data files at scale factors 1 and 10."""

import pytest

from dbt_incremental_mv.config import IndexedState
from dbt_incremental_mv.refresh.cost import Calibration, calibration
from dbt_incremental_mv.refresh.indexed_choice import HORIZON, MIN_RECORDED, WINDOW, Changed, choose, recorded

GB = 1024**3
SF1_FACTS, SF1_VIEW = int(0.116 * GB), int(0.09 * GB)
SF10_FACTS, SF10_VIEW = int(1.2 * GB), int(0.19 * GB)
DIMENSION_LOGS = ("s.mlog_customer",)


def test_each_fast_refresh_adds_a_letter_for_what_it_changed_and_the_record_keeps_the_newest():
    assert recorded("", ["s.mlog_customer"], DIMENSION_LOGS) == Changed.DIMENSION.value
    assert recorded("d", ["s.mlog_orders", "s.mlog_lineitem"], DIMENSION_LOGS) == "df"
    assert recorded("df", ["s.mlog_orders", "s.mlog_customer"], DIMENSION_LOGS) == "dfb"
    assert recorded("dfb", [], DIMENSION_LOGS) == "dfb"  # nothing marked: nothing recorded
    assert recorded("dfb", ["s.mlog_orders"], ()) == "dfb"  # no dimension to record (not a candidate)
    full = "f" * WINDOW
    assert recorded(full, ["s.mlog_customer"], DIMENSION_LOGS) == "f" * (WINDOW - 1) + "d"


def auto(record, kept=False, facts=SF10_FACTS, view=SF10_VIEW, prices=None):
    return choose(IndexedState.AUTO, kept, record, "customer", facts, view, prices or calibration())


def test_a_forced_setting_is_the_choice_whatever_the_record():
    assert choose(IndexedState.ON, False, "f" * 16, "customer", 1, 1, calibration()).keep
    assert not choose(IndexedState.OFF, True, "d" * 16, "customer", SF10_FACTS, 1, calibration()).keep


def test_auto_keeps_what_it_has_until_enough_refreshes_are_recorded_or_the_facts_size_is_known():
    for kept in (False, True):
        short = auto("d" * (MIN_RECORDED - 1), kept=kept)
        assert short.keep is kept and f"until {MIN_RECORDED} fast refreshes are recorded" in short.reason
        assert auto("d" * WINDOW, kept=kept, facts=None).keep is kept


@pytest.mark.parametrize(
    ("record", "facts", "view", "kept", "keep", "verdict"),
    [
        # the dimension changing alone: the state pays at both scales (measured 27x and 2.7x)
        ("d" * WINDOW, SF10_FACTS, SF10_VIEW, False, True, "built now"),
        ("d" * WINDOW, SF1_FACTS, SF1_VIEW, False, True, "built now"),
        # every refresh changing both: the state's own refresh costs more than it saves (measured:
        # the state lost at scale factor 1, and at 10 with compaction set apart)
        ("b" * WINDOW, SF10_FACTS, SF10_VIEW, False, False, "not kept"),
        ("b" * WINDOW, SF1_FACTS, SF1_VIEW, True, False, "dropped now"),
        # facts alone: never worth a state
        ("f" * WINDOW, SF10_FACTS, SF10_VIEW, False, False, "not kept"),
        ("f" * WINDOW, SF10_FACTS, SF10_VIEW, True, False, "dropped now"),
        # a small view: nothing to save, whatever changes
        ("d" * WINDOW, 10_000, 5_000, False, False, "not kept"),
    ],
)
def test_auto_prices_the_record(record, facts, view, kept, keep, verdict):
    choice = auto(record, kept=kept, facts=facts, view=view)
    assert choice.keep is keep
    assert choice.reason.startswith(
        f"indexed_state=auto: the state is {verdict}: of the last {len(record)} fast refreshes"
    )


def test_a_record_about_even_does_not_switch_either_way():
    """A switch's rebuild must be repaid within HORIZON refreshes: where the record's net per refresh
    repays neither switch, the view stays as it is (no switching back and forth)."""
    prices = calibration()
    saved = SF10_FACTS / GB * prices.seconds_per_gb_read
    per_gb = prices.seconds_per_gb_scanned + prices.seconds_per_gb_read + prices.seconds_per_gb_shuffled
    paid = 4 * prices.seconds_per_statement + SF10_FACTS / GB * per_gb
    record = "dddf" * (WINDOW // 4)  # the customers changing alone three times in four
    per_refresh = (12 * saved - 4 * paid) / 16 - prices.fast_fixed_seconds
    switch_on = (SF10_FACTS + SF10_VIEW) / GB * prices.rebuilt_per_gb
    switch_off = SF10_FACTS / GB * prices.seconds_per_gb_read + SF10_VIEW / GB * prices.rebuilt_per_gb
    assert abs(per_refresh) * HORIZON < min(switch_on, switch_off)
    assert not auto(record).keep
    assert auto(record, kept=True).keep


def test_the_prices_are_the_cost_model_s():
    cheap_reads = Calibration(**{**calibration().__dict__, "seconds_per_gb_read": 0.01})
    assert auto("d" * WINDOW).keep and not auto("d" * WINDOW, prices=cheap_reads).keep
