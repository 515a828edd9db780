#!/usr/bin/env bash
# Sets up the plugin and runs the test suite at the per-change CI's depth (tests/depth.py;
# DBT_MV_TEST_DEPTH=full runs every test, as scripts/test_matrix.sh does): the unit tests (pure
# Python) and the functional tests (dbt on the embedded Spark + Iceberg), in two processes
# (pytest-xdist; DBT_MV_TEST_WORKERS=0 runs them in this one). Extra arguments go to pytest; test
# paths among them (tests/...) replace the whole suite.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$repo/scripts/setup.sh")"
cd "$repo"
paths=(tests)
for argument in "$@"; do
  case "$argument" in tests|tests/*) paths=() ;; esac
done
exec "$venv/bin/python" -m pytest -n "${DBT_MV_TEST_WORKERS:-2}" --dist loadgroup "${paths[@]}" "$@"
