"""Medians over repeated ``bench.py`` runs of the same parameters: one markdown table.

    python benchmarks/medians.py benchmarks/results/tpch_sf1_run*.json

Per view: the median fast and complete seconds (and the speed-up of those medians), the data
file bytes each read (the same in every run: the data and the plans are deterministic) and their
ratio, the machine's load at the start and end of each run.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from report import point_rows

def summary(paths: list[Path]) -> str:
    runs = [json.loads(p.read_text()) for p in paths]
    rows_by_view: dict[str, list[dict]] = {}
    for results in runs:
        for row in point_rows(results):
            rows_by_view.setdefault(row["view"], []).append(row)
    loads = ", ".join(
        f"{r['machine']['load_start'][0]:.1f} -> {r['machine'].get('load_end', [float('nan')])[0]:.1f}" for r in runs
    )
    lines = [
        f"{'one run' if len(runs) == 1 else f'medians of {len(runs)} runs'} ({', '.join(p.stem for p in paths)}); "
        f"load average at start -> end: {loads}",
        "",
        "| view | class | fast s | complete s | complete / fast | MB of data files fast / complete | files | "
        "MB read by tasks fast / complete | tasks |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    fast_total = complete_total = read_fast = read_complete = input_fast = input_complete = 0.0
    for view, rows in rows_by_view.items():
        fast = statistics.median(r["fast_s"] for r in rows)
        complete = statistics.median(r["complete_s"] for r in rows)
        mb_fast, mb_complete = rows[0]["mb_read_fast"], rows[0]["mb_read_complete"]
        fast_total, complete_total = fast_total + fast, complete_total + complete
        read_fast, read_complete = read_fast + (mb_fast or 0), read_complete + (mb_complete or 0)
        in_fast, in_complete = rows[0]["input_mb_fast"], rows[0]["input_mb_complete"]
        input_fast, input_complete = input_fast + (in_fast or 0), input_complete + (in_complete or 0)
        lines.append(f"| {view} | {rows[0]['class']} | {fast:.1f} | {complete:.1f} | {complete / fast:.2f}x | "
                     f"{_mb(mb_fast)} / {_mb(mb_complete)} | {_ratio(mb_fast, mb_complete)} | "
                     f"{_mb(in_fast)} / {_mb(in_complete)} | {_ratio(in_fast, in_complete)} |")
    lines.append(f"| **all** | | **{fast_total:.1f}** | **{complete_total:.1f}** | "
                 f"**{complete_total / fast_total:.2f}x** | {read_fast:.1f} / {read_complete:.1f} | "
                 f"{_ratio(read_fast, read_complete)} | {input_fast:.1f} / {input_complete:.1f} | "
                 f"{_ratio(input_fast, input_complete)} |")
    return "\n".join(lines) + "\n"


def _ratio(part: float | None, whole: float | None) -> str:
    return f"{part / whole:.1%}" if part is not None and whole else "-"


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="the JSON results of bench.py runs")
    print(summary(parser.parse_args(argv).results), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
