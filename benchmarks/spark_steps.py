"""The benchmark's Spark-side steps, each in its own Python process on the embedded session.

    python benchmarks/spark_steps.py <step> < payload.json

reads its payload (JSON) from stdin and prints ``RESULT <json>`` as its last line. Steps:
``generate`` (create and fill the masters; with ``cdc_logs`` those change logs too), ``change``
(one change of the masters, and for the masters in ``cdc_logs`` their change-log rows),
``verify`` (each view against its defining query; EXPLAIN of each view's refresh statement). A separate
process, so that no Spark session is open while dbt runs (the embedded Iceberg catalog is a local
directory: one writer process at a time) and dbt's timings never include this work.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import importlib  # noqa: E402


def session(payload: dict, default_memory: str = "2g"):
    """The embedded session on the payload's warehouse (``driver_memory``, else ``default_memory``)."""
    from dbt_incremental_mv.runtime.embedded import start_session

    spark = start_session(warehouse=payload["warehouse"], iceberg_jars="auto",
                          user_params={"spark.driver.memory": payload.get("driver_memory", default_memory)})
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def timed(spark, sql: str) -> tuple[float, list]:
    started = time.perf_counter()
    rows = spark.sql(sql).collect()
    return round(time.perf_counter() - started, 3), rows


def scalar(spark, sql: str):
    return spark.sql(sql).first()[0]


def dataset(payload: dict):
    """The dataset module of the payload (``shop`` or ``tpch``)."""
    return importlib.import_module(payload.get("dataset", "shop"))


def sizes(payload: dict):
    return dataset(payload).Sizes(**payload["sizes"])


# ---------------------------------------------------------------------- generate
def step_generate(spark, p: dict) -> dict:
    ds, s = dataset(p), sizes(p)
    seconds: dict[str, float] = {}
    for master, sql in ds.generate_statements(s, p["master_mode"], p.get("master_format", 2)):
        t, _ = timed(spark, sql)
        seconds[master] = round(seconds.get(master, 0.0) + t, 3)
    for master in p.get("cdc_logs", []):
        for sql in ds.cdc_log_statements(master):
            spark.sql(sql)
    rows = {m: scalar(spark, f"select count(*) from {ds.SCHEMA}.{m}") for m in s.masters}
    files = {m: scalar(spark, f"select count(*) from {ds.SCHEMA}.{m}.files") for m in s.masters}
    return {"seconds": seconds, "rows": rows, "files": files}


# ---------------------------------------------------------------------- change
def main_snapshot(spark, table: str) -> int:
    return scalar(spark, f"select snapshot_id from {table}.refs where name = 'main'")


def step_change(spark, p: dict) -> dict:
    """Apply one change; to the masters in ``cdc_logs``, append what a CDC feed would log after
    each statement."""
    ds, s = dataset(p), sizes(p)
    cur = ds.current_state(lambda sql: spark.sql(sql).first(), s)
    changed = p.get("changed_rows") or max(1, round(p["fraction"] * cur.orders))
    if p.get("dimension_rows") is not None:  # that many customers updated, none deleted or inserted
        ds.CUSTOMER_UPDATES = p["dimension_rows"]
    if p.get("dimension_updates") is not None:
        ds.CUSTOMER_UPDATE = p["dimension_updates"]
    changes = ds.change_plan(s, cur, changed, p["spread"], p["salt"])
    if p.get("dimension_rows") is not None:
        changes = [c for c in changes if c.master != "customers" and c.master != "customer" or c.kind == "updates"]
    if not p.get("dimensions", True):
        changes = [c for c in changes if c.master not in ds.DIMENSIONS]
    if not p.get("facts", True):
        changes = [c for c in changes if c.master in ds.DIMENSIONS]
    if p.get("append_only"):  # new rows alone, as an ingestion that only appends
        changes = [c for c in changes if c.kind == "inserts"]
    columns = {m: spark.table(f"{ds.SCHEMA}.{m}").columns for m in s.masters}
    started_ms = scalar(spark, "select cast(unix_millis(current_timestamp()) as bigint)")
    out: dict = {"orders_before": cur.orders, "changed_orders_planned": changed, "counts": {}, "seconds": {},
                 "sql": [], "log_seconds": {}}
    for change in changes:
        label = f"{change.master}.{change.kind}"
        table = f"{ds.SCHEMA}.{change.master}"
        before = main_snapshot(spark, table)
        if change.images == "I":
            out["counts"][label] = None  # counted after the insert
        else:
            out["counts"][label] = scalar(spark, f"select count(*) from {table} where {change.rows}")
        out["seconds"][label], _ = timed(spark, change.sql)
        out["sql"].append(change.sql)
        if out["counts"][label] is None:
            out["counts"][label] = scalar(spark, f"select count(*) from {table} where {change.rows}")
        if change.master in p.get("cdc_logs", []):
            log_sql = ds.cdc_log_insert(change, columns[change.master], before, main_snapshot(spark, table))
            out["log_seconds"][label], _ = timed(spark, log_sql)
            out["sql"].append(log_sql)
    out["changed_orders"] = sum(v for k, v in out["counts"].items() if k.startswith(f"{ds.FACT}."))
    out["commits"] = master_commits(spark, ds, s, started_ms)
    return out


def master_commits(spark, ds, s, since_ms: int) -> dict[str, list[dict]]:
    """What each master commit of the change wrote (copy-on-write rewrites whole data files,
    which capture's changelog scan then reads)."""
    keys = ("added-data-files", "deleted-data-files", "added-records", "deleted-records", "added-delete-files",
            "added-position-deletes")
    out = {}
    for m in s.masters:
        rows = spark.sql(f"select operation, summary from {ds.SCHEMA}.{m}.snapshots "
                         f"where unix_millis(committed_at) >= {since_ms} order by committed_at").collect()
        out[m] = [{"operation": r[0], **{k: r[1].get(k) for k in keys if k in r[1]}} for r in rows]
    return out


# ---------------------------------------------------------------------- verify
def step_verify(spark, p: dict) -> dict:
    """Each view vs its defining query as multisets (EXCEPT ALL both ways, and row counts),
    hidden ``_mv_*`` columns left out; then EXPLAIN of each statement that refreshed it."""
    out = {}
    for v in p["views"]:
        result = compare(spark, v["relation"], v["query"])
        result.update(refresh_writes(spark, v["relation"]))
        statements = p.get("explain", {}).get(v["name"])
        if statements:
            result["explain"] = explain_writes(spark, statements)
        out[v["name"]] = result
    return out


def refresh_writes(spark, relation: str) -> dict:
    """What the view's commits after its first one (the build) wrote: rows added and rows deleted
    (position deletes, or records a copy-on-write rewrite dropped), from the snapshots' summaries."""
    rows = spark.sql(f"select summary from {relation}.snapshots order by committed_at").collect()[1:]
    def total(key: str) -> int:
        return sum(int(r[0].get(key, 0) or 0) for r in rows)
    return {"rows_added": total("added-records"),
            "rows_deleted": total("added-position-deletes") + total("deleted-records")}


def compare(spark, relation: str, query: str) -> dict:
    """The view against its query recomputed, as multisets: the product's own comparison (the
    generic test matches_defining_query's SQL), its rows in excess on each side summed."""
    from dbt_incremental_mv.consistency import EXCESS_COLUMN, MISSING, PROBLEM_COLUMN, mismatch_sql

    differing = mismatch_sql(relation, spark.table(relation).dtypes, query)
    seconds, found = timed(
        spark, f"select {PROBLEM_COLUMN}, sum({EXCESS_COLUMN}) from ({differing}) group by {PROBLEM_COLUMN}"
    )
    excess = {problem: int(rows) for problem, rows in found}
    missing = excess.get(MISSING, 0)
    extra = sum(rows for problem, rows in excess.items() if problem != MISSING)
    view_rows = scalar(spark, f"select count(*) from {relation}")
    query_rows = scalar(spark, f"select count(*) from ({query})")
    return {"missing_rows": missing, "extra_rows": extra, "view_rows": view_rows, "query_rows": query_rows,
            "ok": missing == 0 and extra == 0 and view_rows == query_rows, "seconds": round(seconds, 2)}


def explain_writes(spark, statements: list[str]) -> list[dict]:
    """EXPLAIN each write of a refresh; the cached views they read (``cache table ...``) are made
    again first, lazily (registered, not computed: the plan shows where the writes read them), and
    dropped after."""
    plans, dropped = [], []
    for statement in statements:
        text = statement.strip()
        if text.lower().startswith("cache table "):
            try:
                spark.sql("cache lazy table " + text[len("cache table "):])
            except Exception as exc:  # noqa: BLE001 - best effort, as EXPLAIN
                plans.append({"error": str(exc).splitlines()[0][:500]})
        elif text.lower().startswith("drop view"):
            dropped.append(text)
        else:
            plans.append(explain(spark, statement))
    for statement in dropped:
        spark.sql(statement)
    return plans


def explain(spark, statement: str) -> dict:
    """The formatted plan of a refresh statement (planned, not run), its outline and its scans (each
    table scan's description with the filters pushed to it: kept whole, where the plan is cut)."""
    try:
        plan = scalar(spark, f"explain formatted {statement}")
    except Exception as exc:  # noqa: BLE001 - EXPLAIN is best effort (e.g. a statement on a dropped temp view)
        return {"error": str(exc).splitlines()[0][:500]}
    return {"outline": plan_outline(plan), "scans": plan_scans(plan), "plan": plan[:40000]}


def plan_scans(plan: str) -> list[str]:
    """Each table scan's description in a formatted plan's details (``<table> (branch=...)
    [filters=..., ...]``), at most 2,000 characters each (a long IN list of keys)."""
    return [line.strip()[:2000] for line in plan.splitlines() if " [filters=" in line and "(branch=" in line]


def plan_outline(plan: str) -> list[str]:
    """The tree part of a formatted plan: its scans, joins, exchanges and writes (one line each)."""
    tree = plan.split("\n\n\n", 1)[0]
    return [line.rstrip() for line in tree.splitlines()
            if re.search(r"Scan|Join|Write|Merge|Exchange|Union|Sort|Aggregate|Broadcast", line)]


STEPS = {"generate": step_generate, "change": step_change, "verify": step_verify}


def main(argv: list[str]) -> int:
    step, payload = argv[0], json.load(sys.stdin)
    spark = session(payload)
    try:
        result = STEPS[step](spark, payload)
    finally:
        spark.stop()
    print("RESULT " + json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
