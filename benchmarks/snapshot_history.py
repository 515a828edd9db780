"""What a view's snapshot history costs its statements, and what expiring it does (issue 66: a refresh
whose fixed costs do not grow with the view's age; refresh/phases/expire.py).

    .venv/bin/python benchmarks/snapshot_history.py [--rows 100000] [--refreshes 700] [--repeat 8]
        [--warehouse DIR]

Two tables with the properties the plugin gives a view it creates (refresh/phases/plan.py), the same
``rows`` rows: ``d.aged`` gets ``refreshes`` rounds of what a small fast refresh writes (a DELETE of
one key, an INSERT of one row: two commits), ``d.young`` a few. Both are then compacted to the same
files (Iceberg's rewrite_data_files, every file), so that they differ only in their history. Timed,
alternating between the two, medians of ``repeat``: a DELETE of one key, an INSERT of one row, and the
plugin's read of the table's metadata (the Java API; its parse cache cleared). Then the aged table's
snapshots are expired as a refresh does (expire.Expiry's statement, every snapshot past the newest
five) and the same is timed again. Prints the metadata files' size on disk.
"""

import argparse
import statistics
import time
from pathlib import Path

from dbt_incremental_mv.metadata.jvm_catalog import JvmCatalog
from dbt_incremental_mv.process_state import PROCESS
from dbt_incremental_mv.refresh.phases.expire import Expiry
from dbt_incremental_mv.refresh.phases.plan import view_defaults
from dbt_incremental_mv.runtime.embedded import start_session

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--rows", type=int, default=100_000)
parser.add_argument("--refreshes", type=int, default=700)
parser.add_argument("--repeat", type=int, default=8)
parser.add_argument("--warehouse", default="/tmp/snapshot-history-warehouse")
args = parser.parse_args()

spark = start_session(warehouse=args.warehouse, iceberg_jars="auto", user_params={"spark.driver.memory": "2g"})
spark.sparkContext.setLogLevel("ERROR")
catalog = JvmCatalog(spark)
listed = ", ".join(f"'{k}'='{v}'" for k, v in {**view_defaults({}), "write.wap.enabled": "true"}.items())
spark.sql("create database if not exists d")
for table in ("aged", "young"):
    spark.sql(f"drop table if exists d.{table} purge")
    spark.sql(f"create table d.{table} (k bigint, a bigint, s string) using iceberg tblproperties ({listed})")
    spark.sql(f"insert into d.{table} select id, id % 7, 'x' from range({args.rows})")
key = args.rows


def refresh(table: str) -> tuple[float, float, float]:
    """A DELETE of one key and an INSERT of one row, then the plugin's metadata read: their seconds."""
    global key
    key += 1
    began = time.perf_counter()
    spark.sql(f"delete from d.{table} where k = {key - args.rows}")
    deleted = time.perf_counter()
    spark.sql(f"insert into d.{table} values ({key}, {key}, 'y')")
    inserted = time.perf_counter()
    PROCESS.parsed_metadata._values.clear()  # the parse of each metadata file is cached by the plugin
    catalog.load(f"spark_catalog.d.{table}")
    return deleted - began, inserted - deleted, time.perf_counter() - inserted


def snapshots(table: str) -> int:
    return spark.sql(f"select count(*) from d.{table}.snapshots").collect()[0][0]


def metadata_mb(table: str) -> float:
    folder = Path(args.warehouse) / "d" / table / "metadata"
    return sum(f.stat().st_size for f in folder.iterdir()) / 2**20


def measure(label: str) -> None:
    for table in ("aged", "young"):
        refresh(table)  # warm
    timed: dict[str, list[tuple[float, float, float]]] = {"aged": [], "young": []}
    for _ in range(args.repeat):
        for table in ("aged", "young"):
            timed[table].append(refresh(table))
    for table, runs in timed.items():
        delete, insert, load = (statistics.median(run[i] for run in runs) for i in range(3))
        print(
            f"{label}: d.{table} {snapshots(table)} snapshots, metadata files {metadata_mb(table):.1f} MB: "
            f"DELETE {delete:.3f} s, INSERT {insert:.3f} s, metadata read {load * 1000:.0f} ms",
            flush=True,
        )


began = time.perf_counter()
for _ in range(args.refreshes):
    refresh("aged")
print(f"{args.refreshes} refreshes of d.aged in {time.perf_counter() - began:.0f} s", flush=True)
for table in ("aged", "young"):
    spark.sql(f"call system.rewrite_data_files(table => 'd.{table}', options => map('rewrite-all', 'true'))").collect()
measure("compacted, history kept")
expiry = Expiry("d.aged", int(time.time() * 1000), retain_last=5, due=snapshots("aged") - 5)
began = time.perf_counter()
result = spark.sql(expiry.statement).collect()[0].asDict()
print(f"expired {expiry.due} snapshots in {time.perf_counter() - began:.1f} s: {result}", flush=True)
measure("expired")
