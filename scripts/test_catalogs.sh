#!/usr/bin/env bash
# The catalog job: functional tests on the catalogs production runs, each started by the tests
# themselves (tests/functional/catalogs.py, docs/catalogs.md):
#   jdbc  Iceberg's JDBC catalog on PostgreSQL (Debian's postgresql package, initdb into a temporary
#         directory; PostgreSQL's JDBC driver downloaded once from Maven Central into the cache)
#   rest  Iceberg's REST catalog server (its test fixture, jars downloaded once from Maven Central)
#   hive  a Hive Metastore service (the standalone metastore in PySpark's jars, on Derby)
# What differs between catalogs is their commit, which refreshers in separate JVMs (one compare-
# and-swap winner, the other failing cleanly), the crash points and the held refreshes exercise.
#   DBT_MV_TEST_DEPTH=ci (default, the per-change CI): one catalog, drawn by the run seed (each
#     commit's CI its own: tests/depth.py), in one test process (one catalog service; with
#     DBT_MV_CATALOGS naming several, those at once): the tables found in that catalog, and a join view and a filter view
#     over one shared log built and refreshed by two refreshers in separate JVMs, a dbt process
#     held at the view's write while the test process publishes (the compare-and-swap check).
#     What differs between the view classes is their SQL, not their commit: every class runs in
#     the Spark 3.5 suite, the Spark 4 smoke and, on each catalog, the matrix.
#   DBT_MV_TEST_DEPTH=full (scripts/test_matrix.sh): generated definitions of every class (seed 82's
#     first 4 and the regression cases), change logs shared by two views, every eighth crash point,
#     refreshers in separate JVMs held and unheld, cost-based force, builds and rebuilds; two test
#     processes per catalog, each with its own service. DBT_MV_CRASH_STRIDE=1
#     DBT_MV_PAUSE_POINTS="insert into,delete from" DBT_MV_CATALOG_DEFINITIONS=8 run more of them.
# DBT_MV_CATALOGS picks the catalogs (default: at full depth "jdbc rest hive", at the CI's one drawn). Extra arguments go to pytest;
# DBT_MV_JUNIT_DIR=<dir>: JUnit reports there (catalog-<name>.xml).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$repo/scripts/setup.sh")"
cd "$repo"
if [ -n "${DBT_MV_CATALOGS:-}" ]; then
  catalogs="$DBT_MV_CATALOGS"
else
  # at the CI's depth one catalog, drawn by the run seed as the tests draw their samples
  # (tests/depth.py: from the commit id, so that each commit draws its own); at full depth all
  catalogs="$("$venv/bin/python" -c 'from tests.depth import sample; print(" ".join(sample(("jdbc", "rest", "hive"), 1, "catalog smoke")))')"
  echo "catalogs: $catalogs (DBT_MV_CATALOGS=\"jdbc rest hive\" runs every one)"
fi
case " $catalogs " in *" jdbc "*) bash "$repo/scripts/install_postgresql.sh" ;; esac
junit() { [ -z "${DBT_MV_JUNIT_DIR:-}" ] || echo "--junitxml=$DBT_MV_JUNIT_DIR/catalog-$1.xml"; }
if [ "${DBT_MV_TEST_DEPTH:-ci}" != full ]; then
  # the catalogs at once, each one test process (much of each is JVMs starting and waiting: the
  # catalog service, the dbt processes of the compare-and-swap check), their output in turn
  logs="$(mktemp -d)"
  pids=()
  for catalog in $catalogs; do
    DBT_MV_TEST_CATALOG="$catalog" DBT_MV_PAUSE_POINTS="delete from" DBT_MV_SEPARATE_PROCESS_ROUNDS=0 \
      "$venv/bin/python" -m pytest $(junit "$catalog") "$@" \
      tests/functional/test_change_logs.py::TestTheCatalog \
      tests/functional/test_change_logs.py::TestRefreshersInSeparateProcesses >"$logs/$catalog.log" 2>&1 &
    pids+=($!)
  done
  failed=0
  index=0
  for catalog in $catalogs; do
    status=0
    wait "${pids[$index]}" || status=$?
    index=$((index + 1))
    echo "catalog job: $catalog (exit $status)"
    cat "$logs/$catalog.log"
    [ "$status" -eq 0 ] || failed=1
  done
  rm -rf "$logs"
  exit "$failed"
fi
for catalog in $catalogs; do
  echo "catalog job: $catalog"
  if [ "$catalog" = jdbc ]; then
    force=TestForceRandomized lean=()
  else
    force=TestCostBasedForce lean=(--deselect tests/functional/test_change_logs.py::TestTwoViewsOnOneLog)
  fi
  DBT_MV_TEST_CATALOG="$catalog" DBT_MV_FUZZ_SEED="${DBT_MV_CATALOG_SEED:-82}" DBT_MV_FUZZ_DEFINITIONS="${DBT_MV_CATALOG_DEFINITIONS:-4}" DBT_MV_FUZZ_ROUNDS=1 \
  DBT_MV_CRASH_STRIDE="${DBT_MV_CRASH_STRIDE:-8}" DBT_MV_PAUSE_POINTS="${DBT_MV_PAUSE_POINTS:-delete from}" "$venv/bin/python" -m pytest -n "${DBT_MV_TEST_WORKERS:-2}" --dist loadgroup $(junit "$catalog") "$@" "${lean[@]}" \
    tests/functional/test_generated_views.py \
    tests/functional/test_change_logs.py \
    tests/functional/test_fast_refresh_build.py \
    "tests/functional/test_explain_and_history.py::$force"
done
