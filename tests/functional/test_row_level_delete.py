"""A view DELETE (refresh/views/statement.py delete_write) is a row-level delete staged with the
refresh's ``spark.wap.id`` even when its literal keys match no file: Spark must not run it as a
metadata-only delete (committed unstaged, or not at all: nothing to publish). Spark 4 folded the
former guard `exists (select 1)` to true; the CI's Spark 4 job runs this file too."""

from dbt_incremental_mv.refresh.views.statement import delete_write
from tests.functional.util import rows


def test_a_delete_of_nothing_and_of_one_row_are_each_staged_with_the_wap_id(project):
    table = f"{project.test_schema}.staged_probe"
    project.run_sql(
        f"create table {table} (k bigint, v int) using iceberg "
        "tblproperties ('write.wap.enabled'='true', 'format-version'='2')"
    )
    project.run_sql(f"insert into {table} values (1, 1), (2, 2)")
    project.run_sql(f"insert into {table} values (3, 1), (4, 2)")
    adapter = project.adapter
    with adapter.connection_named("staged_probe"):  # one connection: one Spark session, its wap.id
        for wap_id, keys in (("probe_nothing", "5, 6"), ("probe_one", "1")):
            adapter.execute(f"set spark.wap.id={wap_id}")
            adapter.execute(delete_write(table, f"k in ({keys})").sql)
            adapter.execute("reset spark.wap.id")
    staged = [
        wap_id for (wap_id,) in rows(project, f"select summary['wap.id'] from {table}.snapshots order by committed_at")
    ]
    assert staged == [None, None, "probe_nothing", "probe_one"]
    assert sorted(rows(project, f"select k from {table}")) == [(1,), (2,), (3,), (4,)]  # main not moved yet
