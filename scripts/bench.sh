#!/usr/bin/env bash
# Sets up the plugin and runs the benchmark suite (benchmarks/bench.py): fast vs complete refresh
# of every view class on generated masters. Arguments go to bench.py, e.g.
#   bash scripts/bench.sh --scale 1000000 --changed 0.001
#   bash scripts/bench.sh --scale 1000000 --sweep fraction
#   bash scripts/bench.sh --scale 1000000 2000000 4000000 --sweep scale --changed-rows 1000
# Results go to benchmarks/results/. Not part of the test suite: run it by hand.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$repo/scripts/setup.sh")"
# The plots need matplotlib, which the plugin does not depend on.
if ! "$venv/bin/python" -c "import matplotlib" >/dev/null 2>&1; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check matplotlib
fi
cd "$repo"
exec "$venv/bin/python" benchmarks/bench.py "$@"
