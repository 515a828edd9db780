import pytest

from dbt_incremental_mv.config import FastRefreshConfig
from dbt_incremental_mv.refresh.engine import FastRefreshEngine
from dbt_incremental_mv.definition import DEFINITION_PROPERTY, defining_query
from dbt_incremental_mv.logs.contract import log_specs_from_graph, logs_by_master
from dbt_incremental_mv.refresh.phases.decide import FastRefreshUnavailable, PlanFacts, RefreshAction, decide_refresh
from dbt_incremental_mv.refresh.units import internal_states
from tests.unit.warehouse import SPLIT_IN_TWO, Warehouse

FORCE, FAST, COMPLETE = (FastRefreshConfig(m) for m in ("force", "fast", "complete"))


def decide(config, existing="table", full_refresh=False, blocker=None):
    return decide_refresh("v", config, PlanFacts(existing, full_refresh, blocker))


@pytest.mark.parametrize("config", [FORCE, COMPLETE])
def test_first_run_builds_with_force_and_complete_even_when_fast_refresh_is_impossible(config):
    decision = decide(config, existing=None, blocker="anything")
    assert decision.action == "build"
    assert "first run" in decision.reason


@pytest.mark.parametrize("config", [FORCE, FAST, COMPLETE])
def test_first_run_builds_a_fast_refreshable_view(config):
    assert decide(config, existing=None).action == "build"


@pytest.mark.parametrize("config", [FORCE, COMPLETE])
def test_full_refresh_rebuilds(config):
    assert decide(config, full_refresh=True, blocker="x").action == "build"
    assert decide(FAST, full_refresh=True).action == "build"


@pytest.mark.parametrize("existing, full_refresh", [(None, False), ("table", True), ("view", False)])
def test_fast_method_refuses_to_build_a_view_it_could_never_fast_refresh(existing, full_refresh):
    with pytest.raises(FastRefreshUnavailable, match="cannot be fast refreshed: rand"):
        decide(FAST, existing=existing, full_refresh=full_refresh, blocker="rand(): non-deterministic")


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
    assert decision.blocker == "the log of shop.orders is missing"  # the adapter warns with it


def test_only_a_recompute_forced_by_a_blocker_carries_it():
    assert decide(COMPLETE, blocker="x").blocker is None  # asked for
    assert decide(FORCE, existing=None, blocker="x").blocker is None  # the first build
    assert decide(FORCE).blocker is None


def test_fast_method_fails_when_fast_refresh_is_impossible():
    with pytest.raises(FastRefreshUnavailable, match="cannot be fast refreshed: no log.*refresh_method='force'"):
        decide(FAST, blocker="no log")


@pytest.mark.parametrize(
    "blocker, expected",
    [
        ("no log", "no log. Set"),
        ("no log.", "no log. Set"),
        ("no log. ", "no log. Set"),
        # an analysis refusal: construct, reason and hint, the hint ending with its full stop
        (
            "cannot fast refresh: rand(): non-deterministic. Move it downstream.",
            "non-deterministic. Move it downstream. Set",
        ),
        # a hint ending in an ellipsis keeps it, and gets no fourth dot
        ("self-join. Alias each occurrence, e.g. t AS a JOIN t AS b ON ...", "ON ... Set"),
    ],
)
def test_refusal_message_joins_the_blocker_and_the_advice_with_one_full_stop(blocker, expected):
    with pytest.raises(FastRefreshUnavailable) as refused:
        decide(FAST, blocker=blocker)
    message = str(refused.value)
    assert message.startswith("Model 'v' cannot be fast refreshed: ")
    assert f"{expected} refresh_method='force'" in message, message
    assert "..." in blocker or ".." not in message, message


def test_a_view_deletes_without_a_shuffle_by_data_file_in_format_2_only():
    from dbt_incremental_mv.refresh.phases.plan import DELETE_DISTRIBUTION, view_defaults

    assert view_defaults({})[DELETE_DISTRIBUTION] == "none"
    assert view_defaults({"format-version": "2"})[DELETE_DISTRIBUTION] == "none"
    # deletion vectors: every delete of a data file from one task (Iceberg's hash distribution)
    assert DELETE_DISTRIBUTION not in view_defaults({"format-version": "3"})
    assert DELETE_DISTRIBUTION not in view_defaults({"format-version": "x"})


def test_rows_that_crossed_a_views_time_boundary_recompute_it_without_a_warning():
    from dbt_incremental_mv.refresh.phases.clock import Crossing
    from dbt_incremental_mv.refresh.phases.decide import RunFacts

    crossed = RunFacts(clock_crossed=Crossing("rows crossed the view's time boundary (shop.orders: ...)", {"o": "..."}))
    decision = decide_refresh("v", FORCE, PlanFacts("table"), crossed)
    assert decision.action == "complete" and decision.reason.startswith("rows crossed the view's time boundary")
    assert decision.blocker is None  # expected of a view that reads the clock: `--warn-error` passes
    with pytest.raises(FastRefreshUnavailable, match="crossed the view's time boundary"):
        decide_refresh("v", FAST, PlanFacts("table"), crossed)
    # a join view applies them as changes: fast, whatever the method
    for config in (FORCE, FAST):
        assert decide_refresh("v", config, PlanFacts("table", crossings_applied=True), crossed).action == "fast"


def test_a_clock_read_elsewhere_that_moved_is_a_fallback_with_its_reason():
    facts = PlanFacts("table", clock_moved="the view reads the clock in a selected value, and its time moved")
    decision = decide_refresh("v", FORCE, facts)
    assert decision.action == "complete" and decision.blocker == facts.clock_moved


def test_a_refused_query_that_splits_is_maintained_in_steps():
    warehouse = Warehouse("join")
    fake = warehouse.fake
    engine = FastRefreshEngine(fake.query, fake.execute, fake.metadata())
    run = engine.plan(warehouse.model, SPLIT_IN_TWO, "shop.v", None, False, warehouse.graph)
    assert run.plan.action == RefreshAction.IN_STEPS and run.plan.facts.blocker is None
    assert run.plan.reason.startswith("maintained in 2 steps: the internal state latest (a ranked view, key customer_id")
    state, top = run.plan.units
    # the state: a fast_refresh model of its own that logs its changes, reading only the master it reads
    assert state.identifier == "v__mv_state_latest" and state.model["name"] == "v__mv_state_latest"
    # keyed by a column of its own never NULL (a PARTITION BY column may be NULL; a log matches keys by value)
    assert state.model["config"]["mv_log"] is True and state.model["config"]["unique_key"] == ["mv_state_key"]
    assert "TO_JSON(ARRAY(CAST(customer_id AS STRING))) AS mv_state_key" in state.sql
    assert state.model["depends_on"]["nodes"] == ["source.p.shop.orders"]
    assert "row_number() over" in state.sql.lower() and "`shop`.`orders`" not in state.sql  # (as the model reads it)
    logs = logs_by_master(log_specs_from_graph(state.graph))
    assert logs["shop.v__mv_state_latest"].log_relation == "shop.v__mv_state_latest__log"
    assert logs["shop.v__mv_state_latest"].key == ("mv_state_key",) and logs["shop.v__mv_state_latest"].capture
    # the view: the query over the state, recording it in its commits
    assert top.identifier == "v" and "FROM `shop`.`v__mv_state_latest` AS l JOIN shop.customers" in top.sql
    assert sorted(top.model["depends_on"]["nodes"]) == ["model.mv.v__mv_state_latest", "source.p.shop.customers"]
    assert internal_states(top.model) == ("shop.v__mv_state_latest",)
    orders = dict(fake.columns("shop.orders"))
    columns = [(c, orders[c]) for c in ("customer_id", "order_id", "amount")] + [("mv_state_key", "string")]
    fake.table("shop.v__mv_state_latest", columns)  # (built)
    planned = engine.plan(top.model, top.sql, "shop.v", None, False, top.graph).plan
    assert planned.internal_states == ("shop.v__mv_state_latest",) and planned.definition is not None
    # the view stores the query over its state (its definition) and the model's own (what it must equal)
    assert planned.tblproperties[DEFINITION_PROPERTY] == top.sql
    assert defining_query(planned.tblproperties) == SPLIT_IN_TWO


def test_a_query_that_splits_but_is_always_recomputed_says_how_in_the_refusal():
    warehouse = Warehouse("join")
    warehouse.model["config"]["refresh_method"] = "complete"
    fake = warehouse.fake
    engine = FastRefreshEngine(fake.query, fake.execute, fake.metadata())
    run = engine.plan(warehouse.model, SPLIT_IN_TWO, "shop.v", None, False, warehouse.graph)
    assert run.plan.action == RefreshAction.BUILD and not run.plan.units
    assert run.plan.facts.blocker is not None and run.plan.facts.blocker.endswith(
        "It can be fast refreshed in 2 steps: make the CTE latest (a ranked view, key customer_id, with the CTE ranked it reads) "
        "a fast_refresh model of its own with mv_log=true, declare its change log as a source (meta.mv_log with that key) and "
        "read it here with ref(): the query over it is then an aggregate view"
    ), run.plan.facts.blocker


def test_a_view_written_by_another_shape_of_refresh_is_rebuilt_once_whatever_on_configuration_change():
    """indexed_state switching (refresh/indexed_choice.py): the model's query is the same, the view
    was written as one join and is now read from its state, or the other way; a rebuild, not a
    definition change (on_configuration_change='fail' is about the user's SQL)."""
    from dbt_incremental_mv.refresh.phases.plan import reshaping
    from dbt_incremental_mv.refresh.units import INTERNAL_STATES, MODEL_QUERY

    query, over_state = "select * from a join b on a.k = b.k", "select * from a join s on a.k = s.k"
    plain_model = {"name": "v"}
    view_unit = {"name": "v", INTERNAL_STATES: ["s.v__mv_state_by_k"], MODEL_QUERY: query}
    # written as one join, now read from the state; and back
    assert (
        reshaping(query, query, over_state, view_unit)
        == "the view is now read from its internal state: rebuilt once over it"
    )
    assert reshaping(over_state, query, query, plain_model).startswith("the view is now maintained as one view")
    # the same shape, or the model's SQL itself changed (a definition change), or nothing stored: none
    assert reshaping(query, query, query, plain_model) is None
    assert reshaping(over_state, query, over_state, view_unit) is None
    assert reshaping(over_state, "select 1", query, plain_model) is None
    assert reshaping(None, None, query, plain_model) is None
    fail = FastRefreshConfig(on_configuration_change="fail")
    decision = decide_refresh("v", fail, PlanFacts("table", reshaped="the view is now read from its internal state"))
    assert decision.action == RefreshAction.BUILD and decision.reason == "the view is now read from its internal state"
