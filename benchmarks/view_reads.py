"""How fast a view reads after many small refreshes, against the same rows freshly written, and
after compaction (issue 66: "views that stay fast to read").

    .venv/bin/python benchmarks/view_reads.py [--rows 1000000] [--refreshes 100] [--changed 100]
        [--format 2|3] [--auto-compact] [--warehouse DIR]

A table with the properties the plugin gives a view it creates (refresh/phases/plan.py:
merge-on-read deletes, format 2 unless ``--format``), ``rows`` rows written in one insert, then
``refreshes`` rounds of what a small fast refresh of a join view writes: a DELETE of ``changed``
rows by key (position deletes or deletion vectors) and an INSERT of ``changed`` new rows. Then a
user's full scan of it (an aggregate over every column) is timed against the same scan of a copy of
its rows (CTAS with the same properties: the view as a rebuild leaves it) and after Iceberg's
compaction (what ``dbt run-operation mv_compact`` runs: refresh/phases/compact.py ``compaction``): medians of
``--repeat`` (5), the refreshed or compacted view alternated with the rebuilt one. Prints the data and delete
files of each.

``--auto-compact``: after each round, what a fast refresh with ``auto_compact`` (the default) does
after its publish: the same decision (refresh/phases/compact.py ``due``, from the last commit's
totals) and the same statements (``compaction``, sorted by the key as the view was built). The
scan is then also timed at the worst point of the cycle: after more rounds, up to the last one
before the next compaction.
"""

import argparse
import random
import statistics
import time
from collections import Counter

from dbt_incremental_mv.layout import ViewFiles, ViewLayout
from dbt_incremental_mv.metadata import TableMetadata
from dbt_incremental_mv.refresh.phases.compact import compaction, due
from dbt_incremental_mv.refresh.phases.decide import RefreshAction
from dbt_incremental_mv.refresh.phases.plan import view_defaults
from dbt_incremental_mv.runtime.embedded import start_session

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--rows", type=int, default=1_000_000)
parser.add_argument("--refreshes", type=int, default=100)
parser.add_argument("--changed", type=int, default=100)
parser.add_argument("--format", type=int, choices=(2, 3), default=2)
parser.add_argument("--repeat", type=int, default=5, help="scans of each table per comparison (the median is reported)")
parser.add_argument("--auto-compact", action="store_true", help="compact as a refresh with auto_compact does")
parser.add_argument("--warehouse", default="/tmp/view-reads-warehouse")
args = parser.parse_args()

spark = start_session(warehouse=args.warehouse, iceberg_jars="auto", user_params={"spark.driver.memory": "2g"})
spark.sparkContext.setLogLevel("ERROR")
LAYOUT = ViewLayout(sort_by=("k",))  # a join view is built sorted by its fact's key (layout.view_layout)
properties = {
    **view_defaults({"format-version": str(args.format)}),
    "format-version": str(args.format),
    **LAYOUT.properties(),
    **LAYOUT.record(),
}
listed = ", ".join(f"'{k}'='{v}'" for k, v in properties.items())
spark.sql("create database if not exists d")
for table in ("d.v", "d.rebuilt"):
    spark.sql(f"drop table if exists {table}")
COLUMNS = (
    ("k", "bigint"),
    ("customer", "bigint"),
    ("status", "string"),
    ("amount", "decimal(10,2)"),
    ("note", "string"),
)
spark.sql(f"create table d.v ({', '.join(f'{c} {t}' for c, t in COLUMNS)}) using iceberg tblproperties ({listed})")
spark.sql(
    "insert into d.v select id, id % 100000, concat('s', id % 7), cast(id % 1000 as decimal(10,2)), concat('n', id) "
    f"from range(0, {args.rows}) order by id"
)
draw = random.Random(7)
next_key = args.rows
compactions: list[float] = []
kinds: list[str] = []  # what each compaction rewrote


def published_files() -> ViewFiles | None:
    """The view's files after the last commit (its totals), as a refresh's publish reports them."""
    summary = spark.sql("select summary from d.v.snapshots order by committed_at desc limit 1").collect()[0][0]
    return ViewFiles.of_summary(summary)


def run_compaction(files: ViewFiles) -> None:
    """What a refresh's compaction runs (refresh/phases/compact.py ``compact``): its statements, and
    those it runs after them when they leave the view due."""
    planned = compaction("d.v", files, TableMetadata("d.v", COLUMNS, properties, {}, None))
    for statement in planned.statements:
        spark.sql(statement).collect()
    still_due = planned.still_due(published_files())
    for statement in planned.if_still_due if still_due else ():
        spark.sql(statement).collect()
    kinds.append("both" if still_due else planned.kind.value)


def refresh() -> None:
    """One round of a small refresh: a DELETE and an INSERT, then the refresh's compaction when due."""
    global next_key
    gone = ", ".join(str(draw.randrange(0, next_key)) for _ in range(args.changed))
    spark.sql(f"delete from d.v where k in ({gone})")
    spark.sql(
        f"insert into d.v select id, id % 100000, 'new', 1.0, 'x' from range({next_key}, {next_key + args.changed})"
    )
    next_key += args.changed
    files = published_files()
    if args.auto_compact and due(files, RefreshAction.FAST, auto_compact=True):
        assert files is not None
        began = time.time()
        run_compaction(files)
        compactions.append(time.time() - began)


began = time.time()
for _ in range(args.refreshes):
    refresh()
print(
    f"{args.refreshes} refreshes of {args.changed} deleted and {args.changed} inserted rows: {time.time() - began:.0f} s"
)
if args.auto_compact:
    print(
        f"compacted by the refreshes {len(compactions)} times, {sum(compactions):.1f} s in all "
        f"({sum(compactions) / args.refreshes:.2f} s per refresh): {[round(x, 1) for x in compactions]}"
    )
    print(f"what they rewrote: {dict(Counter(kinds))}")
SCAN = "select count(*), sum(customer), max(status), sum(amount), max(note) from {t}"


def files(table: str) -> str:
    row = spark.sql(
        f"select count(*) filter (where content = 0), count(*) filter (where content <> 0), "
        f"sum(file_size_in_bytes) from {table}.files"
    ).collect()[0]
    return f"{row[0]} data files, {row[1]} delete files, {(row[2] or 0) / 1e6:.1f} MB"


def timed(table: str) -> float:
    began = time.time()
    spark.sql(SCAN.format(t=table)).collect()
    return time.time() - began


def rebuild() -> None:
    """d.rebuilt: the view's rows as a rebuild writes them (sorted by the key, the same properties)."""
    spark.sql("drop table if exists d.rebuilt")
    query = LAYOUT.sorted_query("select * from d.v")
    spark.sql(f"create table d.rebuilt using iceberg tblproperties ({listed}) as {query}")
    assert spark.sql(SCAN.format(t="d.v")).collect() == spark.sql(SCAN.format(t="d.rebuilt")).collect()
    for table in ("d.v", "d.rebuilt"):
        timed(table)  # warm


def compare(name: str, times: dict[str, list[float]]) -> None:
    """``--repeat`` scans of the view as it is now, alternated with as many of the rebuilt one."""
    times[name] = []
    for _ in range(args.repeat):
        times[name].append(timed("d.v"))
        times["rebuilt"].append(timed("d.rebuilt"))
    print(f"{name}: {files('d.v')}; rebuilt: {files('d.rebuilt')}")


def report(times: dict[str, list[float]]) -> None:
    rebuilt = statistics.median(times["rebuilt"])
    print(
        f"format {args.format}, {args.rows:,} rows, full scan, medians of {args.repeat} (rebuilt: of {len(times['rebuilt'])}):"
    )
    for name, measured in times.items():
        median = statistics.median(measured)
        print(f"  {name}: {median:.2f} s ({median / rebuilt:.2f}x the rebuilt view) {[round(x, 2) for x in measured]}")


rebuild()
times: dict[str, list[float]] = {"rebuilt": []}
compare("refreshed", times)
if args.auto_compact:
    # the worst point of the cycle: the last refresh before the next compaction
    extra = 0
    while extra < 50:
        now = published_files()
        # a round adds a data file and at most a delete file: within 2 of due, the next may make it due
        if now is not None and now.extra_files >= now.extra_files_due - 2:
            break
        refresh()
        extra += 1
    print(f"{extra} more refreshes, to the last before the next compaction")
    report(times)
    rebuild()
    times = {"rebuilt": []}
    compare("refreshed, the last before a compaction", times)
began = time.time()
now = published_files()
assert now is not None
run_compaction(now)  # what mv_compact runs
print(f"compaction: {time.time() - began:.1f} s; compacted: {files('d.v')}")
compare("compacted", times)
report(times)
