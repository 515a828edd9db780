"""The ``spark_mv`` dbt adapter plugin: dbt-spark plus the fast_refresh materialization."""

from pathlib import Path

from dbt.adapters.base import AdapterPlugin

from dbt_incremental_mv.adapter.connections import SparkMVConnectionManager, SparkMVCredentials  # noqa: F401
from dbt_incremental_mv.adapter.impl import SparkMVAdapter

INCLUDE_PATH = str(Path(__file__).resolve().parent.parent / "include")

Plugin = AdapterPlugin(
    adapter=SparkMVAdapter,  # type: ignore[arg-type]
    credentials=SparkMVCredentials,
    include_path=INCLUDE_PATH,
    dependencies=["spark"],
    project_name="dbt_spark_mv",
)
