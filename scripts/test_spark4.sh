#!/usr/bin/env bash
# The Spark 4 job (issue 39): a virtualenv of its own (.venv-spark4) with PySpark 4 (DBT_MV_PYSPARK,
# default 4.1.1; Iceberg's runtime for it is downloaded once from Maven Central into the cache), then
# the unit suite and a functional subset: every view class at once through generated definitions
# (the randomized harness at a reduced count: 10 definitions, one round of random DML followed by a
# fast refresh and a comparison with the defining query), the change logs with every other fault point,
# the build, rebuild and refresh methods, the staging of a view DELETE, the row-level purge of a log
# and views over a logged_merge incremental model, all with ANSI mode on (Spark 4's default; the
# Spark 3.5 suite runs with dbt-spark's default, off), and the ANSI views under both settings; and
# with Spark's generated code, as users run (the Spark 3.5 suite's embedded sessions evaluate
# interpreted: tests/functional/conftest.py, INTERPRETED).
# Extra arguments go to pytest.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export DBT_MV_VENV="${DBT_MV_SPARK4_VENV:-$repo/.venv-spark4}"
export DBT_MV_PYSPARK="${DBT_MV_PYSPARK:-4.1.1}"
venv="$(bash "$repo/scripts/setup.sh")"
cd "$repo"
"$venv/bin/python" -c 'import pyspark; print(f"Spark 4 job: PySpark {pyspark.__version__}")'
"$venv/bin/python" -m pytest -n "${DBT_MV_TEST_WORKERS:-2}" tests/unit "$@"
# the functional subset in two processes, as the Spark 3.5 suite (DBT_MV_TEST_WORKERS=0: in this one)
# (the refreshers in separate JVMs run in the Spark 3.5 suite and the catalog job: not again here)
DBT_MV_TEST_ANSI="${DBT_MV_TEST_ANSI:-true}" DBT_MV_TEST_CODEGEN="${DBT_MV_TEST_CODEGEN:-true}" \
DBT_MV_FUZZ_DEFINITIONS="${DBT_MV_SPARK4_DEFINITIONS:-10}" DBT_MV_FUZZ_ROUNDS=1 DBT_MV_CRASH_STRIDE=2 exec "$venv/bin/python" -m pytest -n "${DBT_MV_TEST_WORKERS:-2}" --dist loadgroup "$@" \
  --deselect tests/functional/test_change_logs.py::TestRefreshersInSeparateProcesses \
  tests/functional/test_generated_views.py \
  tests/functional/test_change_logs.py \
  tests/functional/test_fast_refresh_build.py \
  tests/functional/test_row_level_delete.py \
  tests/functional/test_log_purge.py \
  tests/functional/test_ansi_mode.py \
  tests/functional/test_stacked_refresh.py::TestThreeStackedViewsOverALoggedIncrementalModel
