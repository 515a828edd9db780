"""The refresh history (refresh/operations/history.py): the row each refresh keeps, and the one INSERT that
writes a command's rows; no Spark."""

from __future__ import annotations

import datetime

import sqlglot

from dbt_incremental_mv.refresh.operations.history import COLUMNS, HistoryRow, MarkedCount, create_sql, insert_sql
from tests.unit.warehouse import Warehouse

AT = datetime.datetime(2026, 11, 25, 7, 30, tzinfo=datetime.timezone.utc)


def row_of(warehouse: Warehouse) -> HistoryRow:
    engine, run, propagation, line = warehouse.last
    return engine.history_row(run, propagation, line, "inv-1")


def test_a_fast_refresh_keeps_its_method_marks_steps_statements_and_snapshot():
    warehouse = Warehouse("join")
    warehouse.refresh()
    build = row_of(warehouse)
    assert (build.method, build.reason) == ("build", "first run: building the view in full")
    assert {m.kind for m in build.marked} == {"none"}
    warehouse.change("orders")
    warehouse.fake.statements.clear()
    warehouse.refresh()
    fast = row_of(warehouse)
    assert fast.method == "fast" and fast.model == "v" and fast.view == "shop.v"
    assert fast.marked == (MarkedCount("shop.customers", "none", 0, 0), MarkedCount("shop.orders", "mixed", 1, 1))
    assert fast.steps_run and fast.statements == len(warehouse.fake.statements)  # the publish is metadata
    assert fast.view_snapshot == warehouse.fake.tables["shop.v"].refs["main"]
    assert fast.summary.startswith("fast refresh: ")


def test_a_refresh_with_nothing_to_do_keeps_a_row_without_a_statement():
    warehouse = Warehouse("aggregate")
    warehouse.refresh()
    warehouse.fake.statements.clear()
    warehouse.refresh()
    idle = row_of(warehouse)
    assert (idle.method, idle.reason, idle.statements) == ("none", "nothing to refresh", 0)
    assert idle.view_snapshot == warehouse.fake.tables["shop.v"].refs["main"]
    assert warehouse.fake.statements == []


def test_the_insert_quotes_every_value_and_parses():
    hostile = HistoryRow(
        AT, "inv'1", "m", "s.v", "fast", "it's; drop table x --", (MarkedCount("raw.o'rders", "mixed", 3, 2),),
        ("DELTA orders",), (), 3, 2, 7, {"plan": 0.5, "total": 1.25}, 42, "line\nwith 'quotes'",
    )
    empty = HistoryRow(AT, "inv", "m", "s.v", "none", "nothing to refresh")
    sql = insert_sql("ops.mv_refresh_history", [hostile, empty])
    assert sql == insert_sql("ops.mv_refresh_history", [hostile, empty]), "deterministic"
    parsed = sqlglot.parse_one(sql, read="spark")
    values = parsed.expression.expressions
    assert len(values) == 2 and all(len(v.expressions) == len(COLUMNS) for v in values)
    assert "drop table x" not in sql.replace("'it\\'s; drop table x --'", "")
    assert "cast('2026-11-25 07:30:00.000000' as timestamp)" in sql
    timed = HistoryRow(AT, "inv", "m", "s.v", "fast", "fast refresh", clock="2026-12-01 09:00:00")
    assert insert_sql("h.t", [timed]).endswith(", '2026-12-01 09:00:00')")
    assert insert_sql("h.t", [empty]).endswith(", cast(null as string))")
    sqlglot.parse_one(create_sql("ops.mv_refresh_history"), read="spark")


def test_mv_status_reads_the_newest_row_of_each_view_in_one_query():
    from dbt_incremental_mv.refresh.operations.history import last_refresh_line, last_refresh_sql

    sql = last_refresh_sql("ops.mv_refresh_history", ["s.b", "s.a", "s.a"])
    assert "where view in ('s.a', 's.b')" in sql and "partition by view order by refreshed_at desc" in sql
    sqlglot.parse_one(sql, read="spark")
    at = datetime.datetime(2026, 11, 25, 7, 30, 1)
    assert last_refresh_line("fast", "estimated ...", at, 1.234, 3, 2) == "last refresh 2026-11-25 07:30:01: fast, 1.2 s, rows +3 -2"
    assert last_refresh_line("complete", "estimated 9.0 s fast vs 2.0 s complete", at, 2.0, None, None) == (
        "last refresh 2026-11-25 07:30:01: complete, 2.0 s (estimated 9.0 s fast vs 2.0 s complete)"
    )


def test_the_reads_of_a_refresh_are_kept_in_total_and_per_table():
    from dbt_incremental_mv.reads import Reads, StatementReads, TableScan
    from dbt_incremental_mv.refresh.operations.history import missing_columns_sql

    reads = Reads.of([
        StatementReads("delete from v", (TableScan("s.v", 2, 6, 2000, 10), TableScan("s.mlog_o", 1, 0, 100, 3)), 1500),
        StatementReads("insert into v", (TableScan("s.o", 3, 5, 3000, 40), TableScan("s.v", 1, 7, 1000, 2)), None),
    ])
    assert (reads.files, reads.skipped_files, reads.bytes, reads.input_bytes) == (7, 18, 6100, 1500)
    assert [(t.table, t.files, t.skipped_files, t.bytes, t.scans) for t in reads.by_table()] == [
        ("s.o", 3, 5, 3000, 1), ("s.v", 3, 13, 3000, 2), ("s.mlog_o", 1, 0, 100, 1),
    ]
    assert reads.describe() == "read 7 data files (6 KB), skipped 18: s.o 3 (3 KB), s.v 3 (3 KB), s.mlog_o 1 (0 KB)"
    measured = HistoryRow(AT, "inv", "m", "s.v", "fast", "r", reads=reads)
    unknown = HistoryRow(AT, "inv", "m", "s.v", "complete", "r")
    sql = insert_sql("ops.mv_refresh_history", [measured, unknown])
    values = sqlglot.parse_one(sql, read="spark").expression.expressions
    assert all(len(v.expressions) == len(COLUMNS) for v in values)
    assert "named_struct('table', 's.v', 'files', 3, 'skipped_files', 13, 'bytes', 3000)" in sql
    assert "cast(null as array<struct<table:string,files:bigint,skipped_files:bigint,bytes:bigint>>)" in sql
    # a history table made by an earlier version gets the new columns, nothing else
    older = [name for name, _, _ in COLUMNS if name not in ("files_read", "reads")]
    added = missing_columns_sql("ops.mv_refresh_history", older)
    assert [s.split(" add columns (")[1].split()[0] for s in added] == ["files_read", "reads"]
    for statement in added:
        sqlglot.parse_one(statement, read="spark")
    assert missing_columns_sql("ops.mv_refresh_history", [name for name, _, _ in COLUMNS]) == []


def test_a_statement_is_named_by_its_first_words_and_its_scans_by_table():
    from dbt_incremental_mv.adapter.scan_metrics import _number, label, table_name

    assert label("/* {\"app\": \"dbt\"} */\n  insert into   `s`.`v`\nselect 1") == "insert into `s`.`v` select 1"
    assert table_name("BatchScan spark_catalog.tpch.orders") == "tpch.orders"
    assert table_name("BatchScan other.db.t") == "other.db.t"
    assert (_number("187,500"), _number("1765704"), _number("n/a")) == (187500, 1765704, 0)


def test_the_scans_of_an_execution_are_its_iceberg_batch_scans_with_their_metrics():
    """As ``statement_reads`` gets them from Spark 3.5's status store (rendered by Jackson): a
    whole-stage-codegen cluster is listed with its nodes nested and the nodes beside it."""
    from dbt_incremental_mv.adapter.scan_metrics import scans_of
    from dbt_incremental_mv.reads import TableScan

    def metric(name, accumulator):
        return {"name": name, "accumulatorId": accumulator, "metricType": "sum"}

    iceberg = {"id": 4, "name": "BatchScan spark_catalog.db.t", "desc": "BatchScan spark_catalog.db.t[k#7, v#8]",
               "metrics": [metric("number of output rows", 73), metric("number of result data files", 74),
                           metric("number of skipped data files", 75), metric("total data file size (bytes)", 82),
                           metric("number of result delete files", 83), metric("total planning duration (ms)", 84)]}
    parquet = {"id": 5, "name": "BatchScan parquet file:/x", "desc": "", "metrics": [metric("number of output rows", 90)]}
    cluster = {"id": 1, "name": "WholeStageCodegen (1)", "desc": "", "nodes": [iceberg], "metrics": [metric("duration", 91)]}
    values = {"73": "187,500", "74": "3", "75": "13", "82": "1765704", "83": "0", "84": "5 ms", "90": "7", "91": "8 ms"}
    assert scans_of([cluster, iceberg, parquet], values) == [
        TableScan(table="db.t", files=3, skipped_files=13, bytes=1765704, rows=187500, delete_files=0)]
    # a metric the execution never updated has no value: 0
    assert scans_of([iceberg], {"74": "2"}) == [TableScan(table="db.t", files=2, skipped_files=0, bytes=0, rows=0, delete_files=0)]
    # no node of an Iceberg scan (no data-file count): nothing
    assert scans_of([parquet, {"id": 9, "name": "Project"}], values) == []
    # a cached relation read twice lists its scan under each reader (other node ids, the same
    # accumulators): one scan; another scan of the same table (its own accumulators) counts
    again = {**iceberg, "id": 12}
    other = {**iceberg, "id": 13, "metrics": [metric("number of result data files", 95)]}
    assert [s.files for s in scans_of([iceberg, again, other], {**values, "95": "2"})] == [3, 2]


def test_only_the_executions_newer_than_the_statements_are_fetched():
    """Execution ids come from one counter and the store lists them by id (some evicted): the
    newer ones are among the last ``newest id - after`` of the list."""
    from types import SimpleNamespace

    from dbt_incremental_mv.adapter.scan_metrics import executions_after

    class Store:
        def __init__(self, ids):
            self.ids, self.fetched = ids, 0

        def executionsCount(self):  # noqa: N802 - Spark's names
            return len(self.ids)

        def executionsList(self, offset, length):  # noqa: N802
            self.fetched += length
            executions = [SimpleNamespace(executionId=lambda i=i: i) for i in self.ids[offset:offset + length]]
            return SimpleNamespace(iterator=lambda: JavaIterator(executions))

    class JavaIterator:
        def __init__(self, items):
            self.items = list(items)

        def hasNext(self):  # noqa: N802 - Java's names
            return bool(self.items)

        def next(self):
            return self.items.pop(0)

    def newer(ids, after):
        store = Store(ids)
        return [e.executionId() for e in executions_after(store, after)], store.fetched

    assert newer([3, 5, 6, 8, 9], 6) == ([8, 9], 1 + 3)  # the newest, then the last 3 (ids 7-9; 7 is gone)
    assert newer([3, 5, 6, 8, 9], 8) == ([9], 1)
    assert newer([3, 5, 6, 8, 9], 9) == ([], 1)
    assert newer([3, 5, 6, 8, 9], -1) == ([3, 5, 6, 8, 9], 1 + 5)  # never more than the store holds
    assert newer([], -1) == ([], 0)
