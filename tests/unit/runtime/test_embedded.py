import sys
from pathlib import Path

import pytest

from dbt_incremental_mv.runtime import embedded
from dbt_incremental_mv.runtime.embedded import (
    LOG4J_CONFIG,
    QUICK_JIT,
    QUICK_JIT_MAX_BYTES,
    quick_jit,
    resolve_warehouse,
    session_settings,
    warehouse_smaller_than,
)
from dbt_incremental_mv.runtime.iceberg_runtime import IcebergJars, SparkLine

JARS = IcebergJars(runtime=Path("/j/runtime.jar"), relocated_jackson=Path("/j/jackson.jar"))
WAREHOUSE = Path("/data/wh")


def settings(user_params=None, iceberg_jars="auto", jars=JARS):
    return session_settings(warehouse=WAREHOUSE, user_params=user_params or {}, iceberg_jars=iceberg_jars, jars=jars)


def test_defaults_make_an_iceberg_hadoop_catalog_in_the_warehouse():
    s = settings()
    assert s["spark.sql.catalog.spark_catalog"] == "org.apache.iceberg.spark.SparkCatalog"
    assert s["spark.sql.catalog.spark_catalog.type"] == "hadoop"
    assert s["spark.sql.catalog.spark_catalog.warehouse"] == str(WAREHOUSE)
    assert s["spark.sql.extensions"].endswith("IcebergSparkSessionExtensions")
    assert s["spark.jars"] == "/j/runtime.jar,/j/jackson.jar"
    assert "spark.jars.packages" not in s


def test_no_litter_in_the_working_directory():
    s = settings()
    assert s["spark.sql.catalogImplementation"] == "in-memory"  # no metastore_db, no derby.log
    assert s["spark.sql.warehouse.dir"] == str(WAREHOUSE)  # no ./spark-warehouse
    assert s["spark.ui.showConsoleProgress"] == "false"
    assert f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}" in s["spark.driver.extraJavaOptions"]
    assert LOG4J_CONFIG.is_file()


def test_user_parameters_win():
    s = settings({"spark.master": "local[1]", "spark.sql.shuffle.partitions": "2"})
    assert s["spark.master"] == "local[1]"
    assert s["spark.sql.shuffle.partitions"] == "2"


def test_user_java_options_keep_quiet_logging():
    s = settings({"spark.driver.extraJavaOptions": "-Xss4m"})
    assert s["spark.driver.extraJavaOptions"].endswith(" -Xss4m")
    assert "log4j2.configurationFile" in s["spark.driver.extraJavaOptions"]
    own = settings({"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=file:/mine"})
    assert own["spark.driver.extraJavaOptions"] == "-Dlog4j2.configurationFile=file:/mine"


@pytest.mark.parametrize(
    "spark, package",
    [
        (SparkLine("3.5.9", "2.12"), "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"),
        (SparkLine("4.0.2", "2.13"), "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.2"),
        (SparkLine("4.1.1", "2.13"), "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.11.0"),
    ],
)
def test_packages_mode_downloads_the_runtime_of_the_running_spark_from_maven(spark, package):
    s = embedded.session_settings(
        warehouse=Path("/tmp/wh"), user_params={}, iceberg_jars="packages", jars=None, spark=spark
    )
    assert s["spark.jars.packages"] == package
    assert "spark.jars" not in s


def test_auto_takes_the_runtime_for_the_installed_spark_as_files(monkeypatch):
    """auto: the bundled runtime on Spark 3.5, the Maven runtime (a cached download) on Spark 4;
    bundled on Spark 4 fails naming both versions; packages and none prepare no file."""
    from dbt_incremental_mv.runtime import iceberg_runtime

    downloaded = []
    monkeypatch.setattr(iceberg_runtime, "maven_runtime_jar", lambda spark: downloaded.append(spark) or Path(f"/c/{spark.runtime_jar_name}"))
    spark4 = SparkLine("4.0.2", "2.13")
    assert embedded.jars_for("auto", {}, spark4).classpath == ["/c/iceberg-spark-runtime-4.0_2.13-1.10.2.jar"]
    assert downloaded == [spark4]
    with pytest.raises(iceberg_runtime.IcebergRuntimeError, match=r"built for Spark 3\.5; PySpark 4\.0\.2"):
        embedded.jars_for("bundled", {}, spark4)
    assert embedded.jars_for("packages", {}, spark4) is None and embedded.jars_for("none", {}, spark4) is None
    assert embedded.jars_for("auto", {"spark.jars": "/mine/iceberg-spark-runtime-4.0_2.13-1.9.0.jar"}, spark4) is None
    assert embedded.jars_for("auto", {"spark.jars": "/drivers/postgresql-42.7.14.jar"}, spark4).classpath == [
        "/c/iceberg-spark-runtime-4.0_2.13-1.10.2.jar"
    ]
    bundled = embedded.jars_for("auto", {}, SparkLine("3.5.9", "2.12"))
    assert bundled.runtime.name == "iceberg-spark-runtime-3.5_2.12-1.10.2.jar" and bundled.relocated_jackson is not None
    assert downloaded == [spark4, spark4]


@pytest.mark.parametrize(
    "key, runtime",
    [("spark.jars", "/opt/iceberg-spark-runtime-3.5_2.12-1.9.2.jar"), ("spark.jars.packages", "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.9.2")],
)
def test_an_iceberg_runtime_the_user_names_is_left_alone(key, runtime):
    s = settings({key: runtime}, jars=None)
    assert s[key] == runtime
    assert ("spark.jars.packages" if key == "spark.jars" else "spark.jars") not in s


def test_a_catalog_driver_the_user_names_comes_after_the_iceberg_runtime():
    """A JDBC catalog's driver in spark.jars (or spark.jars.packages) does not replace the plugin's
    Iceberg runtime: both are on the session's classpath."""
    s = settings({"spark.jars": "/drivers/postgresql-42.7.14.jar"})
    assert s["spark.jars"] == "/j/runtime.jar,/j/jackson.jar,/drivers/postgresql-42.7.14.jar"
    s = settings({"spark.jars.packages": "org.postgresql:postgresql:42.7.14"})
    assert s["spark.jars"] == "/j/runtime.jar,/j/jackson.jar"
    assert s["spark.jars.packages"] == "org.postgresql:postgresql:42.7.14"
    s = session_settings(
        warehouse=WAREHOUSE, user_params={"spark.jars.packages": "org.postgresql:postgresql:42.7.14"},
        iceberg_jars="packages", jars=None, spark=SparkLine("4.1.1", "2.13"),
    )
    assert s["spark.jars.packages"] == "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.11.0,org.postgresql:postgresql:42.7.14"


def test_warehouse_is_resolved_against_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_warehouse(None) == tmp_path / "warehouse"
    assert resolve_warehouse("data/wh") == tmp_path / "data" / "wh"


def test_quick_jit_runs_the_c1_compiler_only():
    quick = session_settings(warehouse=WAREHOUSE, user_params={}, iceberg_jars="auto", jars=JARS, c1_only=True)
    assert QUICK_JIT in quick["spark.driver.extraJavaOptions"].split()
    assert "log4j2.configurationFile" in quick["spark.driver.extraJavaOptions"]
    assert "Tiered" not in settings()["spark.driver.extraJavaOptions"]


def test_auto_jit_is_quick_for_a_small_warehouse_only(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/venv/bin/dbt", "run"])
    assert quick_jit("auto", tmp_path / "missing", {})  # a first run: nothing there yet
    (tmp_path / "db" / "t" / "data").mkdir(parents=True)
    (tmp_path / "db" / "t" / "data" / "a.parquet").write_bytes(b"x" * 1000)
    assert quick_jit("auto", tmp_path, {})
    assert not warehouse_smaller_than(tmp_path, 1000)
    assert warehouse_smaller_than(tmp_path, 1001)
    with (tmp_path / "db" / "t" / "data" / "big.parquet").open("wb") as big:
        big.truncate(QUICK_JIT_MAX_BYTES)  # sparse: counted by its size
    assert not quick_jit("auto", tmp_path, {})
    assert quick_jit("quick", tmp_path, {})
    assert not quick_jit("peak", tmp_path / "missing", {})


@pytest.mark.parametrize("argv0", ["/venv/bin/python", "pytest", "-c", "/venv/bin/dagster"])
def test_auto_jit_keeps_c2_in_a_process_that_runs_many_dbt_commands(tmp_path, monkeypatch, argv0):
    monkeypatch.setattr(sys, "argv", [argv0])
    assert not quick_jit("auto", tmp_path, {})
    monkeypatch.setattr(sys, "argv", ["C:\\venv\\Scripts\\dbt.exe"])
    assert quick_jit("auto", tmp_path, {})


@pytest.mark.parametrize("option", ["-XX:TieredStopAtLevel=4", "-XX:-TieredCompilation", "-Xint"])
def test_a_users_own_jit_choice_is_left_alone(tmp_path, option):
    assert not quick_jit("quick", tmp_path, {"spark.driver.extraJavaOptions": f"-Xss4m {option}"})


def test_a_long_lived_jvm_keeps_few_statements_and_short_plan_texts():
    """Spark writes every statement's plan text for its status store, UI or not (and again at
    each adaptive re-plan): capped, physical plan only, 100 statements kept; in the Thrift
    Server's settings too."""
    from dbt_incremental_mv.runtime.thrift_server import server_settings

    for s in (settings(), server_settings(warehouse=WAREHOUSE, workdir=Path("/tmp/w"))):
        assert s["spark.sql.maxPlanStringLength"] == "200000"
        assert s["spark.sql.ui.explainMode"] == "simple"
        assert s["spark.sql.ui.retainedExecutions"] == "100"


@pytest.mark.parametrize(
    "params, rest",
    [
        ({"spark.sql.catalog.spark_catalog.type": "rest", "spark.sql.catalog.spark_catalog.uri": "http://c"}, True),
        ({"spark.sql.catalog.lake.type": "REST"}, True),
        ({"spark.sql.catalog.lake.catalog-impl": "org.apache.iceberg.rest.RESTCatalog"}, True),
        ({"spark.sql.catalog.spark_catalog.type": "jdbc"}, False),
        ({"spark.sql.catalog.spark_catalog.uri": "rest"}, False),
        ({}, False),
    ],
)
def test_a_rest_catalog_takes_the_complete_runtime_on_spark_3_5(monkeypatch, params, rest):
    """The bundled offline runtime lacks Iceberg's relocated HTTP client: a REST catalog gets the
    Maven Central runtime (downloaded once) under auto, and bundled refuses it before anything runs."""
    from dbt_incremental_mv.runtime import iceberg_runtime

    monkeypatch.setattr(iceberg_runtime, "maven_runtime_jar", lambda spark: Path(f"/c/{spark.runtime_jar_name}"))
    spark35 = SparkLine("3.5.9", "2.12")
    jars = embedded.jars_for("auto", params, spark35)
    if rest:
        assert jars.classpath == ["/c/iceberg-spark-runtime-3.5_2.12-1.10.2.jar"]
        with pytest.raises(iceberg_runtime.IcebergRuntimeError, match=r"REST catalog.*lacks the HTTP client.*iceberg_jars: auto"):
            embedded.jars_for("bundled", params, spark35)
    else:
        assert jars.runtime.name == "iceberg-spark-runtime-3.5_2.12-1.10.2.jar" and jars.relocated_jackson is not None
