#!/usr/bin/env bash
# The Spark 4 job: a virtualenv of its own (.venv-spark4) with PySpark 4 (DBT_MV_PYSPARK, default
# 4.1.1; Iceberg's runtime for it is downloaded once from Maven Central into the cache), ANSI mode on
# (Spark 4's default; the Spark 3.5 suite runs with dbt-spark's default, off) and Spark's generated
# code, as users run (the Spark 3.5 suite's embedded sessions evaluate interpreted).
#   DBT_MV_TEST_DEPTH=ci (default, the per-change CI): the unit tests of the runtime and the adapter
#     and one build, change, refresh and check of every view class (tests/functional/test_smoke.py).
#   DBT_MV_TEST_DEPTH=full (scripts/test_matrix.sh): also generated definitions of every class, the
#     change logs with every other fault point, builds, rebuilds and refresh methods, the staging of
#     a view DELETE, the row-level purge of a log, views over a logged_merge model, the ANSI views
#     under both settings and the values a refresh recomputes (decimal rounding, overflow).
# Extra arguments go to pytest; DBT_MV_JUNIT_DIR=<dir>: JUnit reports there (spark4-*.xml).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export DBT_MV_VENV="${DBT_MV_SPARK4_VENV:-$repo/.venv-spark4}"
export DBT_MV_PYSPARK="${DBT_MV_PYSPARK:-4.1.1}"
venv="$(bash "$repo/scripts/setup.sh")"
cd "$repo"
"$venv/bin/python" -c 'import pyspark; print(f"Spark 4 job: PySpark {pyspark.__version__}")'
junit() { [ -z "${DBT_MV_JUNIT_DIR:-}" ] || echo "--junitxml=$DBT_MV_JUNIT_DIR/spark4-$1.xml"; }
# the unit tests are pure Python: at CI depth only those of the code that depends on the installed
# PySpark and dbt-spark (the runtime, the adapter) run again here; the Spark 3.5 job runs them all
if [ "${DBT_MV_TEST_DEPTH:-ci}" = full ]; then units=(tests/unit); else units=(tests/unit/runtime tests/unit/adapter); fi
"$venv/bin/python" -m pytest -n "${DBT_MV_TEST_WORKERS:-2}" $(junit unit) "${units[@]}" "$@"
export DBT_MV_TEST_ANSI="${DBT_MV_TEST_ANSI:-true}" DBT_MV_TEST_CODEGEN="${DBT_MV_TEST_CODEGEN:-true}"
if [ "${DBT_MV_TEST_DEPTH:-ci}" != full ]; then
  exec "$venv/bin/python" -m pytest $(junit smoke) "$@" tests/functional/test_smoke.py
fi
# (the refreshers in separate JVMs run in the Spark 3.5 suite and the catalog job: not again here)
DBT_MV_FUZZ_DEFINITIONS="${DBT_MV_SPARK4_DEFINITIONS:-10}" DBT_MV_FUZZ_ROUNDS=1 DBT_MV_CRASH_STRIDE=2 \
  exec "$venv/bin/python" -m pytest -n "${DBT_MV_TEST_WORKERS:-2}" --dist loadgroup $(junit functional) "$@" \
  --deselect tests/functional/test_change_logs.py::TestRefreshersInSeparateProcesses \
  tests/functional/test_smoke.py \
  tests/functional/test_recomputed_types.py \
  tests/functional/test_generated_views.py \
  tests/functional/test_change_logs.py \
  tests/functional/test_fast_refresh_build.py \
  tests/functional/test_row_level_delete.py \
  tests/functional/test_log_purge.py \
  tests/functional/test_ansi_mode.py \
  tests/functional/test_stacked_refresh.py::TestThreeStackedViewsOverALoggedIncrementalModel
