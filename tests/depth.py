"""How deep a test run goes, and the seed it draws from: the per-change CI's depth (``ci``, the
default) or everything (``full``: scripts/test_matrix.sh), set by ``DBT_MV_TEST_DEPTH``.

At the CI's depth a test that samples (the generated definitions, the crash points, the killed
refreshes) draws its sample from the run's seed, which derives from the commit being tested
(``git rev-parse HEAD``), so that each commit's CI covers cases no earlier one did and a failure
is reproduced by the same commit, or by ``DBT_MV_TEST_SEED``. The conftest prints the seed and the
commands that reproduce a run at the top of pytest's output (tests/conftest.py).
"""

from __future__ import annotations

import functools
import os
import random
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXED_SEED = 37  # without git (an sdist) and without DBT_MV_TEST_SEED


def depth() -> str:
    value = os.environ.get("DBT_MV_TEST_DEPTH", "ci").strip().lower() or "ci"
    if value not in ("ci", "full"):
        raise ValueError(f"DBT_MV_TEST_DEPTH must be ci or full, not {value!r}")
    return value


def full() -> bool:
    return depth() == "full"


@functools.cache
def commit() -> str | None:
    """The commit being tested (None outside a git checkout)."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


@functools.cache
def run_seed() -> int:
    """``DBT_MV_TEST_SEED``, else a number from the commit id (0 to 999,999), else FIXED_SEED."""
    given = os.environ.get("DBT_MV_TEST_SEED", "").strip()
    if given:
        return int(given)
    found = commit()
    return int(found[:12], 16) % 1_000_000 if found else FIXED_SEED


def sample(items: Sequence, count: int, salt: str) -> list:
    """``count`` of ``items`` (in their order) drawn by the run's seed (all of them at full depth);
    ``salt`` names the draw, so that two tests do not draw the same positions."""
    if full() or count >= len(items):
        return list(items)
    chosen = set(random.Random(f"{run_seed()}:{salt}").sample(range(len(items)), count))
    return [item for index, item in enumerate(items) if index in chosen]


def views(defined: Mapping[str, str], count: int, salt: str, always: Sequence[str] = ()) -> dict[str, str]:
    """Of a test's views (name -> SQL), those ``always`` names (its assertions read them) and
    ``count`` of the others drawn by the run's seed, in their order; all of them at full depth."""
    others = sample([name for name in defined if name not in always], count, salt)
    return {name: sql for name, sql in defined.items() if name in always or name in others}


def fault_points(limit: int, stride: int, salt: str) -> range:
    """The statements after which a crash test injects its fault: every one up to ``limit`` at full
    depth; at the CI's, every ``stride``-th, from an offset the run's seed draws (each CI run
    covers other points; ``DBT_MV_CRASH_STRIDE`` sets the stride of either)."""
    stride = int(os.environ.get("DBT_MV_CRASH_STRIDE") or (1 if full() else stride))
    offset = random.Random(f"{run_seed()}:{salt}").randrange(stride) if stride > 1 else 0
    return range(1 + offset, limit, stride)
