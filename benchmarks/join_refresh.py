"""Benchmark: fast refresh vs complete refresh of an inner-join ``fast_refresh`` view.

    python benchmarks/join_refresh.py --orders 2000000 --customers 200000 --changed 0.001

What it does, in one temporary directory (removed at the end unless --keep):

1. generate  ``shop.orders`` and ``shop.customers`` as Iceberg tables from ``range(n)``
             (a separate Python process on the embedded session; not timed)
2. build     ``dbt run`` of project ``fast`` (the view ``mv_fast``, change logs declared with
             ``capture: true``). Project ``complete`` holds the same query as ``mv_complete`` with
             ``refresh_method='complete'`` and no change logs (so it never captures nor purges
             the ``fast`` project's logs); both projects share one warehouse. With
             ``--complete-prebuild`` it is built here too (without logs, its build and its
             complete refresh run the same CREATE OR REPLACE TABLE AS SELECT).
3. no-op     ``dbt run`` of ``fast`` with nothing changed: the fixed cost of a refresh
4. change    ``--changed`` x orders: 40% amount updates, 20% customer_id (join key)
             updates, 20% deletes, 20% inserts, plus ~20 customer updates: 5 SQL statements
             (5 master commits)
5. fast      ``dbt run`` of ``fast``: must log ``mv_fast: fast refresh: ...``
6. verify    the view equals its defining query (EXCEPT ALL both ways, and counts); also,
             read-only, the cost of the parts of the refresh statement (``--no-analyze`` skips)
7. complete  ``dbt run`` of ``complete`` (recompute on the same data as the fast refresh)
8. rebuild   ``dbt run --full-refresh`` of ``fast``

Every dbt command is timed (wall clock, including JVM start and dbt parsing) and its model's
``execution_time`` is read from ``run_results.json``; the model's statements, their timings and
its phases (plan, capture, mark, write, publish, purge, other) come from ``dbt_runs.py``, shared
with ``bench.py``: dbt runs through ``dbt_timed.py``, which times the plugin's phases and every
SQL statement (fetching included). Results go to ``benchmarks/results/`` as JSON, and a summary
is printed.

The benchmark exits with status 1 (and a message) when the fast-refreshed view differs from
its defining query, or when the refresh was not a fast refresh.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dbt_runs  # noqa: E402
from spark_steps import session, timed  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

COLUMNS = ["order_id", "amount", "status", "customer_id", "name", "country"]
DEFINING_QUERY = (
    "select o.order_id, o.amount, o.status, c.customer_id, c.name, c.country\n"
    "from {orders} o join {customers} c on o.customer_id = c.customer_id"
)
# Shares of the changed orders (fraction --changed of the orders)
SHARES = OrderedDict(amount_updates=0.4, key_updates=0.2, deletes=0.2, inserts=0.2)
CUSTOMER_UPDATES = 20
BUCKETS = 1_000_000  # changed rows are picked by hash bucket, so they are spread over every file


class BenchmarkFailure(SystemExit):
    def __init__(self, message: str) -> None:
        super().__init__(f"\nBENCHMARK FAILED: {message}\n")


# ---------------------------------------------------------------------- the dbt projects
def write_project(root: Path, name: str, warehouse: Path, driver_memory: str, model: tuple[str, str],
                  sources_yml: str) -> Path:
    model_name, sql = model
    return dbt_runs.write_project(root, name, warehouse=warehouse, schema="shop", sources_yml=sources_yml,
                                  models={model_name: sql}, driver_memory=driver_memory, threads=1)


FAST_SOURCES = """\
version: 2
sources:
  - name: shop
    schema: shop
    tables:
      - name: orders
      - name: customers
  - name: change_logs
    schema: shop
    tables:
      - name: mlog_orders
        meta:
          mv_log: {master: shop.orders, key: [order_id], capture: true}
      - name: mlog_customers
        meta:
          mv_log: {master: shop.customers, key: [customer_id], capture: true}
"""

COMPLETE_SOURCES = """\
version: 2
sources:
  - name: shop
    schema: shop
    tables:
      - name: orders
      - name: customers
"""


def model_sql(config: str) -> str:
    return "{{ config(" + config + ") }}\n" + DEFINING_QUERY.format(
        orders="{{ source('shop','orders') }}", customers="{{ source('shop','customers') }}"
    ) + "\n"


# ---------------------------------------------------------------------- running dbt
def run_dbt(project: Path, step: str, *extra: str) -> dict:
    """Run one dbt command in ``project`` (``dbt_runs.run_dbt``); the result of its one model."""
    print(f"  $ dbt run {' '.join(extra)}  ({project.name}, step {step})", flush=True)
    try:
        run = dbt_runs.run_dbt(project, step, *extra)
    except dbt_runs.DbtFailure as exc:
        raise BenchmarkFailure(str(exc)) from exc
    (model,) = run["models"].values()
    out = {"step": step, "command": run["command"], "wall_s": run["wall_s"], **model}
    print(f"    wall {out['wall_s']:.1f} s, model {out['execution_time_s']:.1f} s; "
          + " | ".join(out["log_lines"]), flush=True)
    return out


# ---------------------------------------------------------------------- Spark steps (own process)
def spark_helper(step: str, payload: dict) -> dict:
    """Run ``step`` in a fresh Python process on the embedded session; returns its JSON result."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--spark-step", step, "--payload", json.dumps(payload)]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise BenchmarkFailure(f"Spark step {step} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    result = json.loads(lines[-1][len("RESULT "):])
    result["wall_s"] = round(wall, 2)
    return result


def step_generate(spark, p: dict) -> dict:
    n, c = p["orders"], p["customers"]
    unmatched = max(c // 50, 1)  # ~2% of orders reference no customer: the inner join drops them
    table_props = ""
    if p["master_mode"] == "mor":
        table_props = (" tblproperties ('write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
                       "'write.merge.mode'='merge-on-read')")
    timings = {}
    spark.sql("create namespace if not exists shop")
    spark.sql(f"create table shop.customers (customer_id bigint, name string, country string) using iceberg{table_props}")
    timings["customers"], _ = timed(spark, (
        "insert into shop.customers select id, concat('customer ', id), "
        "element_at(array('DE','FR','IT','ES','NL','PL','SE','PT','AT','BE'), cast(pmod(id, 10) as int) + 1) "
        f"from range(0, {c}, 1, 2)"
    ))
    spark.sql(f"create table shop.orders (order_id bigint, customer_id bigint, amount decimal(12,2), status string) "
              f"using iceberg{table_props}")
    timings["orders"], _ = timed(spark, (
        f"insert into shop.orders select id, pmod(hash(id, 17), {c + unmatched}), "
        "cast(pmod(hash(id, 3), 100000) / 100 as decimal(12,2)), "
        "element_at(array('new','paid','shipped','returned'), cast(pmod(id, 4) as int) + 1) "
        f"from range(0, {n}, 1, {p['files']})"
    ))
    files = {t: spark.sql(f"select count(*) from shop.{t}.files").first()[0] for t in ("orders", "customers")}
    return {"timings": timings, "files": files, "unmatched_customer_ids": unmatched}


def change_statements(p: dict) -> list[tuple[str, str]]:
    """The change, as (kind, SQL). ``scattered``: the changed orders are picked by hash, so every
    data file of the master holds some (the worst case for copy-on-write masters: each commit
    rewrites the whole table); ``clustered``: the newest orders change (as when recent orders
    get paid, shipped or cancelled), so the commits rewrite only the files holding them."""
    n, c, f = p["orders"], p["customers"], p["changed"]
    unmatched = max(c // 50, 1)
    if p.get("spread", "scattered") == "clustered":
        bucket, scale = f"({n} - 1 - order_id)", n  # 0 for the newest order
        customers = f"customer_id < {CUSTOMER_UPDATES}"
    else:
        bucket, scale = f"pmod(hash(order_id, 101), {BUCKETS})", BUCKETS
        customers = f"pmod(hash(customer_id, 7), {c}) < {CUSTOMER_UPDATES}"
    bounds, low = {}, 0
    for kind, share in SHARES.items():
        width = max(1, round(f * share * scale))
        bounds[kind] = (low, low + width)
        low += width
    inserts = max(1, round(n * f * SHARES["inserts"]))
    a, k, d = bounds["amount_updates"], bounds["key_updates"], bounds["deletes"]
    return [
        ("amount_updates", f"update shop.orders set amount = amount + 1 where {bucket} >= {a[0]} and {bucket} < {a[1]}"),
        ("key_updates", f"update shop.orders set customer_id = pmod(customer_id + 1, {c + unmatched}) "
                        f"where {bucket} >= {k[0]} and {bucket} < {k[1]}"),
        ("deletes", f"delete from shop.orders where {bucket} >= {d[0]} and {bucket} < {d[1]}"),
        ("inserts", f"insert into shop.orders select {n} + id, pmod(hash(id, 29), {c}), cast(9.99 as decimal(12,2)), "
                    f"'new' from range({inserts})"),
        ("customer_updates", "update shop.customers set country = 'XX', name = concat(name, ' (moved)') "
                             f"where {customers}"),
    ]


def step_change(spark, p: dict) -> dict:
    statements = change_statements(p)
    counts, timings = {}, {}
    for kind, sql in statements:
        if kind == "inserts":
            counts[kind] = int(re.search(r"from range\((\d+)\)", sql).group(1))
        else:
            table = "customers" if kind == "customer_updates" else "orders"
            where = sql.split(" where ", 1)[1]
            counts[kind] = spark.sql(f"select count(*) from shop.{table} where {where}").first()[0]
        timings[kind], _ = timed(spark, sql)
    # What each master commit rewrote: with copy-on-write, a row-level change rewrites whole files,
    # and the changelog scan of capture reads both the removed and the added files.
    commits = {}
    for table in ("orders", "customers"):
        commits[table] = [
            {"operation": r[0], **{k: r[1].get(k) for k in ("added-data-files", "deleted-data-files", "added-records",
                                                           "deleted-records", "added-delete-files")}}
            for r in spark.sql(f"select operation, summary from shop.{table}.snapshots order by committed_at").collect()[1:]
        ]
    return {"counts": counts, "timings": timings, "sql": [s for _, s in statements], "commits": commits}


def step_verify(spark, p: dict) -> dict:
    query = DEFINING_QUERY.format(orders="shop.orders", customers="shop.customers")
    cols = ", ".join(COLUMNS)
    view = f"select {cols} from shop.{p['view']}"
    t1, missing = timed(spark, f"select count(*) from ({query} except all {view})")
    t2, extra = timed(spark, f"select count(*) from ({view} except all {query})")
    _, view_rows = timed(spark, f"select count(*) from shop.{p['view']}")
    _, query_rows = timed(spark, f"select count(*) from ({query})")
    out = {
        "view": p["view"], "missing_rows": missing[0][0], "extra_rows": extra[0][0],
        "view_rows": view_rows[0][0], "query_rows": query_rows[0][0], "seconds": t1 + t2,
    }
    if p.get("analyze_sql"):
        out["analysis"] = analyze_refresh_statement(spark, p["view"], p["analyze_sql"])
    return out


def analyze_refresh_statement(spark, view: str, merge_sql: str) -> dict:
    """Re-run, read-only, the parts of the refresh MERGE on the view as it was before the refresh.

    The log snapshots in the statement are pinned (``version as of``), so its change keys are
    still readable after the purge; the view is read at the refresh's parent snapshot.
    """
    current = spark.sql(f"select snapshot_id from shop.{view}.refs where name = 'main'").first()[0]
    parent = spark.sql(f"select parent_id from shop.{view}.snapshots where snapshot_id = {current}").first()[0]
    target = f"`shop`.`{view}`"
    sql = merge_sql.replace(f"from {target}\n", f"from {target} version as of {parent}\n")
    m = re.search(r"using \(\n(.*)\n\) as delta\n", sql, re.S)
    if not m:
        return {"skipped": "not a MERGE"}
    delta = m.group(1)
    del_part, _, ins_part = delta.partition("\nunion all\n")
    del_rows = re.search(r"from \(\n(select distinct .*?)\n\)$", del_part, re.S).group(1)
    ins_query = re.search(r"from \(\n(.*)\n\)$", ins_part, re.S).group(1)
    ins_parts = ins_query.split("\nunion\n")
    keys = re.findall(r"\) in \((select distinct .*?\n\))\)", sql, re.S)
    out: dict = {"view_snapshot_before": parent}
    timings = OrderedDict()
    timings["view full scan (count)"], rows = timed(spark, f"select count(*) from shop.{view} version as of {parent}")
    out["view_rows_before"] = rows[0][0]
    seen = set()
    for i, keysql in enumerate(keys):
        if keysql in seen:
            continue
        seen.add(keysql)
        log = re.search(r"from `shop`\.`(mlog_\w+)`", keysql).group(1)
        kind = "after images" if "`_mv_op` = 'I'" in keysql else "all images"
        t, rows = timed(spark, f"select count(*) from ({keysql})")
        timings[f"changed keys of {log} ({kind}): {rows[0][0]} keys"] = t
    t, rows = timed(spark, f"select count(*) from ({del_rows})")
    timings[f"DEL rows: view rows with a changed key ({rows[0][0]} rows)"] = t
    for part in ins_parts:
        restricted = re.search(r"\(select \* from `shop`\.`(\w+)` version as of \d+ where", part, re.I)
        name = restricted.group(1) if restricted else "?"
        t, rows = timed(spark, f"select count(*) from ({part})")
        timings[f"INS rows of {name} ({rows[0][0]} rows)"] = t
    t, rows = timed(spark, f"select count(*) from ({delta})")
    timings[f"whole MERGE source (DEL+INS, {rows[0][0]} rows)"] = t
    out["timings"] = timings
    out["del_rows_plan"] = spark.sql(f"explain formatted select count(*) from ({del_rows})").first()[0][:20000]
    out["del_rows_scans"] = _plan_outline(out["del_rows_plan"])
    try:
        out["merge_plan"] = spark.sql(f"explain formatted {merge_sql}").first()[0][:30000]
        out["merge_scans"] = _plan_outline(out["merge_plan"])
    except Exception as exc:  # noqa: BLE001 - EXPLAIN of a MERGE is best effort
        out["merge_plan"] = f"explain failed: {str(exc).splitlines()[0]}"
    return out


def _plan_outline(plan: str) -> list[str]:
    """The tree part of a formatted plan: its scans, joins and writes (one line each)."""
    tree = plan.split("\n\n\n", 1)[0]
    return [line.rstrip() for line in tree.splitlines() if re.search(r"Scan|Join|Write|Merge|Exchange|Union", line)]


SPARK_STEPS = {"generate": step_generate, "change": step_change, "verify": step_verify}


def spark_main(step: str, payload: dict) -> None:
    spark = session(payload, default_memory="4g")
    result = SPARK_STEPS[step](spark, payload)
    print("RESULT " + json.dumps(result, default=str), flush=True)
    spark.stop()


# ---------------------------------------------------------------------- the benchmark
def phase_line(run: dict, keys=("plan", "capture", "mark", "write", "publish", "purge")) -> str:
    phases = run["phases"]
    shown = [f"{k} {phases[k]:.1f}" for k in keys if k in phases]
    rest = sum(v for k, v in phases.items() if k not in keys)
    shown.append(f"other {rest:.1f}")
    return ", ".join(shown)


def benchmark(args: argparse.Namespace) -> dict:
    root = Path(tempfile.mkdtemp(prefix="join_refresh_", dir=args.tmpdir))
    warehouse = root / "warehouse"
    payload = {"warehouse": str(warehouse), "orders": args.orders, "customers": args.customers,
               "changed": args.changed, "master_mode": args.master_mode, "files": args.files,
               "spread": args.spread, "driver_memory": args.driver_memory}
    print(f"join_refresh: orders={args.orders} customers={args.customers} changed={args.changed} "
          f"({args.spread}) masters={args.master_mode} in {root}", flush=True)
    fast = write_project(root, "fast", warehouse, args.driver_memory,
                         ("mv_fast", model_sql("materialized='fast_refresh', refresh_method='fast'")), FAST_SOURCES)
    complete = write_project(root, "complete", warehouse, args.driver_memory,
                             ("mv_complete", model_sql("materialized='fast_refresh', refresh_method='complete'")),
                             COMPLETE_SOURCES)
    result: dict = {"params": {k: v for k, v in vars(args).items() if k not in ("spark_step", "payload")},
                    "workdir": str(root), "started": datetime.now().isoformat(timespec="seconds"),
                    "load_average_start": os.getloadavg()}
    total = time.perf_counter()
    try:
        print("- generate masters", flush=True)
        result["generate"] = spark_helper("generate", payload)
        print(f"    {result['generate']}", flush=True)
        runs = result["runs"] = {}
        runs["build"] = run_dbt(fast, "build")
        if args.complete_prebuild:
            runs["complete_build"] = run_dbt(complete, "build")
        if not args.no_noop:
            runs["noop"] = run_dbt(fast, "noop")
        print("- change masters", flush=True)
        result["change"] = spark_helper("change", payload)
        print(f"    {result['change']['counts']}", flush=True)
        runs["fast"] = run_dbt(fast, "fast")
        line = next((line for line in runs["fast"]["log_lines"] if line.startswith("mv_fast: fast refresh:")), None)
        if line is None:
            raise BenchmarkFailure(f"the refresh was not a fast refresh: {runs['fast']['log_lines']}")
        runs["fast"]["refresh_line"] = line
        print("- verify", flush=True)
        merge = next((s["sql"] for s in runs["fast"]["statements"] if s["label"] == "write"), None)
        verify_payload = {**payload, "view": "mv_fast"}
        if not args.no_analyze and merge and merge.lower().startswith("merge into"):
            verify_payload["analyze_sql"] = merge
        verify = result["verify"] = spark_helper("verify", verify_payload)
        print(f"    view rows {verify['view_rows']}, query rows {verify['query_rows']}, "
              f"missing {verify['missing_rows']}, extra {verify['extra_rows']}", flush=True)
        if verify["missing_rows"] or verify["extra_rows"] or verify["view_rows"] != verify["query_rows"]:
            raise BenchmarkFailure(
                f"mv_fast differs from its defining query after the fast refresh: {verify['missing_rows']} rows "
                f"missing, {verify['extra_rows']} rows extra ({verify['view_rows']} vs {verify['query_rows']} rows); "
                f"kept {root}"
            )
        for name, seconds in (verify.get("analysis") or {}).get("timings", {}).items():
            print(f"    {seconds:6.2f} s  {name}", flush=True)
        runs["complete"] = run_dbt(complete, "complete")
        runs["full_refresh"] = run_dbt(fast, "full_refresh", "--full-refresh")
    except BaseException:
        args.keep = True
        raise
    finally:
        result["total_s"] = round(time.perf_counter() - total, 1)
        result["load_average_end"] = os.getloadavg()
        out = Path(args.out) if args.out else HERE / "results" / (
            f"join_refresh_{args.orders}_{args.customers}_{args.changed}_{args.master_mode}"
            + ("_clustered" if args.spread == "clustered" else "") + ".json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2, default=str))
        print(f"results: {out}", flush=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print_summary(result)
    return result


def print_summary(result: dict) -> None:
    runs = result["runs"]
    p = result["params"]
    print(f"\n== orders {p['orders']:,} x customers {p['customers']:,}, changed {p['changed']:.3%} "
          f"({sum(result['change']['counts'][k] for k in SHARES)} orders, "
          f"{result['change']['counts']['customer_updates']} customers, {p.get('spread', 'scattered')}), "
          f"masters {p['master_mode']}; "
          f"load avg {result['load_average_start'][0]:.1f}->{result['load_average_end'][0]:.1f}")
    print(f"{'run':<34} {'wall s':>7} {'model s':>8}  phases (s)")
    labels = {"build": "build (fast project)", "complete_build": "build (complete project)",
              "noop": "fast refresh, nothing changed", "fast": "fast refresh",
              "complete": "complete refresh (refresh_method)", "full_refresh": "dbt run --full-refresh"}
    for key, label in labels.items():
        if key in runs:
            r = runs[key]
            print(f"{label:<34} {r['wall_s']:7.1f} {r['execution_time_s']:8.1f}  {phase_line(r)}  [{r['n_statements']} stmts]")
    fast, complete = runs["fast"], runs["complete"]
    print(f"speed-up (model time): vs complete {complete['execution_time_s'] / fast['execution_time_s']:.2f}x, "
          f"vs --full-refresh {runs['full_refresh']['execution_time_s'] / fast['execution_time_s']:.2f}x")
    print("fast refresh statements (s):")
    for s in fast["statements"]:
        first = " ".join(s["sql"].split())[:110]
        print(f"  {s['seconds']:7.2f}  {s['label']:<8} {first}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=2_000_000)
    parser.add_argument("--customers", type=int, default=200_000)
    parser.add_argument("--changed", type=float, default=0.001, help="fraction of orders changed")
    parser.add_argument("--master-mode", choices=("cow", "mor"), default="cow",
                        help="masters copy-on-write (Iceberg's default; captured by changelog scan) or "
                             "merge-on-read (captured by snapshot diff)")
    parser.add_argument("--files", type=int, default=8, help="data files of the orders master")
    parser.add_argument("--spread", choices=("scattered", "clustered"), default="scattered",
                        help="changed orders picked by hash over every file, or the newest orders (few files)")
    parser.add_argument("--driver-memory", default="6g")
    parser.add_argument("--complete-prebuild", action="store_true",
                        help="also build mv_complete before the change, so its timed run replaces an existing "
                             "table (same statement: without change logs both are CREATE OR REPLACE TABLE AS SELECT)")
    parser.add_argument("--no-noop", action="store_true", help="skip the refresh with nothing changed")
    parser.add_argument("--no-analyze", action="store_true", help="skip timing the parts of the MERGE")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--tmpdir", default=None, help="where to create the temporary directory")
    parser.add_argument("--out", default=None, help="results JSON (default benchmarks/results/...)")
    parser.add_argument("--spark-step", help=argparse.SUPPRESS)
    parser.add_argument("--payload", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.spark_step:
        spark_main(args.spark_step, json.loads(args.payload))
        return 0
    benchmark(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
