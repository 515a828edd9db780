"""The embedded default: a local Spark session with a local Iceberg warehouse.

``method: session`` profiles get a Spark session created by the plugin before dbt-spark
asks for one, so settings read only at JVM start (jars, extensions, catalog, logging)
take effect. The warehouse is an Iceberg Hadoop catalog in a local directory; nothing
else is written to the working directory (no ``metastore_db``, ``derby.log`` or
``spark-warehouse``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path, PureWindowsPath

from dbt_incremental_mv.runtime import jvm_archive, local_fs
from dbt_incremental_mv.runtime.iceberg_runtime import (
    IcebergJars,
    SparkLine,
    installed_spark,
    prepare_offline_jars,
    runtime_jars,
    uses_http_client,
)

DEFAULT_WAREHOUSE = "warehouse"
ICEBERG_JARS_MODES = ("auto", "bundled", "packages", "none")
"""How the embedded session gets Iceberg: ``auto`` uses the Iceberg runtime named in
server_side_parameters (``spark.jars`` or ``spark.jars.packages``) if any, else adds the runtime for the
installed Spark to the user's jars (runtime/iceberg_runtime.py: the bundled offline one on Spark 3.5,
Maven Central's downloaded once into the cache on Spark 4 or for a REST catalog) - a catalog's own jar
(a JDBC driver) does not replace it;
``bundled`` always the offline runtime (Spark 3.5 only); ``packages`` lets Spark's own resolver
download it from Maven (needs network); ``none`` leaves it to the user (a cluster image that ships
Iceberg)."""

LOG4J_CONFIG = Path(__file__).parents[1] / "log4j2.properties"

JIT_MODES = ("auto", "quick", "peak")
"""How the embedded session's JVM compiles Spark's code. ``peak``: the JVM's default (tiered
compilation up to the optimizing C2 compiler), the fastest for heavy statements once warm.
``quick``: the fast C1 compiler only (``-XX:TieredStopAtLevel=1``): no profiling and no C2
compiles competing with the refresh for the cores, so a short ``dbt`` command on small tables
finishes far sooner, while a statement over millions of rows runs 2-2.7x slower. ``auto``:
``quick`` for a ``dbt`` command-line process (one command, then the JVM ends) whose local warehouse
holds less than ``QUICK_JIT_MAX_BYTES`` of files, else ``peak``: a process that runs dbt through its
Python API (a test suite, an orchestrator) keeps the JVM for many commands, long enough for C2
to pay off. Measured (2 cores, benchmarks/JOURNAL.md, "The compiler of a short JVM"): the example project's small refresh
(``dbt run``) 28.6 -> 22.2 s with ``quick`` (alternated runs); at 10M orders the complete refreshes
2.2-2.7x slower."""
QUICK_JIT = "-XX:TieredStopAtLevel=1"
QUICK_JIT_MAX_BYTES = 64 * 1024 * 1024
# a user who chose any of these manages the JIT: leave it alone
USER_JIT_CHOICES = ("TieredStopAtLevel", "TieredCompilation", "-Xint", "-Xcomp", "CompileThreshold")


# What Spark keeps of past statements (their plans, jobs, stages and tasks), UI or not: a
# long-lived process (a test suite, an orchestrator, a Thrift Server) would hold thousands of
# large plans. A refresh reads back only its own statements' (adapter/scan_metrics.py: from the
# plan's nodes, not its text). A plan's text is written for the status store at the start of a
# statement and again at every adaptive re-plan, UI or not; a refresh statement that reads cached
# views (a MIN/MAX aggregate over four masters) printed each cached plan inside every reference
# to it: 27 MB of text per statement, 4 of its 12 seconds. Capped, and the physical plan only.
STATUS_RETENTION = {
    "spark.sql.ui.explainMode": "simple",
    "spark.sql.maxPlanStringLength": "200000",
    "spark.sql.ui.retainedExecutions": "100",
    "spark.ui.retainedJobs": "200",
    "spark.ui.retainedStages": "200",
    "spark.ui.retainedTasks": "20000",
}


def resolve_warehouse(warehouse: str | None) -> Path:
    """The warehouse directory; relative paths are relative to where dbt runs."""
    return Path(os.path.expanduser(warehouse or DEFAULT_WAREHOUSE)).resolve()


def warehouse_smaller_than(path: Path, limit: int) -> bool:
    """Whether the files under ``path`` add up to less than ``limit`` bytes (the walk stops at the limit)."""
    total = 0
    pending = [path]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:  # missing or unreadable: nothing counted from it
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
            if total >= limit:
                return False
    return True


def quick_jit(jit: str, warehouse: Path, user_params: Mapping[str, str]) -> bool:
    """Whether the session's JVM runs the C1 compiler only (see ``JIT_MODES``)."""
    if any(choice in user_params.get("spark.driver.extraJavaOptions", "") for choice in USER_JIT_CHOICES):
        return False
    if jit == "auto":
        return one_command_process() and warehouse_smaller_than(warehouse, QUICK_JIT_MAX_BYTES)
    return jit == "quick"


def one_command_process() -> bool:
    """Whether this process is the ``dbt`` command line (its JVM lives for one command)."""
    # PureWindowsPath splits on both separators: dbt.exe on Windows, dbt elsewhere
    return bool(sys.argv) and PureWindowsPath(sys.argv[0]).stem.lower() == "dbt"


def _user_supplies_iceberg(params: Mapping[str, str]) -> bool:
    """Whether the user's jars or packages name an Iceberg Spark runtime."""
    return any("iceberg-spark-runtime" in params.get(key, "") for key in ("spark.jars", "spark.jars.packages"))


def session_settings(
    *,
    warehouse: Path,
    user_params: Mapping[str, str],
    iceberg_jars: str,
    jars: IcebergJars | None,
    c1_only: bool = False,
    file_system_jar: Path | None = None,
    spark: SparkLine | None = None,
) -> dict[str, str]:
    """Spark settings of the embedded session; the user's server_side_parameters win.
    ``file_system_jar``: the jar of the plugin's ``file:`` file system (runtime/local_fs.py), if any;
    ``spark``: the Spark line whose Iceberg package Spark resolves (default: the installed PySpark's)."""
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
        **STATUS_RETENTION,
    }
    settings.update(user_params)
    if iceberg_jars == "packages" or (
        iceberg_jars == "auto" and jars is None and not _user_supplies_iceberg(user_params)
    ):
        settings["spark.jars.packages"] = ",".join(
            filter(None, [(spark or installed_spark()).package, user_params.get("spark.jars.packages")])
        )
    elif jars is not None:  # the Iceberg runtime first, then the user's own jars (a catalog's driver)
        settings["spark.jars"] = ",".join(filter(None, [*jars.classpath, user_params.get("spark.jars")]))
    settings = local_fs.with_local_file_system(
        settings, file_system_jar
    )  # no chmod process per file written (runtime/local_fs.py)
    java_options = settings.get("spark.driver.extraJavaOptions", "")
    if c1_only:
        java_options = f"{QUICK_JIT} {java_options}".strip()
    if "log4j2.configurationFile" not in java_options:
        java_options = f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()} {java_options}".strip()
    if java_options:
        settings["spark.driver.extraJavaOptions"] = java_options
    return settings


def jars_for(iceberg_jars: str, user_params: Mapping[str, str], spark: SparkLine | None = None) -> IcebergJars | None:
    """The Iceberg jars to add as files, or None when Spark gets Iceberg some other way."""
    if iceberg_jars == "bundled":
        return prepare_offline_jars(spark, http_client=uses_http_client(user_params))
    if iceberg_jars == "auto" and not _user_supplies_iceberg(user_params):
        return runtime_jars(spark, http_client=uses_http_client(user_params))
    return None


def profile_settings(
    *, warehouse: Path, user_params: Mapping[str, str], iceberg_jars: str = "auto", jit: str = "auto"
) -> dict[str, str]:
    """The embedded session's settings for a profile's options (the class archive not yet mapped):
    the installed Spark's Iceberg jars and the plugin's file system jar prepared in the cache."""
    spark = installed_spark()
    return session_settings(
        warehouse=warehouse,
        user_params=user_params,
        iceberg_jars=iceberg_jars,
        jars=jars_for(iceberg_jars, user_params, spark),
        c1_only=quick_jit(jit, warehouse, user_params),
        file_system_jar=local_fs.cached_jar(),
        spark=spark,
    )


def start_session(*, warehouse: str | None, iceberg_jars: str, user_params: Mapping[str, str], jit: str = "auto"):
    """Create (once per process) the embedded Spark session and return it."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    path = resolve_warehouse(warehouse)
    # The Hadoop catalog fails on `show databases` if its warehouse does not exist yet.
    path.mkdir(parents=True, exist_ok=True)
    settings = profile_settings(warehouse=path, user_params=user_params, iceberg_jars=iceberg_jars, jit=jit)
    settings = jvm_archive.session_options(
        settings
    )  # the JVM's classes mapped from an archive (see runtime/jvm_archive.py)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
