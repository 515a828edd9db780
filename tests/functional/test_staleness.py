"""Staleness (issue 9): a view whose changes are no longer available is refreshed completely
(or fails under refresh_method='fast'), never partially; mv_status says how each view stands."""

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.test_definition_changes import SOURCES  # orders and its captured log
from tests.functional.util import assert_view_matches_query, force_as_a_rule, rows  # noqa: F401 - a fixture

SELECT = "select o.order_id, o.amount from {{ source('shop', 'orders') }} o"
MODELS = {
    "v.sql": "{{ config(materialized='fast_refresh') }}\n" + SELECT,
    "v_fast.sql": "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n" + SELECT,
    "sources.yml": SOURCES,
}


def status(project, *args):
    _, log = run_dbt_and_capture(["run-operation", "mv_status", *args])
    return log


def snapshots(project, *tables):
    return {
        t: rows(project, f"select snapshot_id from {project.test_schema}.{t}.`refs` where name = 'main'")
        for t in tables
    }


@pytest.mark.usefixtures("force_as_a_rule")  # v: force's fallback, not its cost-based choice
class StalenessProject:
    @pytest.fixture(scope="class")
    def models(self):
        return MODELS

    def setup_masters(self, project):
        schema = project.test_schema
        project.run_sql(f"create table {schema}.orders (order_id bigint, amount decimal(10,2)) using iceberg")
        project.run_sql(f"insert into {schema}.orders values (1, 5.00), (2, 50.00)")
        run_dbt(["run"])
        return schema

    def check(self, project, view):
        schema = project.test_schema
        assert_view_matches_query(
            project, f"{schema}.{view}", f"select order_id, amount from {schema}.orders", columns="order_id, amount"
        )


class TestLogDeletedByHand(StalenessProject):
    def test_unconsumed_changes_deleted_from_the_log(self, project):
        schema = self.setup_masters(project)
        log = status(project)
        assert "v: fresh" in log and "v_fast: fresh" in log, log
        assert "v_fast" not in status(project, "--args", "{models: [v]}")
        run_dbt(["run-operation", "mv_status", "--args", "{fail_on: [stale, needs_rebuild, unusable]}"])  # passes

        project.run_sql(f"insert into {schema}.orders values (3, 7.00)")
        project.run_sql(f"update {schema}.orders set amount = 6.00 where order_id = 1")
        before = snapshots(project, "v", "v_fast", "mlog_orders", "orders")
        log = status(project)
        assert f"v: stale (changes pending: {schema}.orders: 2 uncaptured commit(s))" in log, log
        # a CI gate: the command fails naming the views in the states asked for
        _, log = run_dbt_and_capture(["run-operation", "mv_status", "--args", "{fail_on: stale}"], expect_pass=False)
        assert "mv_status: 2 view(s) in a state named by fail_on: v (stale), v_fast (stale)" in log, log
        _, log = run_dbt_and_capture(["run-operation", "mv_status", "--args", "{fail_on: [late]}"], expect_pass=False)
        assert "fail_on names 'late', which is not a state. Allowed: stale, needs_rebuild, unusable, not_built" in log
        assert snapshots(project, "v", "v_fast", "mlog_orders", "orders") == before  # status changed nothing

        run_dbt(["run-operation", "capture_mv_log"])
        log = status(project, "--args", "{models: [v_fast]}")
        assert f"v_fast: stale (changes pending: {schema}.orders: 3 logged change(s))" in log, log
        assert "v: " not in log.replace("v_fast: ", "")

        # someone deletes log rows the views have not consumed yet
        project.run_sql(f"delete from {schema}.mlog_orders where _mv_op = 'I'")
        log = status(project)
        assert "v_fast: needs rebuild (2 change(s) the view had not consumed were deleted from" in log, log

        # refresh_method='fast': fails naming the log and what to do, the view is unchanged
        _, log = run_dbt_and_capture(["run", "--select", "v_fast"], expect_pass=False)
        assert "cannot be fast refreshed: 2 change(s) the view had not consumed were deleted from" in log, log
        assert "mlog_orders" in log and "refresh_method='force'" in log
        assert sorted(rows(project, f"select order_id, amount from {schema}.v_fast")) == [(1, 5), (2, 50)]

        # the default (force): a complete refresh, the reason in the log line
        project.run_sql(f"insert into {schema}.orders values (4, 9.00)")
        _, log = run_dbt_and_capture(["run", "--select", "v"])
        assert "v: complete (fast refresh impossible: 2 change(s) the view had not consumed were deleted" in log, log
        self.check(project, "v")
        project.run_sql(f"delete from {schema}.orders where order_id = 2")
        _, log = run_dbt_and_capture(["run", "--select", "v"])
        assert "v: fast refresh:" in log, log  # in step again
        self.check(project, "v")

        run_dbt(["run", "--select", "v_fast", "--full-refresh"])
        self.check(project, "v_fast")
        assert "v: fresh" in status(project) and "v_fast: fresh" in status(project)


class TestCompaction(StalenessProject):
    @pytest.fixture(scope="class")
    def models(self):
        manual = "{{ config(materialized='fast_refresh', refresh_method='fast', auto_compact=false) }}\n" + SELECT
        return {**MODELS, "v_manual.sql": manual}

    def test_a_refresh_compacts_its_view_when_due_and_mv_compact_the_views_that_do_not(self, project, monkeypatch):
        import re

        from dbt_incremental_mv import layout

        schema = self.setup_masters(project)
        # due at 6 files beyond the 1 a rewrite of this small view leaves (32 unpatched: as many rounds)
        monkeypatch.setattr(layout, "COMPACT_EXTRA_FILES", 2)
        monkeypatch.setattr(layout, "COMPACT_EXTRA_PER_FILE", 4)

        def extra_files(view):
            found = dict(rows(project, f"select content, count(*) from {schema}.{view}.files group by content"))
            return found.get(0, 0) - 1 + sum(n for content, n in found.items() if content != 0)

        compacted = []
        for round_number in range(8):  # each refresh deletes by position and inserts: a delete and a data file
            project.run_sql(f"update {schema}.orders set amount = amount + 1 where order_id = 1")
            project.run_sql(f"insert into {schema}.orders values ({10 + round_number}, 1.00)")
            _, log = run_dbt_and_capture(["run", "--select", "v_fast", "v_manual"])
            assert "v_fast: fast refresh:" in log and "v_manual: fast refresh:" in log, log
            assert not [line for line in log.splitlines() if "v_manual: fast refresh:" in line and "compacted" in line]
            compacted += [
                line for line in log.splitlines() if "v_fast: fast refresh:" in line and "; compacted " in line
            ]
            self.check(project, "v_fast")
            if compacted:
                break
            assert extra_files("v_fast") < 6, round_number  # not due: not compacted
        # the refresh that left 6 extra files compacted them (auto_compact, the default)
        assert len(compacted) == 1 and "delete files to 1 and 0 in" in compacted[0], compacted
        data, deletes = map(int, re.search(r"compacted (\d+) data and (\d+) delete files", compacted[0]).groups())
        assert data - 1 + deletes >= 6, compacted
        assert extra_files("v_manual") >= 6  # the same refreshes, not compacted
        files = rows(project, f"select content, count(*) from {schema}.v_fast.files group by content")
        assert files == [(0, 1)], files  # one data file, no delete file
        history = rows(
            project,
            f"select seconds['compact'] from {schema}.mv_refresh_history where model = 'v_fast' "
            "and seconds['compact'] is not null",
        )
        assert len(history) == 1 and history[0][0] > 0, history

        # explain says the files and when they are compacted
        _, log = run_dbt_and_capture(["run-operation", "explain_fast_refresh", "--args", "{model: v_fast}"])
        assert "files: 1 data files and 0 delete files, " in log, log
        assert (
            "a fast refresh that leaves 6 files beyond the 1 data files a rewrite leaves (now 0) compacts the view"
        ) in log, log
        _, log = run_dbt_and_capture(["run-operation", "explain_fast_refresh", "--args", "{model: v_manual}"])
        assert "auto_compact=false: compaction due, `dbt run-operation mv_compact` runs it" in log, log

        # auto_compact=false: mv_status recommends it, mv_compact runs it
        log = status(project, "--args", "{models: [v_manual, v_fast]}")
        assert "v_manual: fresh; compaction recommended (" in log, log
        assert [line for line in log.splitlines() if line.startswith("v_fast: fresh; last refresh ")], log
        assert "dbt run-operation mv_compact --args '{models: [v_manual]}'" in log
        _, log = run_dbt_and_capture(["run-operation", "mv_compact", "--args", "{models: [v_manual]}"])
        assert "v_manual: compacted in" in log and "-> 1 data files and 0 delete files" in log, log
        _, log = run_dbt_and_capture(["run-operation", "mv_compact", "--args", "{models: [v_manual]}"])
        assert "v_manual: not due (1 data files and 0 delete files" in log, log
        assert "compaction recommended" not in status(project, "--args", "{models: [v_manual]}")
        self.check(project, "v_manual")
        # the refreshes read their state through the compactions' commits
        project.run_sql(f"delete from {schema}.orders where order_id = 2")
        _, log = run_dbt_and_capture(["run", "--select", "v_fast", "v_manual"])
        assert "v_fast: fast refresh:" in log and "v_manual: fast refresh:" in log, log
        self.check(project, "v_fast")
        self.check(project, "v_manual")

        # refreshes that insert only leave small data files: only they are rewritten (once the row
        # deleted above, a tenth of this view's rows, is gone with a whole rewrite), and the
        # refreshes read their state through that commit too
        monkeypatch.setattr(layout, "COMPACT_SMALL_VIEW_EXTRA_FILES", 4)
        packed = []
        for round_number in range(10):
            project.run_sql(f"insert into {schema}.orders values ({100 + round_number}, 1.00)")
            _, log = run_dbt_and_capture(["run", "--select", "v_fast"])
            packed += [line for line in log.splitlines() if "v_fast: fast refresh:" in line and "; rewrote its small" in line]
            self.check(project, "v_fast")
            if packed:
                break
        assert len(packed) == 1 and "rewrote its small data files: " in packed[0], packed
        files = rows(project, f"select content, count(*) from {schema}.v_fast.files group by content")
        assert dict(files).get(0, 0) <= 2, files  # the build's file and the small ones in one
        project.run_sql(f"update {schema}.orders set amount = amount + 1 where order_id = 100")
        _, log = run_dbt_and_capture(["run", "--select", "v_fast"])
        assert "v_fast: fast refresh:" in log, log
        self.check(project, "v_fast")

        # killed in the middle of a compaction (its data files rewritten, the deletes left pointing
        # at them not yet dropped): the view is as its refresh published it, and the next refresh
        # reads its state through the compaction's commit and compacts
        from dbt_incremental_mv import layout
        from dbt_incremental_mv.refresh.phases import compact as compact_phase

        def killed(ctx, planned):
            ctx.execute(planned.statements[0])
            raise RuntimeError("killed during the compaction")

        monkeypatch.setattr(layout, "COMPACT_EXTRA_FILES", 0)  # every refresh is due (at 0 extra files)
        monkeypatch.setattr(layout, "COMPACT_EXTRA_PER_FILE", 0)
        monkeypatch.setattr(compact_phase, "compact", killed)
        project.run_sql(f"update {schema}.orders set amount = amount + 1 where order_id = 1")
        _, log = run_dbt_and_capture(["run", "--select", "v_fast"], expect_pass=False)
        assert "killed during the compaction" in log, log
        self.check(project, "v_fast")
        monkeypatch.undo()
        monkeypatch.setattr(layout, "COMPACT_EXTRA_FILES", 0)
        monkeypatch.setattr(layout, "COMPACT_EXTRA_PER_FILE", 0)
        project.run_sql(f"update {schema}.orders set amount = amount + 1 where order_id = 1")
        project.run_sql(f"insert into {schema}.orders values (99, 9.00)")
        _, log = run_dbt_and_capture(["run", "--select", "v_fast"])
        assert [line for line in log.splitlines() if "v_fast: fast refresh:" in line and "; compacted " in line], log
        self.check(project, "v_fast")

        # a compaction that fails (here: a procedure the catalog does not have) is a warning: the
        # refresh is published, the model succeeds
        def failing(relation, files, table):
            return compact_phase.Compaction(relation, files, ("call system.no_such_procedure(table => 'x')",))

        monkeypatch.setattr(compact_phase, "compaction", failing)
        project.run_sql(f"update {schema}.orders set amount = amount + 1 where order_id = 1")
        _, log = run_dbt_and_capture(["run", "--select", "v_fast"])
        assert "v_fast: fast refresh:" in log and "compaction failed (the view is as the refresh published it)" in log
        assert "Model 'v_fast': " in log and "was refreshed, but compacting it then failed: " in log, log
        self.check(project, "v_fast")


class TestLogRecreated(StalenessProject):
    def test_dropped_and_recreated_log(self, project):
        schema = self.setup_masters(project)
        project.run_sql(f"insert into {schema}.orders values (3, 7.00)")
        project.run_sql(f"drop table {schema}.mlog_orders")
        assert "v: needs rebuild (the change log" in status(project)
        run_dbt(["run-operation", "create_mv_log"])  # recreated empty, capturing from now on
        assert "no longer holds the snapshot" in status(project)
        _, log = run_dbt_and_capture(["run"], expect_pass=False)
        assert "v: complete (fast refresh impossible: the change log" in log, log
        assert "Model 'v_fast' cannot be fast refreshed: the change log" in log, log
        self.check(project, "v")
        assert sorted(rows(project, f"select order_id, amount from {schema}.v_fast")) == [(1, 5), (2, 50)]


class TestMasterHistoryRewritten(StalenessProject):
    def test_rolled_back_and_expired_master_history(self, project):
        schema = self.setup_masters(project)
        first = rows(project, f"select snapshot_id from {schema}.orders.`refs` where name = 'main'")[0][0]
        project.run_sql(f"insert into {schema}.orders values (3, 7.00)")
        run_dbt(["run"])  # captured and consumed
        # the master is rolled back past what was captured
        project.run_sql(f"call spark_catalog.system.rollback_to_snapshot('{schema}.orders', {first})")
        assert f"needs rebuild (the history of shop.orders ({schema}.orders) was rewritten" in status(project)
        _, log = run_dbt_and_capture(["run", "--select", "v_fast"], expect_pass=False)
        assert f"the history of shop.orders ({schema}.orders) was rewritten or expired before it was captured" in log, (
            log
        )
        assert sorted(rows(project, f"select order_id from {schema}.v_fast")) == [(1,), (2,), (3,)]  # unchanged
        _, log = run_dbt_and_capture(["run", "--select", "v"])
        assert (
            "v: complete (fast refresh impossible: " in log and "was rewritten or expired before it was captured" in log
        ), log
        self.check(project, "v")

        # snapshots expired before they were captured
        project.run_sql(f"insert into {schema}.orders values (5, 1.00)")
        project.run_sql(f"insert into {schema}.orders values (6, 2.00)")
        project.run_sql(
            f"call spark_catalog.system.expire_snapshots(table => '{schema}.orders', "
            "older_than => timestamp '2999-01-01 00:00:00', retain_last => 1)"
        )
        _, log = run_dbt_and_capture(["run", "--select", "v"])
        assert "was rewritten or expired before it was captured" in log, log
        self.check(project, "v")
        _, log = run_dbt_and_capture(["run", "--select", "v"])
        assert "v: fast refresh:" in log, log


class TestSnapshotExpiry(StalenessProject):
    """A refresh expires the view's old snapshots once enough are due (refresh/phases/expire.py):
    never the one that holds its state (compactions come after it), so it stays fast refreshed."""

    @pytest.fixture(scope="class")
    def models(self):
        aged = (
            "{{ config(materialized='fast_refresh', refresh_method='fast', "
            "tblproperties={'history.expire.max-snapshot-age-ms': '0'}) }}\n" + SELECT
        )
        return {**MODELS, "v_aged.sql": aged}

    def test_old_snapshots_expire_and_the_view_stays_fast_refreshed(self, project, monkeypatch):
        from dbt_incremental_mv import layout
        from dbt_incremental_mv.refresh.phases import expire

        schema = self.setup_masters(project)
        monkeypatch.setattr(expire, "EXPIRE_BATCH", 4)
        monkeypatch.setattr(layout, "COMPACT_EXTRA_FILES", 1)  # compacted every few refreshes too
        monkeypatch.setattr(layout, "COMPACT_EXTRA_PER_FILE", 2)
        properties = dict(rows(project, f"show tblproperties {schema}.v_aged"))
        assert properties.get(layout.METADATA_CLEANUP) == "true", properties

        def count(view):
            return rows(project, f"select count(*) from {schema}.{view}.snapshots")[0][0]

        expired, compacted = [], []
        for round_number in range(8):
            project.run_sql(f"update {schema}.orders set amount = amount + 1 where order_id = 1")
            project.run_sql(f"insert into {schema}.orders values ({10 + round_number}, 1.00)")
            _, log = run_dbt_and_capture(["run", "--select", "v_aged", "v_fast"])
            line = next(line for line in log.splitlines() if "v_aged: fast refresh:" in line)  # the state kept
            expired += [line] if "; expired " in line else []
            compacted += [line] if "; compacted " in line else []
            assert "expired" not in next(line for line in log.splitlines() if "v_fast: " in line)  # a day's age
            self.check(project, "v_aged")
        assert expired and compacted, (expired, compacted)
        assert count("v_aged") < count("v_fast") - 8, (count("v_aged"), count("v_fast"))
        history = rows(
            project,
            f"select seconds['expire'] from {schema}.mv_refresh_history "
            "where model = 'v_aged' and seconds['expire'] is not null",
        )
        assert len(history) >= len(expired) and all(seconds > 0 for (seconds,) in history), history
        project.run_sql(f"delete from {schema}.orders where order_id = 2")
        _, log = run_dbt_and_capture(["run", "--select", "v_aged"])
        assert "v_aged: fast refresh:" in log, log
        self.check(project, "v_aged")
        _, log = run_dbt_and_capture(["run-operation", "explain_fast_refresh", "--args", "{model: v_aged}"])
        assert "history: " in log and "a refresh expires those older than 0 h" in log, log
        _, log = run_dbt_and_capture(["run-operation", "explain_fast_refresh", "--args", "{model: v_fast}"])
        assert "a refresh expires those older than 24 h (history.expire.max-snapshot-age-ms) once 4 are due" in log, log
