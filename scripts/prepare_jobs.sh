#!/usr/bin/env bash
# Prepares what the Spark 4 job and the catalog job need and do not share with the Spark 3.5
# suite: the Spark 4 virtualenv (PySpark 4, Iceberg's runtime for it, its class archive),
# PostgreSQL (Debian's package) and the catalogs' jars from Maven Central (PostgreSQL's JDBC driver,
# Iceberg's REST catalog fixture). Mostly downloads: .ci/run runs it beside the Spark 3.5 suite.
# Idempotent; everything lands in the project's venvs and the cache (~/.cache/dbt-incremental-mv).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
venv="$(DBT_MV_VENV="${DBT_MV_SPARK4_VENV:-$repo/.venv-spark4}" DBT_MV_PYSPARK="${DBT_MV_PYSPARK:-4.1.1}" bash scripts/setup.sh)"
bash scripts/install_postgresql.sh
"$venv/bin/python" -c 'from tests.functional.catalogs import postgresql_driver, rest_fixture_classpath
postgresql_driver(); rest_fixture_classpath()'
