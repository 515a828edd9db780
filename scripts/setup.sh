#!/usr/bin/env bash
# Creates (or updates) the project's virtual environment and installs the plugin into it.
# Idempotent. Needs Python 3.11 and Java 17 (for Spark); nothing else is preinstalled.
# Usage: source scripts/setup.sh   (or run it; it prints the venv's path)
# The Spark line is PySpark 3.5 (offline: its Iceberg runtime is a PyPI package) unless
# DBT_MV_PYSPARK names another, e.g. DBT_MV_VENV=.venv-spark4 DBT_MV_PYSPARK=4.1.1 (its Iceberg
# runtime is downloaded once from Maven Central into the cache).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${DBT_MV_VENV:-$repo/.venv}"
case "$venv" in /*) ;; *) venv="$PWD/$venv" ;; esac  # callers cd elsewhere (demo.sh): an absolute path
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3

"$python" - <<'PY' || { echo "dbt-incremental-mv needs Python 3.11 (set PYTHON=/path/to/python3.11)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)
PY
if ! java -version >/dev/null 2>&1; then
  echo "dbt-incremental-mv runs Spark in-process and needs Java 17 on PATH (e.g. apt-get install openjdk-17-jre-headless)" >&2
  exit 1
fi

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
pyspark="${DBT_MV_PYSPARK:-}"
case "$pyspark" in
  "") requirement="pyspark>=3.5.1,<3.6" ;;
  *[\<\>=~!]*) requirement="pyspark$pyspark" ;;
  *) requirement="pyspark==$pyspark" ;;
esac
# uv installs what pip would (the same versions), about twice as fast from a cold cache (PySpark
# is a source distribution: built once, then cached in ~/.cache/uv). Compiled to bytecode at
# install, as pip does: with PYTHONDONTWRITEBYTECODE set (as on this project's machines) every
# Python process would otherwise compile dbt, sqlglot and PySpark from source at each start.
[ -x "$venv/bin/uv" ] || "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv>=0.9,<1"
uv_install() { "$venv/bin/uv" pip install --quiet --compile-bytecode --python "$venv/bin/python" "$@"; }
uv_install "$repo[dev]" "$requirement"
# an installed copy of the same version is kept: always install the checkout's code.
uv_install --no-deps --reinstall "$repo"
# Prepare the Iceberg runtime once (cached), so the first dbt command starts quickly.
"$venv/bin/dbt-incremental-mv" prepare-jars >/dev/null
# Build the JVM's class-data-sharing archive once per virtualenv (cached; ~50 s the first time):
# every dbt command's Spark then starts ~2.5 s sooner. Not fatal: without it the JVM starts as
# before (and the first Spark session starts building it in the background).
"$venv/bin/dbt-incremental-mv" jvm-archive >/dev/null 2>&1 || true
echo "$venv"
