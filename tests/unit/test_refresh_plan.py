import pytest

from dbt_incremental_mv.config import FastRefreshConfig
from dbt_incremental_mv.refresh_plan import FastRefreshUnavailable, decide_refresh

FORCE, FAST, COMPLETE = (FastRefreshConfig(m) for m in ("force", "fast", "complete"))


def decide(config, existing="table", full_refresh=False, blocker=None):
    return decide_refresh("v", config, existing_type=existing, full_refresh=full_refresh, fast_refresh_blocker=blocker)


@pytest.mark.parametrize("config", [FORCE, FAST, COMPLETE])
def test_first_run_builds_whatever_the_method(config):
    decision = decide(config, existing=None, blocker="anything")
    assert decision.action == "build"
    assert "first run" in decision.reason


@pytest.mark.parametrize("config", [FORCE, FAST, COMPLETE])
def test_full_refresh_rebuilds(config):
    assert decide(config, full_refresh=True, blocker="x").action == "build"


def test_existing_view_is_replaced():
    decision = decide(FORCE, existing="view")
    assert decision.action == "build"
    assert "view" in decision.reason


def test_complete_method_always_recomputes():
    assert decide(COMPLETE).action == "complete"


@pytest.mark.parametrize("config", [FORCE, FAST])
def test_fast_when_possible(config):
    assert decide(config).action == "fast"


def test_force_falls_back_to_complete_and_says_why():
    decision = decide(FORCE, blocker="the log of shop.orders is missing")
    assert decision.action == "complete"
    assert "the log of shop.orders is missing" in decision.reason


def test_fast_method_fails_when_fast_refresh_is_impossible():
    with pytest.raises(FastRefreshUnavailable, match="cannot be fast refreshed: no log.*refresh_method='force'"):
        decide(FAST, blocker="no log")
