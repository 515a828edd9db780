#!/usr/bin/env bash
# The whole matrix, run on purpose (before resolving an issue that changes the platform layers:
# runtime/, metadata/, the adapter's connections and sessions, catalog handling, JVM calls): every
# test at full depth (DBT_MV_TEST_DEPTH=full) on Spark 3.5 (the Thrift Server tests included), the
# Spark 4 job and the catalog job (JDBC, REST, Hive Metastore), one after the other. About two and
# a half hours on 2 cores. Each job's output goes to reports/matrix/<job>.log; the end prints one
# line per job (pass or fail, minutes) and the row for the table in docs/correctness.md.
#   bash scripts/test_matrix.sh                    every job
#   bash scripts/test_matrix.sh spark4 catalogs    the named jobs (spark35, spark4, catalogs)
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
out="$repo/reports/matrix"
mkdir -p "$out"
export DBT_MV_TEST_DEPTH=full
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
summary=()
overall=0
selected=("${@:-spark35 spark4 catalogs}")
selected=(${selected[*]})
for name in "${selected[@]}"; do
  case "$name" in spark35|spark4|catalogs) ;; *) echo "no job $name (spark35, spark4, catalogs)" >&2; exit 2 ;; esac
done
job() {  # job <name> <command...>: run when selected
  local name="$1" started=$SECONDS status
  shift
  [[ " ${selected[*]} " == *" $name "* ]] || return 0
  echo "== $name ($(date -u +%H:%M) UTC)"
  "$@" >"$out/$name.log" 2>&1
  status=$?
  local minutes=$(( (SECONDS - started + 30) / 60 ))
  local result=pass
  [ "$status" -eq 0 ] || { result="FAIL (exit $status, $out/$name.log)"; overall=1; }
  summary+=("$name: $result, $minutes min: $(grep -aE '[0-9]+ (passed|failed|errors?)\b.* in [0-9.]+s' "$out/$name.log" | tail -1 | tr -d '=' | xargs)")
  echo "${summary[-1]}"
}
job spark35 bash scripts/test.sh -q -p no:cacheprovider --junitxml="$out/spark35.xml"
export DBT_MV_JUNIT_DIR="$out"
job spark4 bash scripts/test_spark4.sh -q -p no:cacheprovider
job catalogs bash scripts/test_catalogs.sh -q -p no:cacheprovider
echo
echo "matrix at $commit, $(date -u +%Y-%m-%d), full depth, jobs: ${selected[*]}:"
printf '  %s\n' "${summary[@]}"
.venv/bin/python scripts/durations.py "$out"/*.xml
exit "$overall"
