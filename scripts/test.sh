#!/usr/bin/env bash
# Sets up the plugin and runs the whole test suite: unit tests (pure Python) and functional
# tests (dbt on the embedded Spark + Iceberg), in two processes (pytest-xdist; DBT_MV_TEST_WORKERS=0
# runs them in this one). Extra arguments go to pytest.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$repo/scripts/setup.sh")"
cd "$repo"
exec "$venv/bin/python" -m pytest -n "${DBT_MV_TEST_WORKERS:-2}" --dist loadgroup tests "$@"
