"""Capture paths compared on one master, in one session: Iceberg's changelog scan (copy-on-write)
or the difference of two whole snapshots (merge-on-read), against the data files that changed,
diffed with two EXCEPT ALL or with the one aggregate the plugin uses. Medians of 3.

    .venv/bin/python benchmarks/capture_paths.py [cow|mor] [commits] [warehouse]

A 4M-row master of 8 files; ``commits`` (default 4) clustered updates of ~1,200 rows each on
the newest file. Prints each run's image counts (every path must find the same net change; the
changelog counts an image per commit) and the medians.
"""

import statistics
import sys
import time
import uuid

from dbt_incremental_mv.embedded import start_session
from dbt_incremental_mv.metadata import JvmCatalog

MODE = sys.argv[1] if len(sys.argv) > 1 else "cow"
COMMITS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
WAREHOUSE = sys.argv[3] if len(sys.argv) > 3 else "/tmp/capture-paths-warehouse"
ROWS = 4_000_000
COLUMNS = "id, cust, status, amount, note"

spark = start_session(warehouse=WAREHOUSE, iceberg_jars="auto", user_params={"spark.driver.memory": "2g"})
spark.sparkContext.setLogLevel("ERROR")
write_mode = "copy-on-write" if MODE == "cow" else "merge-on-read"
spark.sql("create database if not exists d")
spark.sql("drop table if exists d.big")
spark.sql(
    "create table d.big (id bigint, cust bigint, status string, amount decimal(10,2), note string) using iceberg "
    f"tblproperties ('write.update.mode'='{write_mode}', 'write.delete.mode'='{write_mode}', 'write.merge.mode'='{write_mode}')"
)
for i in range(8):
    low, high = i * ROWS // 8, (i + 1) * ROWS // 8
    spark.sql(f"insert into d.big select id, id % 100000, 'open', cast(id % 1000 as decimal(10,2)), concat('n', id) from range({low}, {high})")


def snapshot() -> int:
    table = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, "d.big")
    return int(table.currentSnapshot().snapshotId())


start = snapshot()
for k in range(COMMITS):
    first = ROWS - 5000 + k * 1000
    spark.sql(f"update d.big set status = 'shipped{k}', amount = amount + 1 where id between {first} and {first + 1200}")
end = snapshot()
catalog = JvmCatalog(spark)


def counted(query: str):
    return [tuple(r) for r in spark.sql(f"select op, count(*) from ({query}) group by 1 order by 1").collect()]


def both_ways(new: str, old: str, kind: str) -> str:
    if kind == "except":
        return (f"select 'I' as op from (select {COLUMNS} from {new} except all select {COLUMNS} from {old}) "
                f"union all select 'D' from (select {COLUMNS} from {old} except all select {COLUMNS} from {new})")
    return (f"select case when n > 0 then 'I' else 'D' end as op from (select {COLUMNS}, sum(s) as n from "
            f"(select {COLUMNS}, 1 as s from {new} union all select {COLUMNS}, -1 from {old}) group by {COLUMNS} "
            "having sum(s) <> 0) lateral view explode(sequence(1, abs(n))) x as i")


def changelog():
    view = "cl_" + uuid.uuid4().hex[:8]
    spark.sql(
        f"call spark_catalog.system.create_changelog_view(table => 'd.big', options => map('start-snapshot-id', "
        f"'{start}', 'end-snapshot-id', '{end}'), changelog_view => '{view}')"
    )
    return counted(f"select case when _change_type in ('INSERT', 'UPDATE_AFTER') then 'I' else 'D' end as op from {view}")


def snapshots():
    return counted(both_ways(f"d.big version as of {end}", f"d.big version as of {start}", "except"))


def files(kind: str):
    changed = catalog.stage_changed_files("d.big", start, end)
    try:
        return counted(both_ways(changed.added_view, changed.removed_view, kind)), changed.describe()
    finally:
        catalog.unstage_changed_files(changed)


paths = {
    ("changelog" if MODE == "cow" else "whole snapshots"): changelog if MODE == "cow" else snapshots,
    "changed files, EXCEPT ALL": lambda: files("except"),
    "changed files, one aggregate": lambda: files("aggregate"),
}
times: dict[str, list[float]] = {name: [] for name in paths}
for run in range(3):
    for name, path in paths.items():
        began = time.time()
        found = path()
        times[name].append(time.time() - began)
        print(run, name, found, round(times[name][-1], 2), flush=True)
print(f"{MODE}, {COMMITS} commit(s), medians of 3:")
for name, measured in times.items():
    print(f"  {name}: {statistics.median(measured):.2f} s {[round(x, 2) for x in measured]}")
