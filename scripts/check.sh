#!/usr/bin/env bash
# Static checks of the plugin's package (dbt_incremental_mv/), as a CI gate: the linter
# (ruff check), the formatter in check mode (ruff format --check: nothing is rewritten) and the
# type checker (mypy; its files and settings are pyproject.toml's [tool.mypy]). Ruff's settings are
# pyproject.toml's [tool.ruff]. All three run, each reporting one line with its time; the script
# fails when any of them did, after printing what the failing ones said.
# Python: $DBT_MV_VENV_PYTHON when set, else the virtual environment ${DBT_MV_VENV:-.venv}, which
# must exist (scripts/setup.sh creates it, with ruff and mypy from the dev extra). Not installed
# here, so that a CI job that set up the environment does not install it twice.
# mypy caches what it learned in .mypy_cache (MYPY_CACHE_DIR elsewhere): a first run takes
# ~30 s on 2 cores, later ones a few seconds.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

if [ -n "${DBT_MV_VENV_PYTHON:-}" ]; then
  python="$DBT_MV_VENV_PYTHON"
else
  venv="${DBT_MV_VENV:-$repo/.venv}"
  case "$venv" in /*) ;; *) venv="$repo/$venv" ;; esac
  python="$venv/bin/python"
  if [ ! -x "$python" ]; then
    echo "check.sh: no virtual environment at $venv (create it with scripts/setup.sh, or set DBT_MV_VENV_PYTHON)" >&2
    exit 2
  fi
fi

failed=()
output="$(mktemp)"
trap 'rm -f "$output"' EXIT

check() {  # check NAME COMMAND...: run it, print "NAME: ok|FAILED (N.N s)" and, if it failed, its output
  local name="$1"
  shift
  local start="$EPOCHREALTIME" status=0
  "$@" >"$output" 2>&1 || status=$?
  local seconds
  seconds="$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
  if [ "$status" -eq 0 ]; then
    echo "$name: ok (${seconds} s)"
  else
    echo "$name: FAILED, exit $status (${seconds} s)"
    sed 's/^/    /' "$output"
    failed+=("$name")
  fi
}

check "ruff check dbt_incremental_mv" "$python" -m ruff check --no-cache dbt_incremental_mv
check "ruff format --check dbt_incremental_mv" "$python" -m ruff format --check --no-cache dbt_incremental_mv
check "mypy" "$python" -m mypy

if [ "${#failed[@]}" -gt 0 ]; then
  echo "check.sh: ${#failed[@]} of 3 checks failed: ${failed[*]}" >&2
  exit 1
fi
echo "check.sh: 3 of 3 checks passed"
