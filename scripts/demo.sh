#!/usr/bin/env bash
# Sets up the plugin and runs the example project (examples/shop_pipeline) on the embedded Spark +
# Iceberg, end to end: the ingestion loads the raw tables, `dbt build` builds the staging model and
# five marts (one of each view class) with their tests, explain_fast_refresh shows what a refresh
# of one mart will do, the ingestion changes rows, mv_status shows the marts stale, `dbt build`
# refreshes them incrementally and tests them, and mv_status gates on them being fresh.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$repo/scripts/setup.sh")"
cd "$repo/examples/shop_pipeline"
export DBT_PROFILES_DIR="$PWD"
dbt() { "$venv/bin/dbt" "$@"; }
dbt run-operation ingest --args '{batch: 1}'
dbt build --full-refresh
dbt run-operation explain_fast_refresh --args '{model: revenue_by_country}'
dbt run-operation ingest --args '{batch: 2}'
dbt run-operation mv_status
dbt build
dbt run-operation mv_status --args '{fail_on: [stale, needs_rebuild, unusable]}'
