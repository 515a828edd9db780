#!/usr/bin/env bash
# Generated view definitions by hand (issue 37): each is refused naming the construct, or built
# and maintained exactly through rounds of random DML and fast refreshes. Writes a summary table
# (definitions by class, refused by construct, rounds, operations, failures) to --out; each
# failing definition is shrunk and kept in tests/fuzz/regressions.json, which the suite runs.
#   bash scripts/fuzz.sh --definitions 2000 --seed 5 [--rounds 4] [--out tests/results/fuzz_2000_seed5.md]
#   [--feature NAME: only the definitions with that feature (tests/fuzz/generator.py), no regression cases]
#   [--indexed: only the join views an indexed join state can keep, with indexed_state=true]
# The CI runs the same check on a fixed seed (tests/functional/test_generated_views.py).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
definitions=2000 seed=1 rounds=4 out="" feature="" indexed=0
while [ $# -gt 0 ]; do
  case "$1" in
    --definitions) definitions="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --feature) feature="$2"; shift 2 ;;
    --indexed) indexed=1; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
out="${out:-$repo/tests/results/fuzz_${definitions}_seed${seed}.md}"
mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"  # (the test writes it from the dbt project's directory)
venv="$(bash "$repo/scripts/setup.sh")"
cd "$repo"
DBT_MV_FUZZ_DEFINITIONS="$definitions" DBT_MV_FUZZ_SEED="$seed" DBT_MV_FUZZ_ROUNDS="$rounds" DBT_MV_FUZZ_SUMMARY="$out" DBT_MV_FUZZ_SHRINK=1 DBT_MV_FUZZ_FEATURE="$feature" DBT_MV_FUZZ_INDEXED="$indexed" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/functional/test_generated_views.py
echo "summary: $out"
