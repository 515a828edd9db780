"""What a fast refresh reads, pinned on small data where it is deterministic (reads.py): the data
files of each table its statements scanned and skipped, kept in the refresh history and the log
line. A master written as (at least) four files of ten keys each: a change of one key is read from one file."""

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.functional.util import rows

SOURCES = """
version: 2
sources:
  - name: shop
    schema: "{{ target.schema }}"
    tables:
      - name: items
  - name: logs
    schema: "{{ target.schema }}"
    tables:
      - name: mlog_items
        meta:
          mv_log: {master: shop.items, key: [item_id], capture: false}
"""

VIEW = (  # it reads a column the log does not carry: its INSERT reads the master for the changed keys
    "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n"
    "select item_id, grp, val, note from {{ source('shop', 'items') }} where val > 0"
)
LOGGED = (  # the log carries every column it reads: its INSERT reads the after images
    "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n"
    "select item_id, val from {{ source('shop', 'items') }} where val > 0"
)
TOTALS = (
    "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n"
    "select grp, count(*) as n, sum(val) as total from {{ source('shop', 'items') }} group by grp"
)


class TestReadsOfAFastRefresh:
    @pytest.fixture(scope="class")
    def models(self):
        return {"positive_items.sql": VIEW, "positive_values.sql": LOGGED, "totals.sql": TOTALS, "sources.yml": SOURCES}

    def test_one_changed_key_is_read_from_the_one_file_holding_it(self, project):
        schema = project.test_schema
        items, log = f"{schema}.items", f"{schema}.mlog_items"
        project.run_sql(f"create table {items} (item_id bigint, grp bigint, val int, note string) using iceberg")
        for first in (1, 11, 21, 31):  # one data file each
            values = ", ".join(f"({i}, {i % 3}, {i}, 'n{i}')" for i in range(first, first + 10))
            project.run_sql(f"insert into {items} values {values}")
        project.run_sql(
            f"create table {log} (item_id bigint, grp bigint, val int, _mv_op string, _mv_commit bigint, "
            "_mv_time timestamp) using iceberg tblproperties ('format-version' = '3')"
        )
        project.run_sql(f"insert into {log} select * from {log} where false")  # (a first snapshot)
        run_dbt(["run"])

        # the change, and its images as an ingestion would log them
        project.run_sql(f"update {items} set val = 99 where item_id = 25")
        (snapshot,) = rows(project, f"select snapshot_id from {items}.snapshots order by committed_at desc limit 1")[0]
        project.run_sql(
            f"insert into {log} values (25, 1, 25, 'D', {snapshot}, current_timestamp()), "
            f"(25, 1, 99, 'I', {snapshot}, current_timestamp())"
        )
        _, output = run_dbt_and_capture(["run"])
        assert "positive_items: fast refresh" in output and "read " in output, output

        history = f"{schema}.mv_refresh_history"
        reads = {
            view: {r[0]: (r[1], r[2]) for r in tables}
            for view, tables in rows(
                project,
                f"select view, transform(reads, t -> struct(t.table, t.files, t.skipped_files)) from {history} "
                "where method = 'fast'",
            )
        }
        # the join view's INSERT reads the master for key 25 only: the one file that can hold it
        (data_files,) = rows(project, f"select count(*) from {items}.files")[0]
        assert data_files >= 4 and reads[f"{schema}.positive_items"][items] == (1, data_files - 1), reads
        # the aggregate's delta, and the INSERT of the view whose columns the log carries, read the
        # log alone, never the master
        assert items not in reads[f"{schema}.totals"] and items not in reads[f"{schema}.positive_values"], reads
        assert reads[f"{schema}.positive_values"][log][0] >= 1
        assert reads[f"{schema}.totals"][log][0] >= 1
        files, skipped = rows(project, f"select files_read, files_skipped from {history} where method = 'fast' "
                                       f"and view = '{schema}.positive_items'")[0]
        assert files == sum(f for f, _ in reads[f"{schema}.positive_items"].values()) and skipped >= 3
