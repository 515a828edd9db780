"""Outputs of ``bench.py``: CSV rows, markdown tables, the JSON of everything, PNG plots.

The results dictionary (what the JSON holds)::

    {"params": {...}, "machine": {...}, "scales": [
        {"scale": n, "sizes": {...}, "generate": {...}, "build": <dbt run>, "noop": <dbt run>,
         "points": [{"fraction": f, "change": {...}, "fast": <dbt run>, "verify": {...},
                     "complete": <dbt run>}, ...]}, ...]}

where a ``<dbt run>`` is ``dbt_runs.run_dbt``'s result: wall time and, per model, execution
time, log lines, statements (SQL, label, phase, seconds) and phase totals.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from dbt_runs import PHASES

CSV_COLUMNS = (
    ["scale", "point", "changed_fraction", "changed_orders", "spread", "master_mode", "master_format", "logs", "view", "class",
     "fast_s", "complete_s", "speedup", "force_s", "force_method", "force_vs_best", "noop_s", "build_s", "statements_fast", "statements_noop",
     "statements_complete"]
    + [f"fast_{p}_s" for p in PHASES]
    + ["view_rows", "rows_added", "rows_deleted", "verified",
       "files_read_fast", "files_read_complete", "mb_read_fast", "mb_read_complete", "read_ratio",
       "input_mb_fast", "input_mb_complete", "input_ratio"]
)


def _model(run: dict | None, view: str) -> dict | None:
    return (run or {}).get("models", {}).get(view)


def point_rows(results: dict) -> list[dict]:
    """One row per view per point (a change + fast + verify + complete)."""
    p = results["params"]
    rows = []
    for scale in results["scales"]:
        for number, point in enumerate(scale["points"], 1):
            for view in scale["views"]:
                rows.append({"point": number, **_row(p, scale, point, view["name"], view["class"])})
    return rows


def _row(p: dict, scale: dict, point: dict, view: str, kind: str) -> dict:
    fast, complete = _model(point.get("fast"), view), _model(point.get("complete"), view)
    force = _model(point.get("force"), view)
    best = min(fast["execution_time_s"], complete["execution_time_s"]) if fast and complete else None
    noop, build = _model(scale.get("noop"), view), _model(scale.get("build"), view)
    verify = (point.get("verify") or {}).get(view, {})
    change = point.get("change") or {}
    row = {
        "scale": scale["scale"],
        "changed_fraction": point.get("fraction"),
        "changed_orders": change.get("changed_orders"),
        "spread": p["spread"], "master_mode": p["master_mode"], "master_format": p.get("master_format", 2),
        "logs": p["logs"],
        "view": view, "class": kind,
        "fast_s": fast and fast["execution_time_s"],
        "complete_s": complete and complete["execution_time_s"],
        "speedup": (round(complete["execution_time_s"] / fast["execution_time_s"], 2)
                    if fast and complete and fast["execution_time_s"] else None),
        "force_s": force and force["execution_time_s"],
        "force_method": force and force_method(force, view),
        "force_vs_best": round(force["execution_time_s"] / best, 2) if force and best else None,
        "noop_s": noop and noop["execution_time_s"],
        "build_s": build and build["execution_time_s"],
        "statements_fast": fast and fast["n_statements"],
        "statements_noop": noop and noop["n_statements"],
        "statements_complete": complete and complete["n_statements"],
        "view_rows": verify.get("view_rows"),
        "rows_added": verify.get("rows_added"),
        "rows_deleted": verify.get("rows_deleted"),
        "verified": verify.get("ok"),
    }
    for phase in PHASES:
        row[f"fast_{phase}_s"] = fast and round(fast["phases"].get(phase, 0.0), 2)
    row.update(_reads_columns(fast, complete))
    return row


MB = 1024 * 1024


def _reads_columns(fast: dict | None, complete: dict | None) -> dict:
    """Data files and bytes each refresh read (the scanned files' size, and what its tasks read),
    and fast / complete: the figure that does not drift with the machine's load."""
    def value(model: dict | None, key: str):
        return (model or {}).get(key)

    def mb(size):
        return round(size / MB, 2) if size is not None else None

    def ratio(a, b):
        return round(a / b, 4) if a is not None and b else None

    return {
        "files_read_fast": value(fast, "files_read"), "files_read_complete": value(complete, "files_read"),
        "mb_read_fast": mb(value(fast, "bytes_read")), "mb_read_complete": mb(value(complete, "bytes_read")),
        "read_ratio": ratio(value(fast, "bytes_read"), value(complete, "bytes_read")),
        "input_mb_fast": mb(value(fast, "input_bytes")), "input_mb_complete": mb(value(complete, "input_bytes")),
        "input_ratio": ratio(value(fast, "input_bytes"), value(complete, "input_bytes")),
    }


def force_method(model: dict, view: str) -> str | None:
    """What refresh_method='force' ran: 'fast' or 'complete' (from the model's log line)."""
    for line in reversed(model.get("log_lines") or []):
        if line.startswith(f"{view}: fast refresh"):
            return "fast"
        if line.startswith(f"{view}: complete"):
            return "complete"
    return None


def totals(rows: list[dict]) -> dict:
    """Per point, the seconds of all views: fast, complete, force, and force against the better
    of the two per view (the choice a perfect model would make)."""
    def total(key: str) -> float | None:
        values = [r[key] for r in rows]
        return round(sum(values), 2) if values and None not in values else None
    best = [min(r["fast_s"], r["complete_s"]) for r in rows if r["fast_s"] is not None and r["complete_s"] is not None]
    force = total("force_s")
    return {"fast_s": total("fast_s"), "complete_s": total("complete_s"), "force_s": force,
            "best_s": round(sum(best), 2) if best else None,
            "force_vs_best": round(force / sum(best), 2) if force is not None and best and sum(best) else None}


def read_totals(rows: list[dict]) -> str:
    """All views' reads: the data files scanned (MB) and the bytes their tasks read, fast vs complete."""
    def total(key: str) -> float | None:
        values = [r[key] for r in rows]
        return sum(values) if values and None not in values else None
    scanned_fast, scanned_complete = total("mb_read_fast"), total("mb_read_complete")
    if scanned_fast is None or scanned_complete is None:
        return ""
    line = (f"read: data files scanned fast {scanned_fast:.1f} MB, complete {scanned_complete:.1f} MB"
            f" ({scanned_fast / scanned_complete:.1%})" if scanned_complete else "")
    input_fast, input_complete = total("input_mb_fast"), total("input_mb_complete")
    if input_fast is not None and input_complete:
        line += f"; read by tasks fast {input_fast:.1f} MB, complete {input_complete:.1f} MB ({input_fast / input_complete:.1%})"
    return line


# ---------------------------------------------------------------------- files
def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def write_json(results: dict, path: Path) -> None:
    path.write_text(json.dumps(results, indent=1, default=str))


def _fmt(value, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _engine(machine: dict) -> str:
    """The engine as the run recorded it, e.g. ``Spark 4.1.1 (Iceberg 1.11.0), `` (empty for runs that did not)."""
    if "spark" not in machine:
        return ""
    iceberg = f" (Iceberg {machine['iceberg']})" if "iceberg" in machine else ""
    return f"Spark {machine['spark']}{iceberg}, "


def markdown(results: dict) -> str:
    """The summary: parameters, then per point a table of views and the dbt commands' wall times."""
    p, machine = results["params"], results["machine"]
    lines = [
        f"# fast_refresh benchmark: {results['name']}",
        "",
        f"- started {results['started']}, {_engine(machine)}{machine['cores']} cores, load average {_fmt(machine['load_start'][0])} "
        f"-> {_fmt(machine.get('load_end', [None])[0])}, total {_fmt(results.get('total_s'))} s",
        f"- spread {p['spread']}, masters {p['master_mode']} (Iceberg v{p.get('master_format', 2)}), logs {p['logs']}, order lines "
        f"{'no' if p['no_lines'] else 'yes'}, dimension changes {'no' if p.get('no_dimension_changes') else 'yes'}, "
        f"threads {p['threads']}, driver memory {p['driver_memory']}",
        "- seconds: model `execution_time` from `run_results.json` (fast, complete, no-op); the fast refresh's "
        "phases from the timed plugin calls (`dbt_timed.py`); statements: SQL statements the model ran "
        "(Iceberg metadata reads and commits through the Java API are not statements)",
    ]
    rows = point_rows(results)
    for scale in results["scales"]:
        lines += ["", f"## {scale['scale']:,} orders ({rows_text(scale)})", ""]
        lines.append(f"dbt wall s: build {_wall(scale.get('build'))}, no-op {_wall(scale.get('noop'))}")
        for number, point in enumerate(scale["points"], 1):
            lines += ["", _point_title(point), ""]
            # (by the point's number: a sweep may repeat a fraction, e.g. one change after another)
            mine = [r for r in rows if r["scale"] == scale["scale"] and r["point"] == number]
            lines += point_table(mine)
            summed = totals(mine)
            lines += ["", f"dbt wall s: fast {_wall(point.get('fast'))}, complete {_wall(point.get('complete'))}"
                      + (f", force {_wall(point.get('force'))}" if point.get("force") else "")]
            lines.append(f"models s: fast {_fmt(summed['fast_s'])}, complete {_fmt(summed['complete_s'])}"
                         + (f" ({summed['complete_s'] / summed['fast_s']:.2f}x)" if summed['fast_s'] and summed['complete_s'] else ""))
            read = read_totals(mine)
            if read:
                lines.append(read)
            if summed["force_s"] is not None:
                lines.append(f"models s: fast {_fmt(summed['fast_s'])}, complete {_fmt(summed['complete_s'])}, "
                             f"force {_fmt(summed['force_s'])}; the better of fast and complete per view "
                             f"{_fmt(summed['best_s'])}: force {_fmt(summed['force_vs_best'], 2)}x of it")
    return "\n".join(lines) + "\n"


def point_table(rows: list[dict]) -> list[str]:
    header = ["view", "class", "fast s", "complete s", "speed-up", "force s (chose)", "force / best", "no-op s", "stmts fast", "stmts no-op",
              *PHASES, "files fast / complete", "MB scanned fast / complete", "scanned", "MB read by tasks fast / complete",
              "read", "rows", "rows +/- by fast", "verified"]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        cells = [r["view"], r["class"], _fmt(r["fast_s"]), _fmt(r["complete_s"]), _fmt(r["speedup"], 2) + "x",
                 f"{_fmt(r['force_s'])} ({r['force_method'] or '-'})", _fmt(r["force_vs_best"], 2) + "x",
                 _fmt(r["noop_s"]), _fmt(r["statements_fast"]), _fmt(r["statements_noop"]),
                 *[_fmt(r[f"fast_{p}_s"]) for p in PHASES],
                 f"{_fmt(r['files_read_fast'])} / {_fmt(r['files_read_complete'])}",
                 f"{_fmt(r['mb_read_fast'])} / {_fmt(r['mb_read_complete'])}", _percent(r["read_ratio"]),
                 f"{_fmt(r['input_mb_fast'])} / {_fmt(r['input_mb_complete'])}", _percent(r["input_ratio"]),
                 _fmt(r["view_rows"]),
                 f"+{_fmt(r['rows_added'])} / -{_fmt(r['rows_deleted'])}",
                 {True: "yes", False: "NO"}.get(r["verified"], "-")]
        out.append("| " + " | ".join(cells) + " |")
    return out


def _percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.1%}"


def rows_text(scale: dict) -> str:
    rows = (scale.get("generate") or {}).get("rows") or {}
    return ", ".join(f"{name} {count:,}" for name, count in rows.items())


def _point_title(point: dict) -> str:
    change = point.get("change") or {}
    counts = change.get("counts") or {}
    text = ", ".join(f"{k} {v:,}" for k, v in counts.items() if v is not None)
    percent = _fmt((point.get("fraction") or 0) * 100, 4)
    return f"### changed {percent}% of orders: {change.get('changed_orders')} orders ({text})"


def _wall(run: dict | None) -> str:
    return _fmt(run and run["wall_s"])


# ---------------------------------------------------------------------- plots
def matplotlib_ticker():
    import matplotlib.ticker

    return matplotlib.ticker


def plots(results: dict, rows: list[dict], prefix: Path) -> list[Path]:
    """PNG files: per point, fast vs complete (and no-op) per view, and the fast refresh's phases;
    for sweeps, seconds vs changed fraction or vs scale (log scales)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots (scripts/bench.sh installs it)", flush=True)
        return []
    written = []
    points = sorted({(r["scale"], r["changed_fraction"]) for r in rows})
    for scale, fraction in points:
        mine = [r for r in rows if (r["scale"], r["changed_fraction"]) == (scale, fraction)]
        suffix = "" if len(points) == 1 else f"_{scale}_{fraction:g}"
        title = f"{scale:,} orders, {fraction:.4%} changed"
        written.append(_bars(plt, mine, title, prefix.with_name(prefix.name + f"_bars{suffix}.png")))
        written.append(_phases(plt, mine, title, prefix.with_name(prefix.name + f"_phases{suffix}.png")))
    sweep = results["params"].get("sweep")
    if sweep == "fraction":
        written.append(_sweep(plt, rows, "changed_fraction", "changed fraction of orders",
                              prefix.with_name(prefix.name + "_vs_fraction.png")))
    elif sweep == "scale":
        written.append(_sweep(plt, rows, "scale", "orders (scale)", prefix.with_name(prefix.name + "_vs_scale.png")))
    return written


def _bars(plt, rows: list[dict], title: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(rows)), 4.5))
    width = 0.27
    xs = range(len(rows))
    for i, (key, label) in enumerate((("fast_s", "fast refresh"), ("complete_s", "complete refresh"),
                                      ("noop_s", "no-op refresh"))):
        ax.bar([x + (i - 1) * width for x in xs], [r[key] or 0 for r in rows], width, label=label)
    ax.set_xticks(list(xs), [f"{r['view']}\n({r['class']})" for r in rows], fontsize=7, rotation=25, ha="right")
    ax.set_ylabel("model execution time (s)")
    ax.set_title(f"fast vs complete refresh: {title}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _phases(plt, rows: list[dict], title: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(rows) + 1.5))
    left = [0.0] * len(rows)
    for phase in PHASES:
        values = [r[f"fast_{phase}_s"] or 0 for r in rows]
        ax.barh([r["view"] for r in rows], values, left=left, label=phase)
        left = [a + b for a, b in zip(left, values)]
    ax.invert_yaxis()
    ax.set_xlabel("seconds")
    ax.set_title(f"fast refresh by phase: {title}", fontsize=9)
    ax.legend(fontsize=7, ncol=len(PHASES), loc="lower center", bbox_to_anchor=(0.5, 1.08))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _sweep(plt, rows: list[dict], x_key: str, x_label: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 5))
    views = list(dict.fromkeys(r["view"] for r in rows))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, view in enumerate(views):
        mine = sorted((r for r in rows if r["view"] == view), key=lambda r: r[x_key])
        xs = [r[x_key] for r in mine]
        color = colors[i % len(colors)]
        ax.plot(xs, [r["fast_s"] for r in mine], "o-", color=color, label=f"{view} fast")
        ax.plot(xs, [r["complete_s"] for r in mine], "s--", color=color, alpha=0.6, label=f"{view} complete")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticker = matplotlib_ticker()
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(ticker.FuncFormatter(  # 2 and 5 between the powers of ten
        lambda value, _: f"{value:g}" if f"{value:e}"[0] in "25" else ""))
    points = sorted({r[x_key] for r in rows})  # one tick per measured point
    ax.xaxis.set_major_locator(ticker.FixedLocator(points))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(
        (lambda value, _: f"{value:,.0f}") if x_key == "scale" else (lambda value, _: f"{value:.3g}")))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel(x_label)
    ax.set_ylabel("model execution time (s)")
    ax.set_title("fast (solid) vs complete (dashed) refresh")
    ax.legend(fontsize=6, ncol=2)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
