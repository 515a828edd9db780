"""Benchmark suite: fast refresh vs complete refresh of every view class, in one command.

    bash scripts/bench.sh --scale 1000000 --changed 0.001
    bash scripts/bench.sh --scale 1000000 --sweep fraction --changed 0.0001 0.001 0.01 0.1 0.5
    bash scripts/bench.sh --scale 1000000 2000000 4000000 --sweep scale --changed-rows 1000

Everything happens in one temporary directory (removed at the end unless ``--keep``): an Iceberg
warehouse and three dbt projects sharing it.

- project ``fast``: the masters as dbt sources, their change logs as sources with
  ``meta.mv_log`` (``capture: true``, or with ``--logs cdc`` ``capture: false``: logs written by
  the change step itself, as a CDC feed would), and one ``materialized='fast_refresh'`` model per
  view (schema ``mv_fast``);
- project ``complete``: the same queries with ``refresh_method='complete'`` (schema
  ``mv_complete``) and **no** change logs declared, so it never captures nor purges the logs the
  ``fast`` views consume;
- project ``force`` (capture-managed logs, unless ``--no-force``): the same queries with
  ``refresh_method='force'`` (the cost model chooses, refresh/cost.py), capturing into logs of
  its own (schema ``mv_force``), built with the others.

The views (``shop.py``): a filter on one table, an inner join of 3 masters, an outer join, a
SUM/COUNT/AVG aggregate, an aggregate over a join, MIN/MAX, and two more on order lines.

Steps, per scale:

1. generate  the masters from ``range(n)`` (``spark_steps.py generate``, its own process; not
             timed); with ``--logs cdc`` also their change logs, as ``create_mv_log`` makes
             them, each with an empty first commit
2. build     ``dbt run`` of ``fast``
3. no-op     ``dbt run`` of ``fast`` with nothing changed: the fixed cost of a refresh

then per point (one point, or one per ``--changed`` value with ``--sweep fraction``):

4. change    one change of the masters (``spark_steps.py change``): ``--changed`` x orders
             (40% amount/status updates, 20% join-key updates, 20% deletes, 20% inserts), as many
             order lines, a few customers and products; ``--spread``, ``--master-mode``,
             ``--logs`` say how
5. fast      ``dbt run`` of ``fast`` (``refresh_method='fast'``)
6. verify    every view equals its defining query (EXCEPT ALL both ways, row counts); exit 1
             if not. Also EXPLAINs each view's refresh statement (``--no-explain`` skips)
7. complete  ``dbt run`` of ``complete`` on the same data
8. force     ``dbt run`` of ``force`` on the same data, then verify its views

A sweep point runs on the masters and views the previous point left: the fast refresh leaves
every view equal to its query, so each point measures exactly one change of its size.

Measured: per view, dbt's ``execution_time`` for build, no-op, fast and complete; per
statement, the time until the next statement started, grouped into phases (``dbt_runs.py``); the
wall time of every dbt command. Outputs (``report.py``) go to ``benchmarks/results/``:
``<name>.md`` (the printed summary), ``<name>.csv`` (one row per view per point),
``<name>.json`` (everything, every statement's SQL and seconds) and ``<name>_*.png``.
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
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import importlib  # noqa: E402

import report  # noqa: E402
import shop  # noqa: E402
from dbt_runs import DbtFailure, run_dbt, write_project  # noqa: E402

from dbt_incremental_mv.runtime.iceberg_runtime import installed_spark  # noqa: E402

DEFAULT_FRACTION_SWEEP = (0.0001, 0.001, 0.01, 0.1, 0.5)
DATASETS = ("shop", "tpch")  # modules with the masters, views and change workload


def dataset(name: str):
    """The dataset module: ``shop`` (orders, customers, products) or ``tpch`` (TPC-H-shaped)."""
    return importlib.import_module(name)


class BenchmarkFailure(Exception):
    """The benchmark cannot go on: a step failed, a view was not fast refreshed or is wrong."""


class Progress:
    """One line per step, with the time since the benchmark started."""

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def __call__(self, message: str) -> None:
        print(f"[{time.perf_counter() - self.started:7.1f} s] {message}", flush=True)

    def elapsed(self) -> float:
        return round(time.perf_counter() - self.started, 1)


# ---------------------------------------------------------------------- the dbt projects
def _sources(ds, masters: list[str], logs: str | None, log_schema: str | None = None,
             views: list[shop.View] = (), view_logs: str = "capture") -> str:
    """``sources.yml``: the masters, and with ``logs`` ('capture' or 'cdc') their change logs
    (in ``log_schema``, default the masters' schema), and the logs of the ``views`` other views
    read (in ``log_schema``): captured from their history, or with ``view_logs='written'``
    written by their refreshes (the views get mv_log=true, see _model)."""
    lines = ["version: 2", "sources:", f"  - name: {ds.SCHEMA}", f"    schema: {ds.SCHEMA}", "    tables:"]
    lines += [f"      - name: {m}" for m in masters]
    if logs:
        lines += ["  - name: change_logs", f"    schema: {log_schema or ds.SCHEMA}", "    tables:"]
        for m in masters:
            key = ", ".join(ds.MASTERS[m].key)
            capture = "true" if logs == "capture" else "false"
            lines += [f"      - name: {ds.log_name(m)}", "        meta:",
                      f"          mv_log: {{master: {ds.SCHEMA}.{m}, key: [{key}], capture: {capture}}}"]
    read = {m for v in views for m in v.masters}
    upstream = [v for v in views if v.name in read]
    if upstream:  # views read by views: their logs, captured from their history or written by them
        lines += ["  - name: view_logs", f"    schema: {log_schema or 'mv_fast'}", "    tables:"]
        capture = ", capture: true" if view_logs == "capture" else ""
        for view in upstream:
            lines += [f"      - name: {ds.log_name(view.name)}", "        meta:",
                      f"          mv_log: {{master: {view.name}, key: [{', '.join(view.key)}]{capture}}}"]
    return "\n".join(lines) + "\n"


def _model(ds, view: shop.View, config: str, views: list[shop.View] = (), view_logs: str = "capture") -> str:
    """A model of ``view``; with ``view_logs='written'`` a view other ``views`` read keeps its own log."""
    if view_logs == "written" and any(view.name in v.masters for v in views):
        config += ", mv_log=true"
    if view.config:
        config += ", " + view.config
    tables = {m: "{{ source('" + ds.SCHEMA + "', '" + m + "') }}" if m in ds.MASTERS else "{{ ref('" + m + "') }}"
              for m in view.masters}
    return "{{ config(" + config + ") }}\n" + view.query(**tables) + "\n"


def masters_of(ds, views: list[shop.View]) -> list[str]:
    return [m for m in ds.MASTERS if any(m in v.masters for v in views)]


def write_projects(
    root: Path, warehouse: Path, ds, views: list[shop.View], args: argparse.Namespace
) -> tuple[Path, Path, Path | None]:
    """The fast, complete and (capture-managed logs only) force projects: the same views with
    refresh_method 'fast', 'complete' and 'force'. The force project captures into logs of its
    own (in its schema), so that neither project's capture or purge moves the other's logs."""
    masters = masters_of(ds, views)
    extra = f", {args.view_config}" if args.view_config else ""  # --view-config: every fast_refresh model's
    common = {"warehouse": warehouse, "driver_memory": args.driver_memory, "threads": args.threads,
              "on_run_start": ds.WARM_UP}
    fast = write_project(root, "fast", schema="mv_fast",
                         sources_yml=_sources(ds, masters, args.logs, views=views, view_logs=args.view_logs),
                         models={v.name: _model(ds, v, "materialized='fast_refresh', refresh_method='fast'" + extra,
                                                views, args.view_logs)
                                 for v in views}, **common)
    complete = write_project(
        root, "complete", schema="mv_complete", sources_yml=_sources(ds, masters, None),
        models={v.name: _model(ds, v, "materialized='fast_refresh', refresh_method='complete'") for v in views},
        **common)
    force = None
    if args.logs == "capture" and not args.no_force:
        force = write_project(
            root, "force", schema="mv_force",
            sources_yml=_sources(ds, masters, args.logs, log_schema="mv_force", views=views, view_logs=args.view_logs),
            models={v.name: _model(ds, v, "materialized='fast_refresh', refresh_method='force'" + extra, views,
                                  args.view_logs)
                    for v in views},
            **common)
    return fast, complete, force


# ---------------------------------------------------------------------- steps
def spark_step(step: str, payload: dict) -> dict:
    """Run a ``spark_steps.py`` step in its own process; its result, with its wall time."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, str(HERE / "spark_steps.py"), step], input=json.dumps(payload),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchmarkFailure(f"Spark step {step} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}")
    result = json.loads([line for line in proc.stdout.splitlines() if line.startswith("RESULT ")][-1][7:])
    result["wall_s"] = round(time.perf_counter() - started, 2)
    return result


def dbt(project: Path, step: str) -> dict:
    """``dbt run`` of ``project``, as ``dbt_runs.run_dbt`` measures it."""
    try:
        return run_dbt(project, step)
    except DbtFailure as exc:
        raise BenchmarkFailure(str(exc)) from exc


def _models_line(run: dict) -> str:
    models = run["models"]
    total = sum(m["execution_time_s"] for m in models.values())
    return (f"wall {run['wall_s']:.1f} s, models {total:.1f} s: "
            + ", ".join(f"{name} {m['execution_time_s']:.1f}" for name, m in models.items()))


# a join view that indexed_state='auto' switches to or from its indexed state is rebuilt once (plan.reshaping)
SWITCHED = ("build (the view is now read from its internal state", "build (the view is now maintained as one view")


def check_fast_refreshed(run: dict, views: list[shop.View]) -> None:
    """Every view must log ``<view>: fast refresh`` (the rows the time moved across included, when
    it reads the clock), or the rebuild of a switch of its indexed state; the reason of any other
    outcome is reported."""
    problems = []
    for view in views:
        lines = run["models"].get(view.name, {}).get("log_lines", [])
        if not any(line.startswith((f"{view.name}: fast refresh", *(f"{view.name}: {s}" for s in SWITCHED))) for line in lines):
            problems.append(f"{view.name}: " + (" | ".join(lines) or "no log line"))
    if problems:
        raise BenchmarkFailure("not fast refreshed:\n  " + "\n  ".join(problems))


def check_verified(verify: dict) -> None:
    wrong = {name: v for name, v in verify.items() if not v["ok"]}
    if wrong:
        details = "; ".join(f"{name}: {v['missing_rows']} rows missing, {v['extra_rows']} extra ({v['view_rows']} "
                            f"view rows vs {v['query_rows']} query rows)" for name, v in wrong.items())
        raise BenchmarkFailure(f"view(s) differ from their defining query after the fast refresh: {details}")


def refresh_statements(run: dict) -> dict[str, list[str]]:
    """Per view, the statements that wrote the view in the fast refresh (to EXPLAIN them): a
    write on the refresh's write branch is explained on the view itself (the branch is gone;
    the plan is the same)."""
    out = {}
    for name, model in run["models"].items():
        writes = [re.sub(r"\.`branch_mv_write_\w+`", "", s["sql"], count=1)
                  for s in model["statements"] if s["label"] == "write"]
        if writes:
            out[name] = writes
    return out


class Bench:
    """One benchmark run: the scales, their points, the results dictionary."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ds = dataset(args.dataset)
        self.views = self.ds.select_views(args.views, lines=not args.no_lines)
        self.cdc_logs = masters_of(self.ds, self.views) if args.logs == "cdc" else []  # the change step writes them
        self.progress = Progress()
        self.root = Path(tempfile.mkdtemp(prefix="bench_", dir=args.tmpdir))
        self.places: dict[int, tuple[Path, Path, Path, Path | None]] = {}  # per scale: warehouse, fast, complete, force
        self.clock = datetime.fromisoformat(args.clock) if args.clock else None  # the time the runs read (--clock)
        spark = installed_spark()  # the Spark line this benchmark's dbt runs on, and its Iceberg runtime
        self.results = {
            "name": args.name, "started": datetime.now().isoformat(timespec="seconds"),
            "params": {k: v for k, v in vars(args).items() if k not in ("tmpdir", "out_dir")},
            "machine": {"cores": os.cpu_count(), "load_start": os.getloadavg(),
                        "spark": spark.version, "iceberg": spark.iceberg},
            "scales": [],
        }

    def payload(self, warehouse: Path, scale: int, **extra) -> dict:
        sizes = {"scale": scale, **self.ds.size_options(self.args)}
        return {"warehouse": str(warehouse), "driver_memory": self.args.driver_memory, "dataset": self.args.dataset,
                "sizes": sizes, **extra}

    def run(self) -> dict:
        a = self.args
        self.progress(f"bench {a.name}: {a.dataset}, scales {a.scale}, changed {a.changed or a.changed_rows}, spread {a.spread}, "
                      f"masters {a.master_mode} v{a.master_format}, logs {a.logs}, views {', '.join(v.name for v in self.views)}")
        for scale in a.scale:
            record = self.prepare(scale)
            for index, change in enumerate(self.changes()):
                record["points"].append(self.point(record, index, **change))
            if not a.keep and len(a.scale) > 1:
                shutil.rmtree(self.root / str(scale), ignore_errors=True)
        return self.results

    def changes(self) -> list[dict]:
        if self.args.changed_rows:
            return [{"changed_rows": self.args.changed_rows}]
        return [{"fraction": f} for f in self.args.changed]

    def prepare(self, scale: int) -> dict:
        """Generate the masters, write the projects, build the views, refresh with nothing changed."""
        root = self.root / str(scale)
        warehouse = root / "warehouse"
        fast, complete, force = write_projects(root, warehouse, self.ds, self.views, self.args)
        record = {"scale": scale, "views": [{"name": v.name, "class": v.kind} for v in self.views], "points": []}
        self.results["scales"].append(record)
        self.places[scale] = (warehouse, fast, complete, force)
        self.progress(f"generate masters ({scale:,} orders, {self.args.master_mode})")
        record["generate"] = spark_step("generate", self.payload(warehouse, scale, master_mode=self.args.master_mode,
                                                                 master_format=self.args.master_format,
                                                                 cdc_logs=self.cdc_logs))
        logs = ", ".join(self.ds.log_name(m) for m in self.cdc_logs)
        self.progress(f"generated: {report.rows_text(record)} in {record['generate']['wall_s']:.1f} s"
                      + (f"; change logs {logs}" if logs else ""))
        self.set_clock(0.0)
        record["build"] = dbt(fast, "build")
        self.progress(f"build: {_models_line(record['build'])}")
        record["noop"] = dbt(fast, "noop")
        self.progress(f"no-op refresh: {_models_line(record['noop'])}")
        if force is not None:
            record["force_build"] = dbt(force, "force_build")
            self.progress(f"build (force project): {_models_line(record['force_build'])}")
        return record

    def point(self, record: dict, index: int, fraction: float | None = None, changed_rows: int | None = None) -> dict:
        """Change, fast refresh, verify, complete refresh, force refresh (and verify it)."""
        warehouse, fast, complete, force = self.places[record["scale"]]
        point: dict = {"planned_fraction": fraction, "changed_rows": changed_rows}
        payload = self.payload(warehouse, record["scale"], fraction=fraction, changed_rows=changed_rows,
                               spread=self.args.spread, salt=101 + index, cdc_logs=self.cdc_logs,
                               dimensions=not self.args.no_dimension_changes,
                               facts=not self.args.only_dimension_changes,
                               dimension_rows=self.args.dimension_rows,
                               dimension_updates=self.args.dimension_updates,
                               append_only=self.args.append_only)
        change = point["change"] = spark_step("change", payload)
        point["clock"] = self.set_clock(self.args.clock_step_hours)
        point["fraction"] = change["changed_orders"] / change["orders_before"]
        self.progress(f"change: {change['changed_orders']:,} orders ({point['fraction']:.4%})"
                      f"{'' if self.args.no_dimension_changes else ' + dimensions'}"
                      f"{' (dimensions only)' if self.args.only_dimension_changes else ''}, "
                      f"{len(change['counts'])} master commits, {change['wall_s']:.1f} s: {change['counts']}")
        run = point["fast"] = dbt(fast, f"fast_{index}")
        self.progress(f"fast refresh: {_models_line(run)}")
        for name, model in run["models"].items():
            print(f"      {model['log_lines'][-1] if model['log_lines'] else name}", flush=True)
        check_fast_refreshed(run, self.views)
        point["verify"] = self.verify(warehouse, record["scale"], run)
        run = point["complete"] = dbt(complete, f"complete_{index}")
        self.progress(f"complete refresh: {_models_line(run)}")
        if force is not None:
            run = point["force"] = dbt(force, f"force_{index}")
            self.progress(f"force refresh: {_models_line(run)}")
            for name, model in run["models"].items():
                print(f"      {model['log_lines'][-1] if model['log_lines'] else name}", flush=True)
            point["force_verify"] = self.verify(warehouse, record["scale"], run, schema="mv_force")
        return point

    def set_clock(self, hours: float) -> str | None:
        """With --clock: move the time the next runs read by ``hours`` (DBT_INCREMENTAL_MV_NOW); the time."""
        if self.clock is None:
            return None
        self.clock += timedelta(hours=hours)
        os.environ["DBT_INCREMENTAL_MV_NOW"] = self.clock.strftime("%Y-%m-%d %H:%M:%S")
        return os.environ["DBT_INCREMENTAL_MV_NOW"]

    def at_clock(self, sql: str) -> str:
        """A defining query at the time the runs read (--clock), for the verification."""
        if self.clock is None:
            return sql
        return (sql.replace("current_date()", f"date'{self.clock:%Y-%m-%d}'")
                .replace("current_timestamp()", f"timestamp'{self.clock:%Y-%m-%d %H:%M:%S}'"))

    def verify(self, warehouse: Path, scale: int, fast_run: dict, schema: str = "mv_fast") -> dict:
        views = [{"name": v.name, "relation": f"{schema}.{v.name}",
                  "query": self.at_clock(
                      v.query(**{m: f"{self.ds.SCHEMA if m in self.ds.MASTERS else schema}.{m}" for m in v.masters}))}
                 for v in self.views]
        explain = {} if self.args.no_explain or schema != "mv_fast" else refresh_statements(fast_run)
        result = spark_step("verify", self.payload(warehouse, scale, views=views, explain=explain))
        wall = result.pop("wall_s")
        outcome = ", ".join(f"{n} {'ok' if v['ok'] else 'WRONG'} ({v['view_rows']:,} rows)" for n, v in result.items())
        self.progress(f"verify: {len(result)} views, wall {wall:.1f} s: {outcome}")
        check_verified(result)
        return result


# ---------------------------------------------------------------------- outputs
def scrub_paths(results: dict, workdir: Path) -> dict:
    """``results`` with the local paths (in failure messages) written ``<workdir>``, ``<repo>``, ``~``."""
    text = json.dumps(results, default=str)
    for path, name in ((workdir, "<workdir>"), (HERE.parent, "<repo>"), (Path.home(), "~")):
        text = text.replace(str(path), name)
    return json.loads(text)


def write_outputs(results: dict, out_dir: Path, workdir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    prefix = out_dir / results["name"]
    results = scrub_paths(results, workdir)
    rows = report.point_rows(results)
    files = {ext: prefix.with_name(f"{prefix.name}.{ext}") for ext in ("md", "csv", "json")}
    report.write_json(results, files["json"])
    report.write_csv(rows, files["csv"])
    summary = report.markdown(results)
    files["md"].write_text(summary)
    pngs = report.plots(results, rows, prefix) if rows else []
    print("\n" + summary, flush=True)
    print("results: " + ", ".join(str(p) for p in [*files.values(), *pngs]), flush=True)
    return prefix


# ---------------------------------------------------------------------- command line
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=DATASETS, default="shop",
                        help="shop (orders, customers, products, order lines) or tpch (TPC-H-shaped: lineitem, "
                             "orders, customer, nation; --scale 1500000 is scale factor 1)")
    parser.add_argument("--scale", type=int, nargs="+", default=[1_000_000],
                        help="orders (customers: scale/10); several with --sweep scale")
    parser.add_argument("--changed", type=float, nargs="+", default=None,
                        help="fraction(s) of orders changed per point (default 0.001; several with --sweep fraction)")
    parser.add_argument("--changed-rows", type=int, default=None,
                        help="a fixed number of changed orders instead of a fraction (for --sweep scale)")
    parser.add_argument("--sweep", choices=("fraction", "scale"), default=None)
    parser.add_argument("--spread", choices=("scattered", "clustered"), default="scattered",
                        help="changed rows picked by a hash over every data file, or the newest rows")
    parser.add_argument("--append-only", action="store_true",
                        help="each point's change inserts new rows only (as an ingestion that appends)")
    parser.add_argument("--master-mode", choices=("cow", "mor"), default="cow",
                        help="masters' write.delete/update/merge.mode: copy-on-write or merge-on-read")
    parser.add_argument("--master-format", type=int, choices=(2, 3), default=2,
                        help="masters' Iceberg format version (3: row lineage, which capture reads)")
    parser.add_argument("--logs", choices=("capture", "cdc"), default="capture",
                        help="change logs filled by the plugin from Iceberg history, or written by the change step")
    parser.add_argument("--view-logs", choices=("capture", "written"), default="capture",
                        help="the logs of views other views read: captured from their history, or written by their "
                             "refreshes (mv_log=true)")
    parser.add_argument("--no-dimension-changes", action="store_true",
                        help="change the facts only (orders and their lines), no customer or product: what "
                             "the dimension changes cost a refresh is the difference")
    parser.add_argument("--only-dimension-changes", action="store_true",
                        help="change the dimensions only (the facts unchanged): what a dimension's change costs a join")
    parser.add_argument("--dimension-rows", type=int, default=None,
                        help="customers updated per change (the columns the dataset's change moves; none deleted "
                             "or inserted); default the dataset's mix (20 updated, 5 deleted, 5 inserted)")
    parser.add_argument("--dimension-updates", choices=("moves", "attributes"), default=None,
                        help="tpch: what a customer's update changes: 'moves' (the default: its nation and market "
                             "segment reassigned) or 'attributes' (its name and balance)")
    parser.add_argument("--no-lines", action="store_true", help="no order_lines master (and no views on it)")
    parser.add_argument("--clock", default=None,
                        help="the time the views' current_date()/current_timestamp() read as at the build "
                             "(YYYY-MM-DD HH:MM:SS; default: the session's clock)")
    parser.add_argument("--clock-step-hours", type=float, default=0.0,
                        help="with --clock: each change's runs read the time this many hours after the previous")
    parser.add_argument("--products", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=8, help="data files per master when generated")
    parser.add_argument("--views", type=lambda s: [v for v in s.split(",") if v], default=None,
                        help="comma-separated views (default all): " + ", ".join(
                            v.name for name in DATASETS for v in dataset(name).VIEWS))
    parser.add_argument("--threads", type=int, default=1, help="dbt threads (1: every view timed alone)")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--view-config", default="",
                        help="more config of every fast and force model, e.g. \"rewrite_rows=200000\"")
    parser.add_argument("--no-explain", action="store_true", help="do not EXPLAIN the refresh statements")
    parser.add_argument("--no-force", action="store_true",
                        help="no force project (refresh_method='force': the cost model's choice, timed against both)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--tmpdir", default=None, help="where to create the temporary directory")
    parser.add_argument("--out-dir", default=str(HERE / "results"))
    parser.add_argument("--name", default=None, help="file name prefix of the results (default from the parameters)")
    args = parser.parse_args(argv)
    check_args(parser, args)
    return args


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.sweep == "fraction":
        if len(args.scale) != 1 or args.changed_rows:
            parser.error("--sweep fraction takes one --scale and fractions in --changed (not --changed-rows)")
        args.changed = args.changed if args.changed and len(args.changed) > 1 else list(DEFAULT_FRACTION_SWEEP)
    elif args.sweep == "scale":
        if len(args.scale) == 1:
            args.scale = [args.scale[0], 2 * args.scale[0], 4 * args.scale[0]]
        if not args.changed_rows:
            fraction = args.changed[0] if args.changed else 0.001
            args.changed_rows = max(1, round(fraction * args.scale[0]))
    else:
        if len(args.scale) != 1 or (args.changed and len(args.changed) != 1):
            parser.error("several --scale or --changed values need --sweep scale or --sweep fraction")
    if args.changed is None and not args.changed_rows:
        args.changed = [0.001]
    if args.changed_rows:
        args.changed = None
    if any(f <= 0 or f > 1 for f in args.changed or []):
        parser.error("--changed fractions must be in (0, 1]")
    try:
        dataset(args.dataset).select_views(args.views, lines=not args.no_lines)
    except ValueError as exc:
        parser.error(str(exc))
    if args.name is None:
        args.name = default_name(args)


def default_name(args: argparse.Namespace) -> str:
    scales = "-".join(str(s) for s in args.scale)
    changed = f"rows{args.changed_rows}" if args.changed_rows else "-".join(f"{f:g}" for f in args.changed)
    sweep = f"sweep-{args.sweep}_" if args.sweep else ""
    lines = "_nolines" if args.no_lines and args.dataset == "shop" else ""
    data = "" if args.dataset == "shop" else f"{args.dataset}_"
    version = "" if args.master_format == 2 else f"-v{args.master_format}"
    facts = "_facts" if args.no_dimension_changes else ""
    facts += "_append" if args.append_only else ""
    return f"bench_{data}{sweep}{scales}_{changed}_{args.spread}_{args.master_mode}{version}_{args.logs}{lines}{facts}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench = Bench(args)
    failed = None
    try:
        bench.run()
    except BenchmarkFailure as exc:
        failed = exc
        args.keep = True
    except BaseException as exc:  # an interrupt or a bug: keep the directory, write what was measured
        args.keep = True
        bench.results["failure"] = repr(exc)
        raise
    finally:
        bench.results["total_s"] = bench.progress.elapsed()
        bench.results["machine"]["load_end"] = os.getloadavg()
        if failed is not None:
            bench.results["failure"] = str(failed)
        write_outputs(bench.results, Path(args.out_dir), bench.root)
        if args.keep:
            print(f"kept {bench.root}")
        else:
            shutil.rmtree(bench.root, ignore_errors=True)
    if failed is not None:
        print(f"\nBENCHMARK FAILED: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
