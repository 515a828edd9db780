"""How fast a view reads after many small refreshes, against the same rows freshly written, and
after compaction (issue 66: "views that stay fast to read").

    .venv/bin/python benchmarks/view_reads.py [--rows 1000000] [--refreshes 100] [--changed 100]
        [--format 2|3] [--warehouse DIR]

A table with the properties the plugin gives a view it creates (refresh/phases/plan.py:
merge-on-read deletes, format 2 unless ``--format``), ``rows`` rows written in one insert, then
``refreshes`` rounds of what a small fast refresh of a join view writes: a DELETE of ``changed``
rows by key (position deletes or deletion vectors) and an INSERT of ``changed`` new rows. Then a
user's full scan of it (an aggregate over every column) is timed against the same scan of a copy of
its rows (CTAS with the same properties: the view as a rebuild leaves it) and after Iceberg's
compaction (what ``dbt run-operation mv_compact`` runs: layout.compaction_statements): medians of
5, the refreshed or compacted view alternated with the rebuilt one. Prints the data and delete
files of each.
"""

import argparse
import random
import statistics
import time

from dbt_incremental_mv.layout import compaction_statements
from dbt_incremental_mv.refresh.phases.plan import view_defaults
from dbt_incremental_mv.runtime.embedded import start_session

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--rows", type=int, default=1_000_000)
parser.add_argument("--refreshes", type=int, default=100)
parser.add_argument("--changed", type=int, default=100)
parser.add_argument("--format", type=int, choices=(2, 3), default=2)
parser.add_argument("--warehouse", default="/tmp/view-reads-warehouse")
args = parser.parse_args()

spark = start_session(warehouse=args.warehouse, iceberg_jars="auto", user_params={"spark.driver.memory": "2g"})
spark.sparkContext.setLogLevel("ERROR")
properties = {**view_defaults({"format-version": str(args.format)}), "format-version": str(args.format)}
listed = ", ".join(f"'{k}'='{v}'" for k, v in properties.items())
spark.sql("create database if not exists d")
for table in ("d.v", "d.rebuilt"):
    spark.sql(f"drop table if exists {table}")
COLUMNS = "k bigint, customer bigint, status string, amount decimal(10,2), note string"
spark.sql(f"create table d.v ({COLUMNS}) using iceberg tblproperties ({listed})")
spark.sql(
    "insert into d.v select id, id % 100000, concat('s', id % 7), cast(id % 1000 as decimal(10,2)), concat('n', id) "
    f"from range(0, {args.rows})"
)
draw = random.Random(7)
next_key = args.rows
began = time.time()
for _ in range(args.refreshes):
    gone = ", ".join(str(draw.randrange(0, next_key)) for _ in range(args.changed))
    spark.sql(f"delete from d.v where k in ({gone})")
    spark.sql(
        f"insert into d.v select id, id % 100000, 'new', 1.0, 'x' from range({next_key}, {next_key + args.changed})"
    )
    next_key += args.changed
print(f"{args.refreshes} refreshes of {args.changed} deleted and {args.changed} inserted rows: {time.time() - began:.0f} s")
spark.sql(f"create table d.rebuilt using iceberg tblproperties ({listed}) as select * from d.v")
SCAN = "select count(*), sum(customer), max(status), sum(amount), max(note) from {t}"


def files(table: str) -> str:
    row = spark.sql(
        f"select count(*) filter (where content = 0), count(*) filter (where content <> 0), "
        f"sum(file_size_in_bytes) from {table}.files"
    ).collect()[0]
    return f"{row[0]} data files, {row[1]} delete files, {row[2] / 1e6:.1f} MB"


def timed(table: str) -> float:
    began = time.time()
    spark.sql(SCAN.format(t=table)).collect()
    return time.time() - began


assert spark.sql(SCAN.format(t="d.v")).collect() == spark.sql(SCAN.format(t="d.rebuilt")).collect()
for table in ("d.v", "d.rebuilt"):
    timed(table)  # warm
times: dict[str, list[float]] = {"refreshed": [], "rebuilt": []}
for _ in range(5):
    times["refreshed"].append(timed("d.v"))
    times["rebuilt"].append(timed("d.rebuilt"))
print(f"refreshed: {files('d.v')}; rebuilt: {files('d.rebuilt')}")
began = time.time()
for statement in compaction_statements("d.v", args.format):  # what mv_compact runs
    spark.sql(statement).collect()
print(f"compaction: {time.time() - began:.1f} s; compacted: {files('d.v')}")
times["compacted"] = []
for _ in range(5):
    times["compacted"].append(timed("d.v"))
    times["rebuilt"].append(timed("d.rebuilt"))
rebuilt = statistics.median(times["rebuilt"])
print(f"format {args.format}, {args.rows:,} rows, full scan, medians of 5 (rebuilt: of 10):")
for name, measured in times.items():
    median = statistics.median(measured)
    print(f"  {name}: {median:.2f} s ({median / rebuilt:.2f}x the rebuilt view) {[round(x, 2) for x in measured]}")
