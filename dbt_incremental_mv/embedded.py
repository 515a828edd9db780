"""The embedded default: a local Spark session with a local Iceberg warehouse.

``method: session`` profiles get a Spark session created by the plugin before dbt-spark
asks for one, so settings read only at JVM start (jars, extensions, catalog, logging)
take effect. The warehouse is an Iceberg Hadoop catalog in a local directory; nothing
else is written to the working directory (no ``metastore_db``, ``derby.log`` or
``spark-warehouse``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dbt_incremental_mv import jvm_archive
from dbt_incremental_mv.iceberg_runtime import ICEBERG_PACKAGE, IcebergJars, prepare_offline_jars

DEFAULT_WAREHOUSE = "warehouse"
ICEBERG_JARS_MODES = ("auto", "bundled", "packages", "none")
"""How the embedded session gets Iceberg: ``auto`` uses the jars named in
server_side_parameters if any, else the bundled offline runtime; ``bundled`` always the
offline runtime; ``packages`` lets Spark download it from Maven (needs network); ``none``
leaves it to the user (a cluster image that ships Iceberg)."""

LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def resolve_warehouse(warehouse: str | None) -> Path:
    """The warehouse directory; relative paths are relative to where dbt runs."""
    return Path(os.path.expanduser(warehouse or DEFAULT_WAREHOUSE)).resolve()


def _user_sets_jars(params: Mapping[str, str]) -> bool:
    return any(key in params for key in ("spark.jars", "spark.jars.packages"))


def session_settings(
    *,
    warehouse: Path,
    user_params: Mapping[str, str],
    iceberg_jars: str,
    jars: IcebergJars | None,
) -> dict[str, str]:
    """Spark settings of the embedded session; the user's server_side_parameters win."""
    settings: dict[str, str] = {
        "spark.master": "local[*]",
        "spark.app.name": "dbt-incremental-mv",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "2g",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        # No Hive metastore: the Iceberg Hadoop catalog keeps everything in the warehouse.
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.warehouse.dir": str(warehouse),
        "spark.sql.catalog.spark_catalog": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.spark_catalog.type": "hadoop",
        "spark.sql.catalog.spark_catalog.warehouse": str(warehouse),
        # Read the latest committed metadata on every query: other processes write too.
        "spark.sql.catalog.spark_catalog.cache-enabled": "false",
    }
    if iceberg_jars == "packages" or (iceberg_jars == "auto" and jars is None and not _user_sets_jars(user_params)):
        settings["spark.jars.packages"] = ICEBERG_PACKAGE
    elif jars is not None:
        settings["spark.jars"] = ",".join(jars.classpath)
    settings.update(user_params)
    java_options = settings.get("spark.driver.extraJavaOptions", "")
    if "log4j2.configurationFile" not in java_options:
        settings["spark.driver.extraJavaOptions"] = (
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()} {java_options}".strip()
        )
    return settings


def jars_for(iceberg_jars: str, user_params: Mapping[str, str]) -> IcebergJars | None:
    """The offline jars to add, or None when Spark gets Iceberg some other way."""
    if iceberg_jars == "bundled" or (iceberg_jars == "auto" and not _user_sets_jars(user_params)):
        return prepare_offline_jars()
    return None


def start_session(*, warehouse: str | None, iceberg_jars: str, user_params: Mapping[str, str]):
    """Create (once per process) the embedded Spark session and return it."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    path = resolve_warehouse(warehouse)
    # The Hadoop catalog fails on `show databases` if its warehouse does not exist yet.
    path.mkdir(parents=True, exist_ok=True)
    settings = session_settings(
        warehouse=path, user_params=user_params, iceberg_jars=iceberg_jars, jars=jars_for(iceberg_jars, user_params)
    )
    settings = jvm_archive.session_options(settings)  # the JVM's classes mapped from an archive (see jvm_archive.py)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
