"""The price of a compaction for refresh_method='force': seconds against the bytes it rewrites.

    PYTHONPATH=. .venv/bin/python benchmarks/compaction_price.py --warehouse DIR --tables s.v1 s.v2 ...
        [--share 0.001] [--repeat 2]

Run on views a benchmark built (``scripts/bench.sh ... --keep``: their warehouse, a Hadoop catalog):
for each table, ``--repeat`` times, a DELETE of a scattered ``--share`` of its rows (a hash of each
row: every data file gets deletes, as a refresh deleting across the view leaves it), then the
compaction a fast refresh runs (refresh/phases/compact.py ``compaction``: the files with deletes
and the small ones, sorted as the view was built), timed, with the bytes of the data files its
``replace`` commit removed. Prints each, then the least-squares line seconds = a + b x GB and the slope through the origin, b being
``seconds_per_gb_compacted`` in dbt_incremental_mv/calibration.json (a: its statements, priced by
``seconds_per_statement``).
"""

import argparse
import statistics
import time

from dbt_incremental_mv.layout import ViewFiles
from dbt_incremental_mv.metadata import TableMetadata
from dbt_incremental_mv.refresh.phases.compact import compaction
from dbt_incremental_mv.runtime.embedded import start_session

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--warehouse", required=True)
parser.add_argument("--tables", nargs="+", required=True)
parser.add_argument("--share", type=float, default=0.001)
parser.add_argument("--repeat", type=int, default=2)
args = parser.parse_args()

spark = start_session(warehouse=args.warehouse, iceberg_jars="auto", user_params={"spark.driver.memory": "2g"})
spark.sparkContext.setLogLevel("ERROR")


def last_summary(table: str) -> dict:
    return spark.sql(f"select summary from {table}.snapshots order by committed_at desc limit 1").collect()[0][0]


def measure(table: str, round_number: int) -> tuple[float, int, ViewFiles]:
    """(seconds, bytes of data files rewritten, the files before) of one compaction of ``table``
    (each round deletes other rows: another residue of the hash)."""
    columns = []
    for row in spark.sql(f"describe {table}").collect():
        if not row[0] or row[0].startswith("#"):
            break  # the partitioning and details after the columns
        columns.append((row[0], row[1]))
    properties = {r[0]: r[1] for r in spark.sql(f"show tblproperties {table}").collect()}
    every = max(2, round(1 / args.share))
    spark.sql(
        f"delete from {table} where pmod(hash({', '.join(f'`{c}`' for c, _ in columns)}), {every}) = {round_number % every}"
    )
    files = ViewFiles.of_summary(last_summary(table))
    assert files is not None
    metadata = TableMetadata(table, tuple(columns), properties, {}, None)
    began = time.time()
    for statement in compaction(table, files, metadata).statements:
        spark.sql(statement).collect()
    seconds = time.time() - began
    summary = last_summary(table)
    replaced = spark.sql(
        f"select summary['removed-files-size'] from {table}.snapshots where operation = 'replace' "
        "order by committed_at desc"
    ).collect()
    # the newest replace drops dangling deletes; the one before it rewrote the data files
    rewritten = max(int(r[0] or 0) for r in replaced[:2])
    after = ViewFiles.of_summary(summary)
    print(
        f"{table}: {files.describe()} -> {after.describe() if after else '?'}: compacted in {seconds:.2f} s, "
        f"{rewritten / 1024**2:.1f} MB rewritten",
        flush=True,
    )
    return seconds, rewritten, files


points: list[tuple[float, float]] = []
for table in args.tables:
    for round_number in range(args.repeat):
        seconds, rewritten, _ = measure(table, round_number)
        points.append((rewritten / 1024**3, seconds))
xs, ys = [p[0] for p in points], [p[1] for p in points]
mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x in xs)
through_origin = sum(x * y for x, y in points) / sum(x * x for x in xs)
print(
    f"seconds = {mean_y - slope * mean_x:.2f} + {slope:.1f} x GB rewritten; through the origin {through_origin:.1f} "
    f"x GB ({len(points)} compactions)"
)
