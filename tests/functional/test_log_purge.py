"""The row-level purge of a change log (logs/sql.py ``purge``) as the running Spark line runs it.

Over SQL (thrift, http) and for logs consumed on commit, a refresh purges the rows every view
consumed with one statement, whose form depends on the Spark line: a MERGE on Spark 3.5 and 4.0, a
DELETE from Spark 4.1, where that MERGE fails analysis on a copy-on-write table. A purge that fails
is reported and left for the next refresh, so the log would only grow: this checks the statement
itself on a real log, in the default suite (Spark 3.5) and the Spark 4 job (4.1)."""

from dbt_incremental_mv.logs import sql as log_sql
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.metadata import spark_line
from dbt_incremental_mv.refresh.phases.purge import DELETE_READS_METADATA_COLUMNS
from tests.functional.util import rows


class TestRowLevelPurge:
    def test_the_purge_deletes_what_every_view_consumed_and_keeps_the_rest(self, project):
        s = project.test_schema
        spec = LogSpec("raw.orders", f"{s}.mlog_orders", "orders", f"{s}.orders", ("order_id",), True)
        project.run_sql(log_sql.create_log(spec, [("order_id", "bigint"), ("amount", "int")]))
        for commit, changes in ((101, "(1, 10, 'I'), (2, 20, 'D')"), (102, "(3, 30, 'I')"), (103, "(4, 40, 'I')")):
            # a capture's commit: its changes and its watermark (sequence numbers 1, 2, 3)
            values = changes.replace("')", f"', {commit}, current_timestamp())")
            project.run_sql(f"insert into {s}.mlog_orders values {values}, (null, null, 'W', {commit}, current_timestamp())")
        sequence = dict(rows(project, f"select _mv_commit, max(_last_updated_sequence_number) from {s}.mlog_orders group by 1"))
        version = project.run_sql("select version()", fetch="one")[0]
        spark = spark_line(version)
        # one view consumed through commit 102; another through 101, and commit 102 on commit
        positions = [(sequence[102], ()), (sequence[101], (102,))]
        statement = log_sql.purge(spec, positions, sequence[103], as_delete=spark >= DELETE_READS_METADATA_COLUMNS)
        assert statement.startswith("delete from" if spark >= (4, 1) else "merge into"), (version, statement)
        project.run_sql(statement)
        remaining = sorted(rows(project, f"select _mv_op, _mv_commit, order_id from {s}.mlog_orders"), key=str)
        assert remaining == [("I", 103, 4), ("W", 103, None)], (version, remaining)
