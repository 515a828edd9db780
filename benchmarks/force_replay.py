"""What ``refresh_method='force'`` would have chosen on a benchmark run, with the package's prices.

    python benchmarks/force_replay.py benchmarks/results/tpch_sf1_run1.json [...]
    DBT_INCREMENTAL_MV_CALIBRATION=mine.json python benchmarks/force_replay.py ...

A run records, per view, every statement the fast refresh ran (its SQL, its seconds, the bytes of
the data files Iceberg planned for its scans) and the complete refresh. The replay prices them the
way force does (dbt_incremental_mv/refresh/cost.py: ``statement_stages``, ``fast_seconds``,
``complete_seconds``): the fast refresh's write statements (the mark step has run when force
decides), the complete refresh's bytes read through the stages and windows of the view's build
(the fast project's first run: a view refreshed fast keeps its hidden columns, the MIN/MAX reserves
ranked by windows, and its layout sorts it, so a forced rebuild runs that query, not the complete
project's plain one), and the view's size (the largest scan of it). It prints the choice per view
against the measured times and, per run, force's total against the better method of every view
(the issue's "within 1.1x"), and against the better of each view's fast refresh and its own
rebuild (timed by the fast project's build statement).

Replays a run's decisions without running force: runs with ingestion-written logs have no force
project, and a refit of the prices can be checked against every committed run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import sqlglot
from sqlglot import exp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dbt_incremental_mv.refresh import cost  # noqa: E402


def _model(run: dict | None, view: str) -> dict | None:
    return ((run or {}).get("models") or {}).get(view)


def _scans(model: dict) -> dict[str, int]:
    """Data-file bytes per statement (first 60 characters of its normalized SQL, as recorded)."""
    return {r["statement"][:60]: sum(s["bytes"] for s in r["scans"]) for r in model.get("reads", [])}


def _view_bytes(model: dict, schema_view: str) -> int:
    return max((s["bytes"] for r in model.get("reads", []) for s in r["scans"] if s["table"] == schema_view), default=0)


def _build(build: dict) -> tuple[tuple[int, int], float]:
    """The view's build statement (the query a complete refresh runs): its (joins and
    aggregations, windows) and its seconds."""
    statement = next(s for s in build["statements"] if s["phase"] == "write")
    windows = sum(1 for _ in sqlglot.parse_one(statement["sql"], read="spark").find_all(exp.Window))
    return (cost.statement_stages(statement["sql"]) - windows, windows), statement["seconds"]


def replay(results: dict, prices: cost.Calibration) -> list[dict]:
    rows = []
    for scale in results["scales"]:
        for point in scale["points"]:
            for view in (v["name"] for v in scale["views"]):
                fast, complete, build = (_model(point.get("fast"), view), _model(point.get("complete"), view),
                                         _model(scale.get("build"), view))
                if not (fast and complete and build) or "bytes_read" not in complete:
                    continue  # (runs before 2026-11-26 recorded no reads)
                scanned = _scans(fast)
                stages, read = [], 0
                for statement in fast["statements"]:
                    if statement["phase"] != "write" or statement["sql"].startswith(("drop view", "uncache")):
                        continue
                    stages.append(cost.statement_stages(statement["sql"]))
                    read += scanned.get(" ".join(statement["sql"].split())[:60], 0)
                schema = next(iter({s["table"].split(".")[0] for r in fast.get("reads", []) for s in r["scans"]
                                    if s["table"].endswith("." + view)}), "mv_fast")
                view_bytes = _view_bytes(fast, f"{schema}.{view}")
                shape, rebuilt = _build(build)
                estimate_fast = cost.fast_seconds(prices, stages, read, 0, 0)
                estimate_complete = cost.complete_seconds(prices, complete["bytes_read"], *shape, view_bytes)
                measured_fast = fast["execution_time_s"]
                # a forced rebuild runs the build's query (hidden columns, the view sorted), not the
                # complete project's plain one
                measured_complete = rebuilt
                choice = "complete" if estimate_complete < estimate_fast else "fast"
                rows.append({
                    "view": view, "estimate_fast": estimate_fast, "estimate_complete": estimate_complete,
                    "fast": measured_fast, "complete": measured_complete, "choice": choice,
                    "chosen": measured_fast if choice == "fast" else measured_complete,
                    "best": min(measured_fast, complete["execution_time_s"]),
                    "best_own": min(measured_fast, measured_complete),
                })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", type=Path)
    args = parser.parse_args(argv)
    prices = cost.calibration()
    print("| run | view | estimated fast / complete s | measured fast / complete s | force runs | force / better |")
    print("|---|---|---|---|---|---|")
    totals = []
    for path in args.results:
        rows = replay(json.loads(path.read_text()), prices)
        for r in rows:
            print(f"| {path.stem} | {r['view']} | {r['estimate_fast']:.1f} / {r['estimate_complete']:.1f} | "
                  f"{r['fast']:.1f} / {r['complete']:.1f} | {r['choice']} | {r['chosen'] / r['best']:.2f}x |")
        if not rows:
            totals.append(f"{path.stem}: no reads recorded (a run before 2026-11-26): nothing to price")
            continue
        chosen, best = sum(r["chosen"] for r in rows), sum(r["best"] for r in rows)
        own = sum(r["best_own"] for r in rows)
        totals.append(f"{path.stem}: force {chosen:.1f} s against {best:.1f} s for the better method of each view "
                      f"({chosen / best:.2f}x), {own:.1f} s counting the model's own rebuilds "
                      f"({chosen / own:.2f}x)")
    print()
    print("\n".join(totals))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
