"""explain_fast_refresh without Spark (refresh/operations/explain.py): what the next refresh would do, read
from metadata only; nothing is captured, written, committed or purged."""

from __future__ import annotations

from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.operations.explain import explain
from tests.unit.warehouse import SPLIT_IN_TWO, Warehouse


def explained(warehouse: Warehouse, sql: str | None = None) -> list[str]:
    fake = warehouse.fake
    before = (len(fake.statements), len(fake.commits), {n: dict(t.refs) for n, t in fake.tables.items()})
    ctx = RefreshContext(fake.query, fake.execute, fake.metadata())
    lines = explain(ctx, warehouse.model, sql or warehouse.sql, "shop.v", "shop.v" in fake.tables, warehouse.graph).lines()
    after = (len(fake.statements), len(fake.commits), {n: dict(t.refs) for n, t in fake.tables.items()})
    assert after[1:] == before[1:], "explain changed nothing"
    assert all(not sql.lstrip().lower().startswith(("insert", "merge", "delete", "call", "set", "cache"))
               for sql in fake.statements[before[0]:]), fake.statements[before[0]:]
    return lines


def test_a_model_not_built_yet_shows_its_build_and_the_fast_refresh_that_follows():
    lines = explained(Warehouse("join"))
    text = "\n".join(lines)
    assert lines[:4] == [
        "-- explain_fast_refresh: v (shop.v, not built yet)", "view class: join", "fast refreshable: yes",
        "next dbt run: build (first run: building the view in full)",
    ]
    masters = [line for line in lines if line.startswith("master ")]
    assert len(masters) == 2 and all(" key (" in line and ") from meta.mv_log.key of source '" in line for line in masters)
    assert "-- build\ncreate or replace table `shop`.`v` using iceberg as\nselect o.order_id" in text
    for phase in ("mark", "write", "publish", "purge"):
        assert f"-- once built, a fast refresh runs: {phase}" in text, phase
    assert "delete from `shop`.`v`.`branch_mv_write`" in text
    assert "-- layout advice (not run)" in text and "alter table `shop`.`v` write ordered by" in text


def test_a_built_view_with_a_master_commit_shows_the_capture_the_cost_and_the_writes():
    warehouse = Warehouse("aggregate")
    warehouse.refresh()
    warehouse.change("orders")
    lines = explained(warehouse)
    text = "\n".join(lines)
    assert lines[1:4] == ["view class: aggregate", "fast refreshable: yes", "next dbt run: fast"]
    assert "-- fast refresh: capture\n-- shop.mlog_orders: changelog (1 new master commit(s))" in text
    assert "call spark_catalog.system.create_changelog_view(" in text
    assert next(line for line in lines if line.startswith("cost: ")).endswith(
        "refresh_method='force' runs fast (fast whenever possible: no size in the metadata of shop.v, shop.orders)"
    )
    assert "-- fast refresh: write (on a branch of the view, staged with the refresh's record)" in text
    assert warehouse.refresh().startswith("fast refresh: "), "the refresh explained still runs as explained"


def test_a_view_with_nothing_to_refresh_says_so_and_reads_nothing():
    warehouse = Warehouse("outer_join")
    warehouse.refresh()
    warehouse.fake.statements.clear()
    lines = explained(warehouse)
    assert lines[3].startswith("next dbt run: fast: nothing to refresh"), lines[3]
    assert warehouse.fake.statements == []


def test_every_reason_is_listed_each_with_what_to_change_and_masters_named_as_written():
    warehouse = Warehouse("join")
    warehouse.refresh()
    bad = ("select o.order_id, row_number() over (order by o.amount) as rn, rand() as r from shop.orders o "
           "left semi join shop.customers c on o.customer_id = c.customer_id limit 5")
    lines = explained(warehouse, bad)
    assert lines[2] == "fast refreshable: no (4 reasons)"
    assert [line.split(":")[0].strip() for line in lines[3:7]] == [
        "1. LIMIT 5", "2. LEFT SEMI JOIN", "3. ROW_NUMBER() OVER (ORDER BY o.amount)", "4. RAND()",
    ]
    assert all(". " in line.split(": ", 2)[-1] for line in lines[3:7]), "each says what to change"
    del warehouse.graph["sources"]["source.p.change_logs.mlog_customers"]
    lines = explained(warehouse)
    assert lines[2:4] == [
        "fast refreshable: no (1 reason)",
        "  1. shop.customers: no change log is declared for it. Declare one: a dbt source table with "
        "meta.mv_log: {master: shop.customers, key: [<its unique key>], capture: true}",
    ]
    assert lines[4].startswith("next dbt run: complete (fast refresh impossible: no change log is declared")


def test_an_aggregate_over_an_outer_join_is_fast_refreshable_and_names_its_anchor():
    sql = ("select c.country, count(o.order_id) as n from shop.customers c "
           "left join shop.orders o on o.customer_id = c.customer_id group by c.country")
    lines = explained(Warehouse("outer_join"), sql)
    assert lines[1:3] == ["view class: aggregate over outer joins (anchor: c)", "fast refreshable: yes"]


def test_a_having_view_is_fast_refreshable_and_says_how():
    sql = "select customer_id, count(*) as n from shop.orders group by customer_id having count(*) > 1"
    lines = explained(Warehouse("aggregate"), sql)
    assert lines[1:3] == [
        "view class: aggregate with HAVING (the groups it does not hold are recomputed when changed)",
        "fast refreshable: yes",
    ]


def test_a_union_all_view_names_each_branch_s_class_and_shows_one_delete_and_one_insert():
    warehouse = Warehouse("union_all")
    warehouse.refresh()
    warehouse.change("orders")
    lines = explained(warehouse)
    assert lines[1:3] == [
        "view class: union all (branch 1: join; branch 2: aggregate; each maintained on its own rows, marked by "
        "_mv_branch)",
        "fast refreshable: yes",
    ]
    text = "\n".join(lines)
    assert text.count("delete from `shop`.`v`.`branch_") == 1 and text.count("insert into `shop`.`v`.`branch_") == 1


def test_a_view_keeping_its_own_log_shows_the_log_step_between_the_writes_and_the_publish():
    warehouse = Warehouse("join")
    warehouse.refresh()
    warehouse.keep_own_log()
    warehouse.change("orders")
    text = "\n".join(explained(warehouse))
    log = "-- fast refresh: log (mv_log=true: what the refresh changed, to a branch of shop.mlog_v)"
    assert text.index("-- fast refresh: write") < text.index(log) < text.index("-- fast refresh: publish"), text
    assert "-- filter: (`_mv_o_order_id`) in (select /*+ BROADCAST */" in text
    assert "-- then main of shop.mlog_v to its branch" in text


def test_an_outermost_order_by_is_said_to_be_ignored():
    warehouse = Warehouse("aggregate")
    lines = explained(warehouse, warehouse.sql + " order by 1")
    assert lines[1].startswith("view class: aggregate (ORDER BY 1: ignored, a table keeps no order; sort when reading")
    assert explained(warehouse)[1] == "view class: aggregate"


def test_a_refused_query_that_splits_into_states_is_explained_step_by_step():
    # the latest order of each customer, counted by amount: refused as one view, maintained in steps
    lines = explained(Warehouse("join"), SPLIT_IN_TWO)
    assert lines[1] == (
        "view class: maintained in 2 steps: the internal state latest (a ranked view, key customer_id, with the CTE "
        "ranked it reads), then the query over it, an aggregate view"
    )
    assert lines[2] == "fast refreshable: yes"
    assert lines[3].startswith("next dbt run: in steps: "), lines[3]
    text = "\n".join(lines)
    # each unit, as the model it is refreshed as: the state first (a ranked view, built by the first run) ...
    assert "-- step 1 of 2\n-- explain_fast_refresh: v__mv_state_latest (shop.v__mv_state_latest, not built yet)" in text
    assert "create or replace table `shop`.`v__mv_state_latest` using iceberg as" in text
    # ... then the view, read from it once it is built
    assert "-- step 2 of 2\n-- explain_fast_refresh: v (shop.v, not built yet)" in text
    assert "next dbt run: build (after v__mv_state_latest)" in text


def test_a_query_that_splits_but_is_always_recomputed_says_which_ctes_to_make_models_of_their_own():
    warehouse = Warehouse("join")
    warehouse.model["config"]["refresh_method"] = "complete"
    lines = explained(warehouse, SPLIT_IN_TWO)
    assert lines[2] == "fast refreshable: no (1 reason)"
    assert lines[3].startswith("  1. ROW_NUMBER() OVER (PARTITION BY o.customer_id ORDER BY o.order_id DESC): "), lines[3]
    assert lines[4] == (
        "  It can be fast refreshed in 2 steps: make the CTE latest (a ranked view, key customer_id, with the CTE ranked it reads) "
        "a fast_refresh model of its own with mv_log=true, declare its change log as a source (meta.mv_log with that key) and "
        "read it here with ref(): the query over it is then an aggregate view"
    )
    assert lines[5] == "next dbt run: build (first run: building the view in full)"
