#!/usr/bin/env bash
# The soak (issue 37): every view class's randomized differential test (join, outer join,
# aggregate, aggregate over outer joins, HAVING, UNION ALL, views over views) with FACTOR times
# the rounds and FACTOR times larger batched rounds (about FACTOR^2 times the operations; the
# same seeds, reproducible), each refresh followed by a comparison of every view with its query.
# Writes a summary (operations, comparisons, tests, wall time, machine) to --out.
#   bash scripts/soak.sh [--factor 5] [--out tests/results/soak.md]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
factor=5 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --factor) factor="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
out="${out:-$repo/tests/results/soak.md}"
mkdir -p "$(dirname "$out")"
venv="$(bash "$repo/scripts/setup.sh")"
cd "$repo"
log="$(mktemp)"
started=$(date +%s) commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- dbt_incremental_mv tests || echo ' + uncommitted changes')"
status=0
DBT_MV_SOAK="$factor" "$venv/bin/python" -m pytest -p no:cacheprovider -rA -k test_randomized_workload \
  tests/functional/test_join_refresh.py tests/functional/test_outer_join_refresh.py \
  tests/functional/test_aggregate_refresh.py tests/functional/test_outer_aggregate_refresh.py \
  tests/functional/test_having_refresh.py tests/functional/test_union_all_refresh.py \
  tests/functional/test_stacked_refresh.py 2>&1 | tee "$log" || status=$?
seconds=$(( $(date +%s) - started ))
{
  echo "# Soak: every view class's randomized differential test, soak factor $factor"
  echo
  echo "Run $(date -u +%Y-%m-%d) on commit $commit, $(nproc) cores, load before the run: $(cut -d' ' -f1-3 /proc/loadavg);"
  echo "command: \`bash scripts/soak.sh --factor $factor\`; wall time $((seconds / 60)) min $((seconds % 60)) s; exit status $status."
  echo
  echo '```'
  grep -E "^differential testing:" "$log" || echo "differential testing: no summary line (see the failures)"
  grep -E "^(PASSED|FAILED|ERROR) " "$log" | sed 's/ - .*//' || true
  tail -n 1 "$log"
  echo '```'
} > "$out"
rm -f "$log"
echo "summary: $out"
exit "$status"
