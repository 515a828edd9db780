#!/usr/bin/env bash
# The catalog job (issue 39): a functional subset on the catalogs production runs, each started by
# the tests themselves (tests/functional/catalogs.py, docs/catalogs.md):
#   jdbc  Iceberg's JDBC catalog on PostgreSQL (Debian's postgresql package, initdb into a temporary
#         directory; PostgreSQL's JDBC driver downloaded once from Maven Central into the cache)
#   rest  Iceberg's REST catalog server (its test fixture, jars downloaded once from Maven Central)
#   hive  a Hive Metastore service (the standalone metastore in PySpark's jars, on Derby)
# On each: every view class through generated definitions (the randomized harness at a reduced
# count), change logs shared by two views, crash points, refreshers in separate JVMs (one compare-
# and-swap winner), cost-based force, builds and rebuilds, and that the tables live in that catalog.
# The generated definitions are seed 82's (its first 4 and the regression cases hold every view
# class), every eighth crash point, one held refresh; JDBC adds two views on one log and randomized
# force: what differs between catalogs is their commit, which the separate JVMs, the crash points
# and the held refreshes exercise (every crash point and both held refreshes run on the Hadoop
# catalog in the Spark 3.5 suite; DBT_MV_CRASH_STRIDE=1 DBT_MV_PAUSE_POINTS="insert into,delete from"
# DBT_MV_CATALOG_DEFINITIONS=8 runs them here). The whole job runs within the CI's time limit beside
# the Spark 3.5 suite and the Spark 4 job (docs/correctness.md, "What CI runs").
# Each catalog's tests run in two processes (pytest-xdist), each with its own catalog service
# (DBT_MV_TEST_WORKERS=0: one process). DBT_MV_CATALOGS picks the catalogs (default "jdbc rest
# hive"). Extra arguments go to pytest.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
catalogs="${DBT_MV_CATALOGS:-jdbc rest hive}"
case " $catalogs " in *" jdbc "*) bash "$repo/scripts/install_postgresql.sh" ;; esac
venv="$(bash "$repo/scripts/setup.sh")"
cd "$repo"
for catalog in $catalogs; do
  echo "catalog job: $catalog"
  if [ "$catalog" = jdbc ]; then
    force=TestForceRandomized lean=()
  else
    force=TestCostBasedForce lean=(--deselect tests/functional/test_change_logs.py::TestTwoViewsOnOneLog)
  fi
  DBT_MV_TEST_CATALOG="$catalog" DBT_MV_FUZZ_SEED="${DBT_MV_CATALOG_SEED:-82}" DBT_MV_FUZZ_DEFINITIONS="${DBT_MV_CATALOG_DEFINITIONS:-4}" DBT_MV_FUZZ_ROUNDS=1 \
  DBT_MV_CRASH_STRIDE="${DBT_MV_CRASH_STRIDE:-8}" DBT_MV_PAUSE_POINTS="${DBT_MV_PAUSE_POINTS:-delete from}" "$venv/bin/python" -m pytest -n "${DBT_MV_TEST_WORKERS:-2}" --dist loadgroup "$@" "${lean[@]}" \
    tests/functional/test_generated_views.py \
    tests/functional/test_change_logs.py \
    tests/functional/test_fast_refresh_build.py \
    "tests/functional/test_explain_and_history.py::$force"
done
