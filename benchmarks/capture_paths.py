"""Capture paths compared on one master, in one session, with the plugin's own capture SQL
(``dbt_incremental_mv/logs/sql.py``) appending to a change log: Iceberg's changelog scan
(copy-on-write), the difference of two whole snapshots (merge-on-read), and the data files that
changed, their rows compared by value (one aggregate) or, on an Iceberg v3 master, told apart by
row lineage (an anti join of the old rows, or their gone ids found first and broadcast). Medians
of 3.

    .venv/bin/python benchmarks/capture_paths.py [--mode cow|mor] [--commits N]
        [--spread clustered|scattered] [--format 2|3] [--warehouse DIR]

A 4M-row master of 8 inserts; ``commits`` (default 4) row-level commits: clustered (~1,200 of
the newest rows each) or scattered (every 1000th row: in every file). The commits update, delete,
move keys and insert. Prints each run's image counts (every path must find the same change; the
changelog counts an image per commit, so it differs when a row changed twice) and the medians.
"""

import argparse
import statistics
import time
from dataclasses import replace

from dbt_incremental_mv.runtime.embedded import start_session
from dbt_incremental_mv.logs import sql as log_sql
from dbt_incremental_mv.logs.capture_plan import broadcast_gone_ids
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.metadata import JvmCatalog

ROWS = 4_000_000
COLUMNS = [("id", "bigint"), ("cust", "bigint"), ("status", "string"), ("amount", "decimal(10,2)"), ("note", "string")]
LOGGED = [c for c, _ in COLUMNS]

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--mode", choices=("cow", "mor"), default="cow")
parser.add_argument("--commits", type=int, default=4)
parser.add_argument("--spread", choices=("clustered", "scattered"), default="clustered")
parser.add_argument("--format", type=int, choices=(2, 3), default=2)
parser.add_argument("--warehouse", default="/tmp/capture-paths-warehouse")
args = parser.parse_args()

spark = start_session(warehouse=args.warehouse, iceberg_jars="auto", user_params={"spark.driver.memory": "2g"})
spark.sparkContext.setLogLevel("ERROR")
write_mode = "copy-on-write" if args.mode == "cow" else "merge-on-read"
spark.sql("create database if not exists d")
for table in ("d.big", "d.big_log"):
    spark.sql(f"drop table if exists {table}")
spark.sql(
    f"create table d.big ({', '.join(f'{c} {t}' for c, t in COLUMNS)}) using iceberg tblproperties "
    f"('format-version'='{args.format}', 'write.update.mode'='{write_mode}', 'write.delete.mode'='{write_mode}', "
    f"'write.merge.mode'='{write_mode}')"
)
for i in range(8):
    low, high = i * ROWS // 8, (i + 1) * ROWS // 8
    spark.sql(f"insert into d.big select id, id % 100000, 'open', cast(id % 1000 as decimal(10,2)), concat('n', id) from range({low}, {high})")
SPEC = LogSpec("shop.big_log", "d.big_log", "big", "d.big", ("id",), True)
spark.sql(log_sql.create_log(SPEC, COLUMNS))


def table():
    return spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, "d.big")


def rows(k: int) -> str:
    if args.spread == "scattered":
        return f"id % 1000 = {k % 1000}"
    first = ROWS - 5000 + k * 1000
    return f"id between {first} and {first + 1200}"


start = int(table().currentSnapshot().snapshotId())
for k in range(args.commits):
    kind = k % 4
    if kind == 0:
        spark.sql(f"update d.big set status = 'shipped{k}', amount = amount + 1 where {rows(k)}")
    elif kind == 1:
        spark.sql(f"delete from d.big where {rows(k)}")
    elif kind == 2:
        spark.sql(f"update d.big set id = id + {ROWS * 10} where {rows(k)}")  # keys moved
    else:
        spark.sql(f"insert into d.big select id, 1, 'new', 1.0, 'x' from range({ROWS + k * 1000}, {ROWS + k * 1000 + 1000})")
end = int(table().currentSnapshot().snapshotId())
catalog = JvmCatalog(spark)


def appended() -> list:
    found = [tuple(r) for r in spark.sql(
        "select _mv_op, count(*) from d.big_log where _mv_op in ('I', 'D') group by 1 order by 1").collect()]
    spark.sql("delete from d.big_log where true")
    return found


def changelog():
    view = "mv_changes_paths"
    spark.sql(log_sql.changelog_view(SPEC, view, start, end))
    try:
        spark.sql(log_sql.capture_from_changelog(SPEC, LOGGED, view, end))
    finally:
        spark.catalog.dropTempView(view)


def snapshots():
    spark.sql(log_sql.capture_by_diff(SPEC, LOGGED, start, end))


def files(by_lineage: bool, broadcast: bool = False):
    changed = catalog.stage_changed_files("d.big", start, end)
    try:
        if by_lineage:
            assert changed.lineage_since is not None, "no row lineage: a v3 master is needed"
            assert broadcast_gone_ids(changed.rows_gone_at_most) or not broadcast, changed.rows_gone_at_most
        spark.sql(log_sql.capture_by_files(
            SPEC, LOGGED, changed.removed_view, changed.added_view, end,
            lineage_since=changed.lineage_since if by_lineage else None,
            written_view=changed.written_view, gone_ids_broadcast=broadcast,
        ))
        return (changed if by_lineage else replace(changed, lineage_since=None)).describe()
    finally:
        catalog.unstage_changed_files(changed)


paths = {"changelog" if args.mode == "cow" else "whole snapshots": changelog if args.mode == "cow" else snapshots,
         "changed files, by value": lambda: files(False)}
if args.format >= 3:
    paths["changed files, by row lineage, anti join"] = lambda: files(True)
    paths["changed files, by row lineage, gone ids broadcast"] = lambda: files(True, broadcast=True)
times: dict[str, list[float]] = {name: [] for name in paths}
for run in range(3):
    for name, path in paths.items():
        began = time.time()
        read = path()
        times[name].append(time.time() - began)
        print(run, name, appended(), read or "", round(times[name][-1], 2), flush=True)
print(f"{args.mode} v{args.format}, {args.commits} {args.spread} commit(s), medians of 3:")
for name, measured in times.items():
    print(f"  {name}: {statistics.median(measured):.2f} s {[round(x, 2) for x in measured]}")
