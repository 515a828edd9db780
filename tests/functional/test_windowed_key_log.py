"""A windowed view over a master whose change log carries its key alone: the partitions a change
leaves are read from the view's rows of the changed keys, the ones it enters from the master's."""

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
QUERY = (
    "select item_id, grp, val, lag(val) over (partition by grp order by item_id) as previous_val, "
    "sum(val) over (partition by grp) as group_total from {items}"
)


class TestWindowedViewOverAKeyOnlyLog:
    @pytest.fixture(scope="class")
    def models(self):
        view = "{{ config(materialized='fast_refresh', refresh_method='fast') }}\n" + QUERY.format(
            items="{{ source('shop', 'items') }}"
        )
        return {"item_windows.sql": view, "sources.yml": SOURCES}

    def test_rows_moving_between_partitions(self, project):
        schema = project.test_schema
        items, log = f"{schema}.items", f"{schema}.mlog_items"
        project.run_sql(f"create table {items} (item_id bigint, grp bigint, val int) using iceberg")
        project.run_sql(f"insert into {items} values " + ", ".join(f"({i}, {i % 3}, {i * 10})" for i in range(1, 13)))
        project.run_sql(
            f"create table {log} (item_id bigint, _mv_op string, _mv_commit bigint, _mv_time timestamp) "
            "using iceberg tblproperties ('format-version' = '3')"
        )
        project.run_sql(f"insert into {log} select * from {log} where false")  # (a first snapshot)
        run_dbt(["run"])
        changes = [  # (statement, the keys it changed, their ops)
            (f"update {items} set grp = 2 where item_id = 4", [(4, "D"), (4, "I")]),  # leaves group 1 for 2
            (f"delete from {items} where item_id = 7", [(7, "D")]),
            (f"insert into {items} values (13, null, 5), (14, 0, null)", [(13, "I"), (14, "I")]),
            (f"update {items} set grp = null, val = 1 where item_id = 3", [(3, "D"), (3, "I")]),
        ]
        for statement, logged in changes:
            project.run_sql(statement)
            (snapshot,) = rows(project, f"select snapshot_id from {items}.snapshots order by committed_at desc limit 1")[0]
            values = ", ".join(f"({key}, '{op}', {snapshot}, current_timestamp())" for key, op in logged)
            project.run_sql(f"insert into {log} values {values}")
            _, output = run_dbt_and_capture(["run"])
            assert "item_windows: fast refresh" in output and "PARTITIONS" in output, output
            view = rows(project, f"select item_id, grp, val, previous_val, group_total from {schema}.item_windows")
            expected = rows(project, QUERY.format(items=items))
            assert sorted(view, key=repr) == sorted(expected, key=repr), (statement, view, expected)
