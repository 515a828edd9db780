"""A view maintained in steps (refresh/units.py): the units it is refreshed as, and what whoever
purges or captures a log counts of them."""

from dbt_incremental_mv.analysis.states import relations_read, with_state_relations
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.phases.capture import consumers_stops
from dbt_incremental_mv.refresh.phases.publish import commit_state
from dbt_incremental_mv.refresh.state.bookkeeping import LogPosition, ViewState
from dbt_incremental_mv.refresh.state.view_state import consumer_states
from dbt_incremental_mv.refresh.units import is_state_relation, retired_states, state_identifier
from tests.unit.fake_iceberg import FakeIceberg


def test_the_states_are_read_from_their_tables_and_the_masters_as_written():
    sql = "select s.k, count(*) as n from mv_state.latest s join shop.customers c on s.k = c.k group by s.k"
    placed = with_state_relations(sql, {"latest": "shop.v__mv_state_latest"})
    assert "FROM `shop`.`v__mv_state_latest` AS s JOIN shop.customers AS c" in placed
    assert relations_read(placed) == {"shop.v__mv_state_latest", "shop.customers"}
    # a CTE is not a table; the session catalog's name is dropped, as dbt's graph names relations
    assert relations_read("with a as (select * from spark_catalog.shop.orders) select * from a") == {"shop.orders"}


def test_states_a_view_no_longer_reads_are_retired_and_only_states():
    assert state_identifier("V", "Latest") == "v__mv_state_latest" and is_state_relation("shop.v__mv_state_latest")
    previous = ("shop.v__mv_state_a", "shop.v__mv_state_b", "shop.customers")
    assert retired_states(previous, ("shop.v__mv_state_b",)) == ["shop.v__mv_state_a"]  # never a table of the user's
    assert retired_states((), ("shop.v__mv_state_b",)) == []


def _commit(fake: FakeIceberg, name: str, state: ViewState) -> None:
    table = fake.table(name, [("k", "bigint")])
    fake.commit(name, "overwrite", summary={"wap.id": state.encode()})
    assert table.name == name


def test_what_a_view_in_steps_consumed_is_what_its_states_consumed():
    fake = FakeIceberg()
    # the view reads only its state's log; its state reads the master's log for it
    _commit(fake, "shop.v", ViewState(logs={"shop.v__mv_state_a__log": LogPosition(4, 1)}, states=("shop.v__mv_state_a",)))
    _commit(fake, "shop.v__mv_state_a", ViewState(logs={"shop.mlog_orders": LogPosition(7, 2)}))
    states = consumer_states(fake.metadata(), "shop.v")
    assert [s.logs for s in states] == [
        {"shop.v__mv_state_a__log": LogPosition(4, 1)},
        {"shop.mlog_orders": LogPosition(7, 2)},
    ]
    assert consumer_states(fake.metadata(), "shop.missing") == []


def test_the_view_commits_name_their_states():
    assert commit_state({}, "fast", base=3, states=("shop.v__mv_state_a",)).states == ("shop.v__mv_state_a",)


def test_a_capture_stops_where_the_states_of_a_view_in_steps_reflect_the_master():
    fake = FakeIceberg()
    _commit(fake, "shop.v", ViewState(logs={}, states=("shop.v__mv_state_a",)))
    # the state was recomputed past the log, at master snapshot 42: a capture stops there
    _commit(fake, "shop.v__mv_state_a", ViewState(logs={"shop.mlog_orders": LogPosition(7, 42, uncaptured=True)}))
    spec = LogSpec("logs.mlog_orders", "shop.mlog_orders", "shop.orders", "shop.orders", ("order_id",), True)
    ctx = RefreshContext(fake.query, fake.execute, fake.metadata())
    reflected = consumers_stops(ctx, spec, ["shop.v"])()
    assert reflected.stops == frozenset({42})


def test_a_union_state_is_keyed_by_every_column_and_each_branch_selects_the_key():
    from dbt_incremental_mv.analysis.states import STATE_KEY, split_into_states
    from tests.unit.analysis.conftest import MASTERS

    sql = (
        "with u as (select o.customer_id as k, o.status as label from shop.orders o union "
        "select c.customer_id, c.country from shop.customers c) "
        "select u.k % 2 as parity, count(*) as n from u group by u.k % 2"
    )
    split = split_into_states(sql, MASTERS)
    assert split is not None and [s.name for s in split.states] == ["u"]
    union = split.states[0]
    assert union.key == ("k", "label") and union.log_key == (STATE_KEY,)
    # a UNION's rows are distinct: the key, never NULL, is computed by each branch from its own columns
    assert union.sql.count(f"AS {STATE_KEY}") == 2 and "TO_JSON(ARRAY(CAST(c.customer_id AS STRING), CAST(c.country" in union.sql
