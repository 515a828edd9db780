"""What a refresh costs in statements, pinned per view class, without Spark (fake_iceberg.py stands
in for the catalog and the SQL): a refresh with nothing to do runs no SQL statement and makes no
commit; a small refresh runs only the statements that move data. A read that creeps back in
fails here."""

from __future__ import annotations

import time

import pytest

from dbt_incremental_mv.refresh.phases.propagate import IDLE
from dbt_incremental_mv.refresh.phases.publish import CACHE_PLANNING
from dbt_incremental_mv.refresh.state.bookkeeping import ViewState
from tests.unit.warehouse import VIEWS, Warehouse


@pytest.fixture(params=sorted(VIEWS))
def warehouse(request) -> Warehouse:
    built = Warehouse(request.param)
    line = built.refresh()
    assert line.startswith("build (first run: building the view in full): table replaced"), line
    assert ViewState.decode(built.fake.load("shop.v").current.summary["wap.id"]).method == "build"
    return built


def test_a_refresh_with_nothing_to_do_runs_no_statement_and_commits_nothing(warehouse):
    line, statements, commits = warehouse.measured()
    assert line == IDLE
    assert statements == [] and commits == []


def test_a_small_refresh_runs_only_the_statements_that_move_data(warehouse):
    warehouse.change("orders")
    line, statements, commits = warehouse.measured()
    assert line.startswith("fast refresh: "), line
    # the change has inserts, updates and deletes: two writes, neither shuffling the view
    # what both writes read is computed once: an aggregate's delta (the INSERT reads it several
    # times), an outer join's affected slices
    cached = {"aggregate": "delta", "outer_join": "keys", "union_all": "delta"}.get(warehouse.view_class)
    assert statements == [
        "capture: changelog of orders",  # Iceberg's changelog of the master's new commits
        "capture: append to mlog_orders",  # ... appended to a branch of the log
        "mark: log counts",  # the counts of every log that gained rows, in one statement
        *([f"cache: {cached}"] if cached else []),  # into the session's cache
        "write on branch: delete",  # the rows (or groups) the change touches, on the view's write branch
        "write on branch: insert",  # staged on it with the refresh's state
    ], statements  # the purge of the consumed log rows is no statement: whole files go (below)
    assert len(statements) <= 6
    # the settings are made through the session, no statement: the cache planned under its
    # settings (set before, reset after), the INSERT staged under the refresh's state
    planning = [f"set {k}={v}" for k, v in CACHE_PLANNING], [f"reset {k}" for k, _ in CACHE_PLANNING]
    settings = [s.split("=")[0] if s.startswith("set spark.wap.id=") else s for s in warehouse.fake.settings]
    assert settings == ([*planning[0], *planning[1]] if cached else []) + ["set spark.wap.id", "reset spark.wap.id"]
    # ... and the cached view is dropped through the session after the writes
    dropped = [t for t in warehouse.fake.trace if t.startswith("[session] drop view if exists `mv_write_")]
    assert len(dropped) == (1 if cached else 0) and (not cached or f"_{cached}`" in dropped[0]), dropped
    # metadata commits: the capture's branch, the capture's compare-and-swap, the view's write
    # branch, the view's compare-and-swap (dropping the branch), the purge (whole files: the
    # consumed changes and the superseded watermark, not the newest), the purge's record
    assert [c.split(" ")[0] for c in commits] == [
        "create", "fast_forward", "create", "fast_forward", "delete_files", "fast_forward",
    ], commits
    assert commits[4].endswith("['1-marks', '2-changes']"), commits[4]
    assert not warehouse.fake.tables["shop.v"].refs.keys() - {"main"}  # the write branch went with the publish


def test_a_view_keeping_its_own_log_pays_one_statement_for_it_and_two_metadata_commits(warehouse):
    """mv_log=true: the rows the refresh changed go to the view's log in one statement (no read of
    the log, no capture), on a branch published right after the view (own_log.py)."""
    fake = warehouse.fake
    warehouse.keep_own_log()
    warehouse.change("orders")
    line, statements, commits = warehouse.measured()
    assert "; logged " in line and "to shop.mlog_v" in line, line
    cached = {"aggregate": "delta", "outer_join": "keys", "union_all": "delta"}.get(warehouse.view_class)
    assert statements[statements.index("write on branch: insert") + 1:] == [
        "capture: append to mlog_v",  # the view's changed rows, read at both snapshots through the writes' filter
    ], statements  # (then the cached view is dropped: through the session)
    assert [c.split(" ")[0] for c in commits][3:6] == ["create", "fast_forward", "fast_forward"], commits
    assert commits[4] == f"fast_forward shop.v -> {fake.tables['shop.v'].refs['main']}"  # the view first, then its log
    assert commits[5].startswith("fast_forward shop.mlog_v")
    assert "captured_through" not in " ".join(statements)
    # what it reads: the rows the DELETE removed (none for an insert-only refresh) and the files the INSERT added
    assert "from `mv_files_appended_" in fake.statements[statements.index("capture: append to mlog_v")]


def test_several_commits_are_captured_by_their_changed_files_read_once(warehouse):
    """Two commits since the last capture: the data files they changed are staged (metadata)
    and diffed in the capture's one statement, instead of the changelog of every commit."""
    master = warehouse.fake.tables["shop.orders"]
    captured = master.refs["main"]
    warehouse.change("orders")
    warehouse.change("orders")
    line, statements, commits = warehouse.measured()
    assert statements[:2] == ["capture: append to mlog_orders", "mark: log counts"], statements
    assert "changelog" not in " ".join(statements)
    capture = warehouse.fake.statements[0]
    assert "from `mv_files_added_1`\nunion all\n" in capture and "from `mv_files_removed_1`" in capture
    assert warehouse.fake.files_staged == [("shop.orders", captured, master.refs["main"])]
    assert warehouse.fake.staged == []  # unstaged once the capture ran
    assert "captured shop.mlog_orders: files (2 new master commit(s), read by the data files they changed: " \
        "1 removed and 2 added data file(s) read once, rows compared by value)" in line, line


def test_the_mark_step_reads_the_span_of_the_changed_logs_new_files_only(warehouse):
    """A fast refresh buckets its marked keys over the span the log files written since its
    position hold (their statistics: metadata, no statement); an unchanged log is not looked at."""
    warehouse.change("orders")
    warehouse.fake.bounds_read.clear()
    warehouse.refresh()
    assert warehouse.fake.bounds_read == [("shop.mlog_orders", ("order_id",))]


def test_a_write_branch_a_killed_refresh_left_is_dropped_by_the_next_refresh_that_writes(warehouse):
    from dbt_incremental_mv.refresh.phases.publish import STALE_BRANCH_MS, write_branch

    view = warehouse.fake.tables["shop.v"]
    killed = write_branch(int(time.time() * 1000) - STALE_BRANCH_MS - 1)
    running = write_branch()  # another refresh's, still running: left alone
    view.refs[killed] = view.refs[running] = view.refs["main"]
    warehouse.change("orders")
    warehouse.measured()
    assert set(view.refs) == {"main", running}


def test_a_refresh_of_an_unchanged_master_reads_no_log_of_it(warehouse):
    """A change in one master: the other master's log is neither captured nor counted."""
    if "customers" not in warehouse.sql:
        pytest.skip("single-master view")
    warehouse.change("customers")
    _, statements, _ = warehouse.measured()
    assert statements.count("mark: log counts") == 1
    assert not any("mlog_orders" in sql for sql in warehouse.fake.statements), warehouse.fake.statements


def test_a_view_over_an_ingestion_log_without_any_commit_builds_and_reads_no_missing_snapshot():
    """An ingestion-written log created empty (no snapshot yet): nothing is read 'as of' it."""
    built = Warehouse("aggregate")
    for source in built.graph["sources"].values():
        if "meta" in source:
            source["meta"]["mv_log"]["capture"] = False
    log = built.fake.tables["shop.mlog_orders"]
    log.snapshots.clear()
    log.refs.clear()
    log.rows.clear()
    line = built.refresh()
    assert line.startswith("build (first run"), line
    assert not any("version as of 0" in sql for sql in built.fake.statements), built.fake.statements


def test_the_plan_is_not_edited_the_run_is_decided_once_from_the_facts(warehouse):
    """What planning found stays as it was (RefreshPlan is frozen); the run is decided once, after
    the mark step, from the plan's facts and its own (decide.py): here a fast refresh whose log
    was reset before capture is decided complete, with the reset as what blocks it."""
    import dataclasses

    from dbt_incremental_mv.refresh.phases.decide import RefreshDecision, RunFacts
    from dbt_incremental_mv.refresh.phases.run import RefreshRun

    warehouse.change("orders")
    warehouse.refresh()
    engine, run, propagation, line = warehouse.last
    assert isinstance(run, RefreshRun) and run.plan.action == "fast" and run.action == "fast"
    assert run.facts is not None and run.facts.log_reset is None and run.timings.keys() >= {"capture"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.plan.decision = RefreshDecision("complete", "edited")  # type: ignore[misc]
    with pytest.raises(AssertionError, match="decided once"):
        run.decide(RunFacts())
    turned = RefreshRun(run.plan)
    turned.decide(RunFacts(log_reset="a log was reset"))
    assert (turned.action, turned.decision.blocker, turned.plan.action) == ("complete", "a log was reset", "fast")


def marked(masters, master, inserts, deletes):
    """The marked log of ``master`` (``s.<name>``, its log ``s.mlog_<name>``) at snapshot 77, its
    changed keys the literal 1 when any."""
    from dbt_incremental_mv.logs.contract import LogSpec
    from dbt_incremental_mv.refresh.marked_log import MarkedLog

    log = f"s.mlog_{master[2:]}"
    spec = LogSpec(log, log, master[2:], master, masters[master].key, True)
    return MarkedLog(spec, 5, 1, 9, inserts, deletes, master_snapshot=77, key_values=((1,),) if inserts or deletes else ())


def test_a_join_view_recomputes_the_rows_of_the_keys_the_time_moved_across_after_the_changes():
    from dbt_incremental_mv.analysis import MasterTable, analyze_view
    from dbt_incremental_mv.analysis.clock import Clock
    from dbt_incremental_mv.refresh.views.join_view import refresh_statement, with_crossed_rows
    from dbt_incremental_mv.refresh.views.statement import CrossedRows

    masters = {
        "s.orders": MasterTable("s.orders", (("order_id", "bigint"), ("customer_id", "bigint"), ("due", "date")), ("order_id",)),
        "s.customers": MasterTable("s.customers", (("customer_id", "bigint"), ("name", "string")), ("customer_id",)),
    }
    view = analyze_view(
        "select o.order_id, c.name from s.orders o join s.customers c on o.customer_id = c.customer_id "
        "where o.due >= current_date()",
        masters,
        Clock.of("2026-12-02"),
    )

    logs = {"s.orders": marked(masters, "s.orders", 1, 0), "s.customers": marked(masters, "s.customers", 0, 0)}
    crossed = CrossedRows({"o": "select * from `s`.`orders` version as of 77 as `o`\nwhere `o`.`due` = DATE '2026-12-01'"})
    changes = refresh_statement(view, "s.v", logs, {})
    assert changes is not None and changes.branch is None and changes.writes[0].sql.startswith("insert into `s`.`v` (")
    timed = with_crossed_rows(view, "s.v", logs, changes, crossed, {}, branch="mv_write_1")
    # the crossed keys' DELETE, then one INSERT of the changes' rows and the crossed keys' rows, on the write branch
    assert timed.branch == "mv_write_1" and [w.kind for w in timed.writes] == ["delete", "insert"]
    assert all(w.sql.split("\n")[0].startswith(("insert into `s`.`v`.`branch_mv_write_1`", "delete from `s`.`v`.`branch_mv_write_1`")) for w in timed.writes)
    held = "(`_mv_o_order_id`) in (select `order_id` from (\nselect * from `s`.`orders` version as of 77 as `o`\nwhere `o`.`due` = DATE '2026-12-01'\n))"
    assert held in timed.writes[0].sql and timed.deleted == held
    insert = timed.writes[1].sql
    assert insert.count("union all") >= 1 and changes.inserted in insert
    # one occurrence crossed: its crossed rows read in its place, the others at their marked snapshots; the rows
    # of an inserted order (the changes' INSERT makes them) left out, so that a row that changed and crossed comes once
    assert "`o`.`due` = CAST('2026-12-01' AS DATE)" in insert and "`s`.`customers` version as of 77" in insert.lower()
    assert "left anti join" in insert or "not coalesce(" in insert
    assert timed.steps_run[-1] == "TIME o"
    # combinable into a UNION ALL view's one DELETE and one INSERT (DELETEs then one INSERT, both known)
    assert timed.inserted is not None and timed.inserted in insert
    # nothing marked: the time step alone
    alone = with_crossed_rows(view, "s.v", logs, None, crossed, {}, branch="mv_write_1")
    assert [w.kind for w in alone.writes] == ["delete", "insert"] and alone.steps_run == ("TIME o",)


def test_an_outer_join_view_recomputes_the_slices_holding_the_rows_the_time_moved_across():
    from dbt_incremental_mv.analysis import MasterTable, analyze_view
    from dbt_incremental_mv.analysis.clock import Clock, clock_move
    from dbt_incremental_mv.refresh.views import view_classes
    from dbt_incremental_mv.refresh.views.statement import CrossedRows

    masters = {
        "s.orders": MasterTable("s.orders", (("order_id", "bigint"), ("customer_id", "bigint"), ("due", "date")), ("order_id",)),
        "s.customers": MasterTable("s.customers", (("customer_id", "bigint"), ("since", "date")), ("customer_id",)),
    }
    # the orders due from today on of each customer (a filter in the LEFT JOIN's ON), of customers since before today
    sql = (
        "select c.customer_id, o.order_id from s.customers c left join s.orders o "
        "on o.customer_id = c.customer_id and o.due >= current_date() where c.since < current_date()"
    )
    before, view = (analyze_view(sql, masters, Clock.of(day)) for day in ("2026-12-01", "2026-12-02"))
    move = clock_move(before, view)
    assert move.elsewhere is None and sorted(f.alias for f in move.filters) == ["c", "o"]
    assert view_classes.applies_crossed_rows(view)

    logs = {"s.orders": marked(masters, "s.orders", 1, 1), "s.customers": marked(masters, "s.customers", 0, 0)}
    rows = {
        "o": "select * from `s`.`orders` version as of 77 as `o`\nwhere `o`.`due` = DATE '2026-12-01'",
        "c": "select * from `s`.`customers` version as of 77 as `c`\nwhere `c`.`since` = DATE '2026-12-01'",
    }
    timed = view_classes.with_crossed_rows(view, "s.v", logs, None, CrossedRows(rows, move.filters), {}, "mv_write_1")
    assert timed.steps_run == ("SLICES o", "TIME c", "TIME o", "DEL+INS slices")
    assert [w.kind for w in timed.writes] == ["delete", "insert"] and timed.branch == "mv_write_1"
    [keys] = timed.cached
    # the affected customers: the changed orders' (the view rows holding them and their new rows), the crossed
    # customers themselves, and the customers the crossed orders name (joined on the customers' whole key)
    assert "`_mv_o_order_id` in (1)" in keys.sql and "where `order_id` in (1)" in keys.sql
    assert rows["c"] in keys.sql
    assert f"select `customer_id` as `customer_id` from (\n{rows['o']}\n) where `customer_id` is not null" in keys.sql
    assert keys.sql.count("from `s`.`v`") == 1  # (the changed orders' old slices only)
    # not joined on the anchor's whole key: the view rows holding a crossed row, and the rows the query makes of them
    pairs = sql.replace("o.customer_id = c.customer_id", "o.customer_id + 0 = c.customer_id")
    before, view2 = (analyze_view(pairs, masters, Clock.of(day)) for day in ("2026-12-01", "2026-12-02"))
    move2 = clock_move(before, view2)
    crossed2 = CrossedRows({"o": rows["o"]}, move2.filters)
    keys2 = view_classes.with_crossed_rows(view2, "s.v", logs, None, crossed2, {}, "mv_write_1").cached[0].sql
    assert "(`_mv_o_order_id`) in (select `order_id` from (\n" + rows["o"] in keys2
    assert "LEFT JOIN (" + rows["o"].replace("select * from", "SELECT * FROM").replace(" version as of", " VERSION AS OF").replace(" as `o`\nwhere", " AS `o` WHERE").replace("DATE '2026-12-01'", "CAST('2026-12-01' AS DATE)") in keys2
    # the slices recomputed whole at the new time: every view row of an affected customer deleted, the query's inserted
    assert "`_mv_c_customer_id`" in timed.writes[0].sql and keys.name in timed.writes[0].sql
    insert = timed.writes[1].sql
    assert "CAST('2026-12-02' AS DATE)" in insert and "CAST('2026-12-01' AS DATE)" not in insert
    assert timed.deleted is not None and timed.inserted is not None  # (combinable into a UNION ALL's writes)


def test_an_aggregate_takes_the_changes_at_its_rows_time_then_the_rows_the_time_moved_across_in_and_out():
    from dbt_incremental_mv.analysis import MasterTable, analyze_view
    from dbt_incremental_mv.analysis.clock import Clock, clock_move
    from dbt_incremental_mv.refresh.views import view_classes
    from dbt_incremental_mv.refresh.views.aggregate_view import refresh_statement, with_crossed_rows
    from dbt_incremental_mv.refresh.views.statement import CrossedRows

    masters = {
        "s.orders": MasterTable("s.orders", (("order_id", "bigint"), ("customer_id", "bigint"), ("due", "date"), ("amount", "int")), ("order_id",)),
        "s.customers": MasterTable("s.customers", (("customer_id", "bigint"), ("name", "string")), ("customer_id",)),
    }
    sql = (
        "select c.name, count(*) as n, sum(o.amount) as total, max(o.amount) as top from s.orders o "
        "join s.customers c on o.customer_id = c.customer_id where o.due >= current_date() and o.amount > 0 group by c.name"
    )
    before, view = (analyze_view(sql, masters, Clock.of(day)) for day in ("2026-12-01", "2026-12-02"))
    move = clock_move(before, view)
    assert move.elsewhere is None and [f.alias for f in move.filters] == ["o"]
    assert view_classes.applies_crossed_rows(view)

    logs = {"s.orders": marked(masters, "s.orders", 1, 0), "s.customers": marked(masters, "s.customers", 0, 0)}
    rows = "select * from `s`.`orders` version as of 77 as `o`\nwhere `o`.`due` = DATE '2026-12-01'"
    timed = with_crossed_rows(view, "s.v", logs, refresh_statement(view, "s.v", logs, {}), CrossedRows({"o": rows}, move.filters), {})
    assert timed.steps_run[:2] == ("DELTA o", "TIME o")
    delta = next(c.sql for c in timed.cached if c.name.endswith("terms"))
    old, new = "CAST('2026-12-01' AS DATE)", "CAST('2026-12-02' AS DATE)"
    # the logged change at the time the view's rows reflect; the rows that crossed: in at the new time, out at the old
    change, came, went = delta.split("union all")[:3]
    assert "mlog_orders" in change and old in change and new not in change
    rows = rows.replace("version as of", "VERSION AS OF").replace("select * from", "SELECT * FROM").replace("\nwhere", " WHERE").replace(" as `o`", " AS `o`")
    rows = rows.replace("DATE '2026-12-01'", old)
    assert rows in came and rows in went and "-1 AS `_mv_sign`" in went and "-1 AS" not in came
    came_where, went_where = (term.rsplit("WHERE", 1)[1] for term in (came, went))
    assert new in came_where and old not in came_where and old in went_where and new not in went_where
    # a row that left takes its MAX with it: the groups whose extreme went are recomputed
    assert any("MIN/MAX" in step for step in timed.steps_run), timed.steps_run


def test_an_aggregate_over_an_outer_join_takes_the_slices_holding_the_null_supplying_side_s_crossed_rows():
    from dbt_incremental_mv.analysis import MasterTable, analyze_view
    from dbt_incremental_mv.analysis.clock import Clock, clock_move
    from dbt_incremental_mv.refresh.views.aggregate_view import refresh_statement, with_crossed_rows
    from dbt_incremental_mv.refresh.views.statement import CrossedRows

    masters = {
        "s.orders": MasterTable("s.orders", (("order_id", "bigint"), ("customer_id", "bigint"), ("due", "date"), ("amount", "int")), ("order_id",)),
        "s.customers": MasterTable("s.customers", (("customer_id", "bigint"), ("name", "string"), ("since", "date")), ("customer_id",)),
    }
    # the orders due from today on, counted per customer (one with none counts 0); customers since before today
    sql = (
        "select c.name, count(o.order_id) as n, sum(o.amount) as total from s.customers c left join s.orders o "
        "on o.customer_id + 0 = c.customer_id and o.due >= current_date() where c.since < current_date() group by c.name"
    )
    before, view = (analyze_view(sql, masters, Clock.of(day)) for day in ("2026-12-01", "2026-12-02"))
    move = clock_move(before, view)
    assert move.elsewhere is None and sorted(f.alias for f in move.filters) == ["c", "o"]
    logs = {"s.orders": marked(masters, "s.orders", 1, 0), "s.customers": marked(masters, "s.customers", 0, 0)}
    rows = {
        "o": "select * from `s`.`orders` version as of 77 as `o`\nwhere `o`.`due` = DATE '2026-12-01'",
        "c": "select * from `s`.`customers` version as of 77 as `c`\nwhere `c`.`since` = DATE '2026-12-01'",
    }
    changes = refresh_statement(view, "s.v", logs, {})
    timed = with_crossed_rows(view, "s.v", logs, changes, CrossedRows(rows, move.filters), {})
    assert timed.steps_run[:3] == ("ROWS o", "TIME c", "TIME o")
    terms = "\n".join(c.sql for c in timed.cached)
    old, new = "CAST('2026-12-01' AS DATE)", "CAST('2026-12-02' AS DATE)"
    # the orders that crossed: the customers of the join's rows holding one, at either time, a cached view of keys
    [slices] = [c for c in timed.cached if c.name.endswith("slices_o_time")]
    assert slices.sql.count(f"`o`.`due` = {old}") == 2  # (the crossed rows, rendered in each join)
    assert f"`o`.`due` >= {new}" in slices.sql and f"`o`.`due` >= {old}" in slices.sql
    # the customers crossed (the preserved side: linear) in at the new time and out at the old, then those
    # slices: every customer's rows at the new time (+1) less at the old (-1)
    assert f"FROM `{slices.name}`" in terms or f"from `{slices.name}`" in terms


def test_a_union_all_applies_each_branch_s_crossed_rows_in_its_one_delete_and_insert():
    from dbt_incremental_mv.analysis import MasterTable, analyze_view
    from dbt_incremental_mv.analysis.clock import Clock, clock_move
    from dbt_incremental_mv.refresh.views import view_classes
    from dbt_incremental_mv.refresh.views.statement import CrossedRows

    masters = {
        "s.orders": MasterTable("s.orders", (("order_id", "bigint"), ("customer_id", "bigint"), ("due", "date"), ("amount", "int")), ("order_id",)),
        "s.customers": MasterTable("s.customers", (("customer_id", "bigint"), ("since", "date")), ("customer_id",)),
    }
    sql = (
        "select o.order_id as id, o.amount from s.orders o where o.due >= current_date() union all "
        "select c.customer_id, count(*) from s.customers c join s.orders p on p.customer_id = c.customer_id "
        "where c.since < current_date() group by c.customer_id"
    )
    before, view = (analyze_view(sql, masters, Clock.of(day)) for day in ("2026-12-01", "2026-12-02"))
    move = clock_move(before, view)
    assert move.elsewhere is None and sorted(f.alias for f in move.filters) == ["c", "o"]
    assert view_classes.applies_crossed_rows(view)
    selected_now = sql.replace("select o.order_id as id, o.amount", "select o.order_id as id, datediff(current_date(), o.due)")
    moved = clock_move(*(analyze_view(selected_now, masters, Clock.of(d)) for d in ("2026-12-01", "2026-12-02")))
    assert moved.elsewhere is not None  # (the time selected: recomputed when it moved)

    logs = {"s.orders": marked(masters, "s.orders", 0, 0), "s.customers": marked(masters, "s.customers", 0, 0)}
    rows = {
        "o": "select * from `s`.`orders` version as of 77 as `o`\nwhere `o`.`due` = DATE '2026-12-01'",
        "c": "select * from `s`.`customers` version as of 77 as `c`\nwhere `c`.`since` = DATE '2026-12-01'",
    }
    timed = view_classes.with_crossed_rows(view, "s.v", logs, None, CrossedRows(rows, move.filters), {}, "mv_write_1")
    assert [w.kind for w in timed.writes] == ["delete", "insert"]
    assert timed.steps_run == ("branch 1: TIME o", "branch 2: TIME c")
    # the join branch's crossed keys and the aggregate branch's groups, deleted by one DELETE
    assert "`_mv_o_order_id`" in timed.writes[0].sql and "`_mv_branch`" in timed.writes[0].sql
