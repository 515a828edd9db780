"""Logs written at refresh time (refresh/phases/own_log.py, refresh/operations/logged_merge.py), without Spark: the
fake catalog records every statement and metadata commit, so the order of the two commits and the
cost of the log (one statement) are pinned."""

import pytest

from dbt_incremental_mv.metadata import setting_statements
from dbt_incremental_mv.refresh.state.bookkeeping import ViewState
from dbt_incremental_mv.config import ConfigError, FastRefreshConfig
from dbt_incremental_mv.logs import properties as log_properties
from dbt_incremental_mv.logs.contract import LogSpec, log_specs_from_graph
from dbt_incremental_mv.refresh.phases import own_log
from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.operations.logged_merge import LoggedMergeError, MergeConfig, keys_merged, merge_sql
from dbt_incremental_mv.refresh.phases.publish import CACHE_PLANNING, cache_planning, staged_statement
from dbt_incremental_mv.refresh.views.statement import Cached, RefreshStatement, Write, WriteKind
from tests.unit.fake_iceberg import LOG_COLUMNS, FakeIceberg

VIEW = [("region_id", "bigint"), ("n", "bigint"), ("_mv_count", "bigint")]
SPEC = LogSpec("logs.mlog_v", "shop.mlog_v", "v", "shop.v", ("region_id",), True)
TOUCHED = "(`region_id`) in (select /*+ BROADCAST */ * from (\nselect * from `b_delta`\n))"


def warehouse(captured_through_view_main: bool = True, columns=VIEW):
    fake = FakeIceberg()
    view = fake.table("shop.v", VIEW)
    log = fake.table("shop.mlog_v", columns + LOG_COLUMNS, {"format-version": "3"})
    through = view.refs["main"] if captured_through_view_main else view.refs["main"] - 1
    fake.log_rows(log.name, "W", commit=through)
    log.properties.update(log_properties.capture_property(through, log.refs["main"]))
    ctx = RefreshContext(fake.query, fake.execute, fake.metadata())
    return fake, ctx


def test_a_refresh_writes_its_changes_to_a_branch_of_the_log_in_one_statement_then_publishes_after_the_view():
    fake, ctx = warehouse()
    before = fake.tables["shop.v"].refs["main"]
    after = fake.commit("shop.v", "overwrite", branch=None)  # the refresh's staged write
    log_main = fake.tables["shop.mlog_v"].refs["main"]
    pending = own_log.write(ctx, SPEC, "shop.v", before, after, own_log.ChangedRows(TOUCHED))
    assert isinstance(pending, own_log.PendingLog)
    assert len(fake.statements) == 1  # the log rows: no read of the log, no capture
    insert = fake.statements[0]
    assert insert.startswith("insert into `shop`.`mlog_v`.`branch_mv_capture_")
    assert f"version as of {before} as `_mv_v`\nwhere {TOUCHED}" in insert
    assert f"version as of {after} as `_mv_v`\nwhere {TOUCHED}" in insert
    assert "`region_id`, `n`, `_mv_count`" in insert  # every column of the view, hidden ones too
    assert fake.tables["shop.mlog_v"].refs["main"] == log_main  # nobody reads the rows yet

    fake.tables["shop.v"].refs["main"] = after  # the view's publish
    assert own_log.publish(ctx, pending).startswith("logged ")
    log = fake.load("shop.mlog_v")
    assert log.current.snapshot_id != log_main and pending.branch not in log.branches
    assert log_properties.captured_through(log).master_snapshot == after  # its readers capture nothing
    assert len(fake.statements) == 1


DELETED = "exists (select /*+ BROADCAST */ 1 from (\nselect * from `b_delta`\n) as `_mv_k` where `_mv_k`.`region_id` <=> `_mv_v`.`region_id`)"


def test_a_refresh_whose_writes_are_known_logs_the_deleted_rows_and_the_files_its_insert_added_only():
    fake, ctx = warehouse()
    before = fake.tables["shop.v"].refs["main"]
    fake.commit("shop.v", "overwrite", branch="b")  # the DELETE, on the write branch
    after = fake.commit("shop.v", "append", branch=None, on="b")  # the INSERT, staged: an append
    rows = own_log.ChangedRows(TOUCHED, known=True, deleted=DELETED, inserted=True)
    assert isinstance(own_log.write(ctx, SPEC, "shop.v", before, after, rows), own_log.PendingLog)
    [insert] = fake.statements
    # the deleted rows: the DELETE's own condition on the view as it was; the inserted ones: the
    # data files the INSERT's commit added (staged from its manifest), not the view as it is
    assert f"from `shop`.`v` version as of {before} as `_mv_v`\nwhere {DELETED}" in insert
    assert "from `mv_files_appended_1`" in insert and f"version as of {after}" not in insert
    assert fake.files_staged == [("shop.v", after, after)] and fake.staged == []  # unstaged after
    # a delete-only refresh reads its deleted rows only
    fake.statements.clear()
    gone = fake.commit("shop.v", "overwrite", branch=None)
    own_log.write(ctx, SPEC, "shop.v", before, gone, own_log.ChangedRows(TOUCHED, known=True, deleted=DELETED))
    assert "mv_files_appended" not in fake.statements[0] and f"version as of {gone}" not in fake.statements[0]

    # the deleted rows computed from the masters the view reflected: the view is not read at all
    fake.statements.clear()
    old = "select 1 as `region_id`, 2 as `n`, 3 as `_mv_count` from `shop`.`m` version as of 7"
    rows = own_log.ChangedRows(TOUCHED, known=True, deleted=DELETED, inserted=True, deleted_rows=old)
    own_log.write(ctx, SPEC, "shop.v", before, after, rows)
    assert f"select `region_id`, `n`, `_mv_count` from (\n{old}\n) as `_mv_d`" in fake.statements[0]
    assert "`shop`.`v` version as of" not in fake.statements[0]


def test_a_log_behind_its_view_is_left_to_its_readers_capture():
    fake, ctx = warehouse(captured_through_view_main=False)
    before = fake.tables["shop.v"].refs["main"]
    after = fake.commit("shop.v", "overwrite", branch=None)
    result = own_log.write(ctx, SPEC, "shop.v", before, after, own_log.ChangedRows(TOUCHED))
    assert isinstance(result, str) and "next capture catches up" in result
    assert fake.statements == [] and fake.load("shop.mlog_v").branches == {}


def test_a_log_whose_columns_are_not_the_views_is_not_written():
    fake, ctx = warehouse(columns=VIEW[:2])
    before = fake.tables["shop.v"].refs["main"]
    result = own_log.write(ctx, SPEC, "shop.v", before, fake.commit("shop.v", "overwrite", branch=None), own_log.ChangedRows(TOUCHED))
    assert "columns differ" in result and fake.statements == []


def test_a_log_commit_that_loses_the_race_drops_its_branch_and_leaves_the_change_to_capture():
    fake, ctx = warehouse()
    before = fake.tables["shop.v"].refs["main"]
    after = fake.commit("shop.v", "overwrite", branch=None)
    pending = own_log.write(ctx, SPEC, "shop.v", before, after, own_log.ChangedRows(TOUCHED))
    fake.commit("shop.mlog_v", "delete")  # e.g. another process's purge
    assert "its next capture appends this change" in own_log.publish(ctx, pending)
    assert pending.branch not in fake.load("shop.mlog_v").branches


def test_an_unpublished_view_write_abandons_its_log_rows():
    fake, ctx = warehouse()
    before = fake.tables["shop.v"].refs["main"]
    pending = own_log.write(ctx, SPEC, "shop.v", before, fake.commit("shop.v", "overwrite", branch=None), own_log.ChangedRows(TOUCHED))
    own_log.abandon(ctx, [pending])
    assert fake.load("shop.mlog_v").branches == {}


def test_the_log_step_runs_after_the_writes_while_their_cached_views_exist_and_before_the_publish():
    statement = RefreshStatement(
        (Write(WriteKind.DELETE, "delete from b"), Write(WriteKind.INSERT, "insert into b select 1")), ("DELTA o",), (),
        branch="b", cached=(Cached("b_delta", "select 1"),), touched=TOUCHED,
    )
    steps = staged_statement(ViewState(logs={}, method="fast", base=1, run="r"), statement, log=True)
    cache = 3  # the settings, the cache, the settings back
    assert [s.name for s in steps] == ["cache"] * cache + ["delete", "stage", "main", "unstage", "log", "uncache", "publish"]
    assert [s.settings for s in (steps[0], steps[2])] == [CACHE_PLANNING, tuple((k, None) for k, _ in CACHE_PLANNING)]
    assert steps[cache + 4].wap_id == steps[-1].wap_id == steps[cache + 1].settings[0][1]  # the log rows belong to the staged commit
    assert "log" not in [s.name for s in staged_statement(ViewState(logs={}, method="fast", base=1), statement)]


def graph(model_config, log_meta):
    return {
        "nodes": {"model.p.v": {"resource_type": "model", "name": "v", "schema": "shop", "config": model_config}},
        "sources": {"source.p.logs.mlog_v": {
            "source_name": "logs", "name": "mlog_v", "schema": "shop", "meta": {"mv_log": log_meta},
        }},
    }


@pytest.mark.parametrize("config", [
    {"materialized": "fast_refresh", "mv_log": True},
    {"materialized": "incremental", "incremental_strategy": "logged_merge"},
])
def test_a_log_its_master_writes_is_capture_managed_for_the_commits_a_crash_left_out(config):
    [spec] = log_specs_from_graph(graph(config, {"master": "v", "key": ["region_id"]}))
    assert spec.capture
    [plain] = log_specs_from_graph(graph({"materialized": "fast_refresh"}, {"master": "v", "key": ["region_id"]}))
    assert not plain.capture


def test_mv_log_must_be_a_boolean():
    assert FastRefreshConfig.from_model_config("v", {"mv_log": True}).mv_log
    with pytest.raises(ConfigError, match="mv_log='yes' must be true or false"):
        FastRefreshConfig.from_model_config("v", {"mv_log": "yes"})


def test_a_logged_merge_names_what_is_missing():
    with pytest.raises(LoggedMergeError, match="no change log of stg is declared"):
        MergeConfig.from_model_config("stg", {"unique_key": "id"}, None)
    spec = LogSpec("logs.mlog_stg", "shop.mlog_stg", "stg", "shop.stg", ("id",), True)
    with pytest.raises(LoggedMergeError, match="set unique_key"):
        MergeConfig.from_model_config("stg", {}, spec)
    with pytest.raises(LoggedMergeError, match=r"unique_key \['code'\] differs from the key"):
        MergeConfig.from_model_config("stg", {"unique_key": "code"}, spec)


def test_a_logged_merge_is_dbts_merge_into_the_write_branch_and_logs_the_keys_it_read():
    spec = LogSpec("logs.mlog_stg", "shop.mlog_stg", "stg", "shop.stg", ("id", "day"), True)
    config = MergeConfig.from_model_config(
        "stg", {"unique_key": ["day", "id"], "incremental_predicates": ["DBT_INTERNAL_DEST.day > '2026-01-01'"]}, spec,
    )
    sql = merge_sql(config, "`shop`.`stg`.`branch_b`", "new_rows", ["id", "day", "v"])
    assert sql == (
        "merge into `shop`.`stg`.`branch_b` as DBT_INTERNAL_DEST\nusing `new_rows` as DBT_INTERNAL_SOURCE\n"
        "on DBT_INTERNAL_DEST.`id` = DBT_INTERNAL_SOURCE.`id` and DBT_INTERNAL_DEST.`day` = DBT_INTERNAL_SOURCE.`day` "
        "and (DBT_INTERNAL_DEST.day > '2026-01-01')\n"
        "when matched then update set *\nwhen not matched then insert *"
    )
    assert keys_merged(config, "new_rows") == (
        "(`id`, `day`) in (select /*+ BROADCAST */ * from (\nselect `id`, `day` from `new_rows`\n))"
    )
    excluded = MergeConfig.from_model_config("stg", {"unique_key": ["id", "day"], "merge_exclude_columns": ["v"]}, spec)
    assert "update set DBT_INTERNAL_DEST.`id` = DBT_INTERNAL_SOURCE.`id`, DBT_INTERNAL_DEST.`day`" in merge_sql(
        excluded, "t", "new_rows", ["id", "day", "v"])


def merge_warehouse(new_rows: int):
    fake = FakeIceberg()
    fake.table("shop.stg", [("id", "bigint"), ("v", "string")])
    log = fake.table("shop.mlog_stg", [("id", "bigint"), ("v", "string")] + LOG_COLUMNS, {"format-version": "3"})
    fake.log_rows(log.name, "W", commit=fake.tables["shop.stg"].refs["main"])
    log.properties.update(log_properties.capture_property(fake.tables["shop.stg"].refs["main"], log.refs["main"]))
    answer = fake.query

    def query(sql):
        if sql.startswith("select 1 from `mv_merge_"):
            fake.statements.append(sql)
            return [(1,)] * new_rows
        return answer(sql)
    ctx = RefreshContext(query, fake.execute, fake.metadata())
    spec = LogSpec("logs.mlog_stg", "shop.mlog_stg", "stg", "shop.stg", ("id",), True)
    return fake, ctx, spec, MergeConfig.from_model_config("stg", {"unique_key": "id"}, spec)


def planning_statements(analysed_plans=True):
    """The cache planning settings and their reset, as the statements they stand for."""
    return tuple(setting_statements(settings) for settings in cache_planning(analysed_plans=analysed_plans))


def test_a_logged_merge_merges_on_a_branch_logs_the_keys_it_merged_then_publishes_the_table_and_then_its_log():
    from dbt_incremental_mv.refresh.operations import logged_merge

    fake, ctx, spec, config = merge_warehouse(new_rows=1)
    base = fake.tables["shop.stg"].refs["main"]
    line = logged_merge.run(ctx, config, spec, "shop.stg", "stg__dbt_tmp")
    assert line.startswith("merged into shop.stg; logged "), line
    before, after = planning_statements()  # the cache planned in the session itself, those settings reset after
    cache, probe, merge, log = fake.statements
    assert fake.settings == before + after  # made through the session, no statement
    assert fake.trace[:len(before) + 1] == [f"[session] {s}" for s in before] + [cache]
    assert cache.startswith("cache table `mv_merge_") and cache.endswith("select * from `stg__dbt_tmp`")
    assert probe.startswith("select 1 from `mv_merge_") and probe.endswith("limit 1")
    assert merge.startswith("merge into `shop`.`stg`.`branch_mv_write_")
    assert log.startswith("insert into `shop`.`mlog_stg`.`branch_mv_capture_") and f"version as of {base}" in log
    merged = fake.tables["shop.stg"].refs["main"]
    assert merged != base and f"version as of {merged}" in log and "(`id`) in (select /*+ BROADCAST */" in log
    assert [c.split(" ")[0] for c in fake.commits] == ["create", "create", "fast_forward", "fast_forward"]
    assert fake.commits[2].startswith("fast_forward shop.stg") and fake.commits[3].startswith("fast_forward shop.mlog_stg")
    assert log_properties.captured_through(fake.load("shop.mlog_stg")).master_snapshot == merged
    assert fake.tables["shop.stg"].refs.keys() == {"main"} and fake.tables["shop.mlog_stg"].refs.keys() == {"main"}


def test_a_logged_merge_without_new_rows_commits_nothing():
    from dbt_incremental_mv.refresh.operations import logged_merge

    fake, ctx, spec, config = merge_warehouse(new_rows=0)
    assert logged_merge.run(ctx, config, spec, "shop.stg", "stg__dbt_tmp") == "no new rows: nothing merged or logged"
    before, after = planning_statements()
    assert len(fake.statements) == 2 and fake.settings == before + after and fake.commits == []  # cache, probe


def test_a_logged_merge_whose_cache_fails_resets_the_cache_planning_settings():
    from dbt_incremental_mv.refresh.operations import logged_merge

    fake, ctx, spec, config = merge_warehouse(new_rows=1)
    execute = ctx.execute

    def failing(sql):
        if sql.startswith("cache table"):
            raise RuntimeError("out of memory")
        execute(sql)
    ctx = RefreshContext(ctx.query, failing, ctx.metadata)
    with pytest.raises(RuntimeError, match="out of memory"):
        logged_merge.run(ctx, config, spec, "shop.stg", "stg__dbt_tmp")
    before, after = planning_statements()
    assert fake.settings == before + after  # not left set in the session


def test_on_spark_4_1_a_logged_merge_caches_the_new_rows_with_their_sql_text():
    """Spark 4.1 cannot MERGE from a cached view that keeps its analysed plan and reads the target
    (SPARK-57539): there the cache is planned without ``storeAnalyzedPlanForView``."""
    from dbt_incremental_mv.refresh.operations import logged_merge

    fake, ctx, spec, config = merge_warehouse(new_rows=1)
    fake.spark = "4.1.1 c0690c763bafabd08e7079d1137fa0a769a05bae"
    logged_merge.run(ctx, config, spec, "shop.stg", "stg__dbt_tmp")
    before, after = planning_statements(analysed_plans=False)
    assert fake.settings == before + after and not any("storeAnalyzedPlanForView" in s for s in before)
    assert fake.trace[len(before)].startswith("cache table `mv_merge_")
    assert any("storeAnalyzedPlanForView" in s for s in planning_statements()[0])  # before 4.1: the analysed plan


def test_an_engine_whose_version_cannot_be_read_gets_the_statements_of_spark_3_5():
    fake = FakeIceberg()
    fake.spark = "unknown"
    assert fake.metadata().spark() == (3, 5)
    fake = FakeIceberg()
    fake.spark = "4.1.1 c0690c7"
    assert fake.metadata().spark() == (4, 1)


def test_a_compaction_since_the_logs_watermark_does_not_keep_the_log_from_being_written():
    fake, ctx = warehouse()
    fake.commit("shop.v", "replace")  # the refresh's compaction after its publish: no row changed
    before = fake.tables["shop.v"].refs["main"]
    after = fake.commit("shop.v", "overwrite", branch=None)
    pending = own_log.write(ctx, SPEC, "shop.v", before, after, own_log.ChangedRows(TOUCHED))
    assert isinstance(pending, own_log.PendingLog), pending
    # any other commit since (a write that escaped the log) is left to the readers' capture
    fake, ctx = warehouse()
    fake.commit("shop.v", "overwrite")
    before = fake.tables["shop.v"].refs["main"]
    after = fake.commit("shop.v", "overwrite", branch=None)
    assert isinstance(own_log.write(ctx, SPEC, "shop.v", before, after, own_log.ChangedRows(TOUCHED)), str)
