#!/usr/bin/env bash
# Sets up the plugin and runs the example project on the embedded Spark + Iceberg:
# builds seeds, the seven fast_refresh views and their tests, changes some master rows,
# refreshes the views (the join view incrementally) and tests them again.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$repo/scripts/setup.sh")"
cd "$repo/integration_tests"
export DBT_PROFILES_DIR="$repo/integration_tests"
"$venv/bin/dbt" build --full-refresh
"$venv/bin/dbt" run-operation shop_changes
"$venv/bin/dbt" run
"$venv/bin/dbt" test
