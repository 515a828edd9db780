"""The speed-up of the fast refresh over the complete one, per view, against the masters' scale:
one plot from ``bench.py`` runs at several scales (one JSON result per scale; several runs of a
scale are reduced to their medians).

    python benchmarks/curve.py --out benchmarks/results/tpch_curve.png \
        benchmarks/results/tpch_sf1_run*.json benchmarks/results/tpch_sf3_clustered_cdc.json \
        benchmarks/results/tpch_sf10_clustered_cdc.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from report import point_rows


def speedups(paths: list[Path]) -> tuple[dict[str, dict[int, float]], dict[int, float]]:
    """Per view, scale (orders) -> median complete / fast seconds; and per scale, the views' total."""
    by_view: dict[str, dict[int, list[tuple[float, float]]]] = {}
    for path in paths:
        results = json.loads(path.read_text())
        for row in point_rows(results):
            by_view.setdefault(row["view"], {}).setdefault(int(row["scale"]), []).append((row["fast_s"], row["complete_s"]))
    per_view: dict[str, dict[int, float]] = {}
    fast_total: dict[int, float] = {}
    complete_total: dict[int, float] = {}
    for view, scales in by_view.items():
        per_view[view] = {}
        for scale, runs in scales.items():
            fast = statistics.median(f for f, _ in runs)
            complete = statistics.median(c for _, c in runs)
            per_view[view][scale] = complete / fast
            fast_total[scale] = fast_total.get(scale, 0.0) + fast
            complete_total[scale] = complete_total.get(scale, 0.0) + complete
    return per_view, {s: complete_total[s] / fast_total[s] for s in fast_total}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="the JSON results of bench.py runs")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_view, total = speedups(args.results)
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for view, points in sorted(per_view.items()):
        scales = sorted(points)
        axes.plot([s / 1.5e6 for s in scales], [points[s] for s in scales], marker="o", label=view)
    scales = sorted(total)
    axes.plot([s / 1.5e6 for s in scales], [total[s] for s in scales], marker="s", color="black", linewidth=2.5,
              label="all views")
    axes.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xticks([s / 1.5e6 for s in scales], [f"{s / 1.5e6:g}" for s in scales])
    axes.set_xlabel("TPC-H scale factor (orders / 1.5M)")
    axes.set_ylabel("complete s / fast s (above 1: fast wins)")
    axes.set_title("Fast vs complete refresh, 0.1% of orders changed, clustered")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(args.out, dpi=110)
    print(f"{args.out}: " + ", ".join(f"SF {s / 1.5e6:g} {total[s]:.2f}x" for s in scales))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
