"""The slowest tests of a CI run, over every job's JUnit report: ``python scripts/durations.py
reports/*.xml`` prints the 25 slowest (a slow test is seen the day it arrives) and each job's total."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

MOST = 25


def main(paths: list[str]) -> None:
    cases: list[tuple[float, str, str]] = []
    for path in paths:
        job = Path(path).stem
        root = ElementTree.parse(path).getroot()
        suites = [root] if root.tag == "testsuite" else list(root)
        total = sum(float(s.get("time", 0)) for s in suites)
        tests = sum(int(s.get("tests", 0)) for s in suites)
        print(f"{job}: {tests} tests, {total:.0f} s of test time")
        for case in root.iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            cases.append((float(case.get("time", 0)), job, name))
    print(f"\nthe {MOST} slowest tests (seconds, job, test):")
    for seconds, job, name in sorted(cases, reverse=True)[:MOST]:
        print(f"{seconds:8.1f}  {job:9}  {name}")


if __name__ == "__main__":
    main(sys.argv[1:])
