"""Sum the per-step summaries of a generated-definitions run made in steps (scripts/fuzz.sh, one
seed each) into one page: the totals, the maintained classes, the refused constructs, and a row
per step with its commit and wall time.

    python scripts/fuzz_summary.py --title "..." --runs runs.txt --out tests/results/fuzz_2000_seeds101-120.md \
        tests/results/fuzz_100_seed101.md ...

``--runs``: lines ``seed <S> rc=<rc> <seconds>s <commit>`` (what a stepping loop records); a step
without one shows no commit or time."""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

ROW = re.compile(r"^\| ([^|]+?) \| ([0-9,]+) \|$")
HEADER = re.compile(r"^seed (\d+), ")
SECTIONS = {"measure": "measures", "class (maintained)": "classes", "refused construct": "refusals"}
MEASURES = {
    "maintained": "maintained",
    "refused (as expected)": "refused (as expected)",
    "random operations": "random operations",
    "view-vs-query comparisons": "view-vs-query comparisons",
    "failures": "failures",
}


def read_step(path: Path) -> tuple[int, dict[str, Counter]]:
    text = path.read_text(encoding="utf-8").splitlines()
    match = HEADER.match(text[0]) if text else None
    if match is None:
        raise SystemExit(f"{path}: not a step summary (its first line names the seed)")
    tables: dict[str, Counter] = {name: Counter() for name in SECTIONS.values()}
    current = None
    for line in text:
        if line.startswith("| ") and not line.startswith("|---"):
            head = line.strip("| ").split(" | ")[0]
            if head in SECTIONS:
                current = SECTIONS[head]
                continue
            row = ROW.match(line)
            if row and current:
                tables[current][row.group(1)] += int(row.group(2).replace(",", ""))
    return int(match.group(1)), tables


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--title", required=True)
    parser.add_argument("--intro", default="")
    parser.add_argument("--runs", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("steps", nargs="+", type=Path)
    args = parser.parse_args()
    runs: dict[int, tuple[str, str]] = {}
    if args.runs is not None:
        for line in args.runs.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) >= 5 and parts[0] == "seed":
                runs[int(parts[1])] = (parts[4], str(round(int(parts[3].rstrip("s")) / 60)))
    totals: dict[str, Counter] = {name: Counter() for name in SECTIONS.values()}
    rows = []
    for path in sorted(args.steps, key=lambda p: read_step(p)[0]):
        seed, tables = read_step(path)
        for name, table in tables.items():
            totals[name].update(table)
        m = tables["measures"]
        commit, minutes = runs.get(seed, ("", ""))
        rows.append(
            f"| {seed} | {m['maintained']} | {m['refused (as expected)']} | {m['random operations']} | "
            f"{m['view-vs-query comparisons']} | {m['failures']} | {commit} | {minutes} |"
        )
    m = totals["measures"]
    lines = [f"# {args.title}", ""]
    if args.intro:
        lines += [args.intro, ""]
    lines += ["| measure | value |", "|---|---|"]
    lines.append(f"| checks (the generated definitions of each step + its regression cases) | {m['definitions']:,} |")
    lines += [f"| {label} | {m[key]:,} |" for key, label in MEASURES.items()]
    for name, head in (("classes", "class (maintained)"), ("refusals", "refused construct")):
        lines += ["", f"| {head} | definitions |", "|---|---|"]
        lines += [f"| {key} | {value:,} |" for key, value in sorted(totals[name].items())]
    lines += ["", "| seed | maintained | refused | operations | comparisons | failures | commit | wall (min) |",
              "|---|---|---|---|---|---|---|---|", *rows]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(rows)} steps, {m['failures']} failures")


if __name__ == "__main__":
    main()
