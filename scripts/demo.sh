#!/usr/bin/env bash
# Sets up the plugin and builds the example project on the embedded Spark + Iceberg:
# seeds, the four fast_refresh views and their tests, then a second run (the refresh).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$repo/scripts/setup.sh")"
cd "$repo/integration_tests"
export DBT_PROFILES_DIR="$repo/integration_tests"
"$venv/bin/dbt" build
"$venv/bin/dbt" run
