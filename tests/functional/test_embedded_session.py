"""The embedded session: one Spark session per dbt connection."""

import threading


def run_in_thread(adapter, name, sql):
    result = {}

    def work():
        with adapter.connection_named(name):
            _, table = adapter.execute(sql, fetch=True)
            result["rows"] = [tuple(row) for row in table]

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return result["rows"]


def test_session_settings_do_not_leak_between_connections(project):
    adapter = project.adapter
    run_in_thread(adapter, "writer", "set spark.dbt_mv_probe = writer_value")
    assert run_in_thread(adapter, "writer_again", "set spark.dbt_mv_probe") != [("spark.dbt_mv_probe", "writer_value")]
    # ...while all connections share the catalog: a table made by one is seen by the other.
    run_in_thread(adapter, "creator", f"create table {project.test_schema}.shared_probe (x int) using iceberg")
    assert run_in_thread(adapter, "reader", f"show tables in {project.test_schema}") == [
        (project.test_schema, "shared_probe", False)
    ]


def test_the_jvm_maps_the_class_archive_setup_built(tmp_path):
    """scripts/setup.sh builds the class-data-sharing archive; a JVM with the embedded session's
    classpath must be able to map it (``-Xshare:on`` refuses to start otherwise)."""
    import subprocess
    import sys
    from pathlib import Path

    from dbt_incremental_mv import jvm_archive
    from dbt_incremental_mv.embedded import jars_for, session_settings

    settings = session_settings(warehouse=tmp_path, user_params={}, iceberg_jars="auto", jars=jars_for("auto", {}))
    archive = jvm_archive.archive_path(settings)
    assert archive.is_file(), f"{archive} was not built (scripts/setup.sh runs `dbt-incremental-mv jvm-archive`)"
    probe = (
        "import json, sys\n"
        "from pyspark.sql import SparkSession\n"
        "b = SparkSession.builder\n"
        "for k, v in json.loads(sys.argv[1]).items(): b = b.config(k, v)\n"
        "print(b.getOrCreate().sql('select 41 + 1').collect()[0][0])\n"
    )
    strict = jvm_archive.with_archive(settings, archive)
    strict["spark.driver.extraJavaOptions"] = strict["spark.driver.extraJavaOptions"].replace(jvm_archive.QUIET, "-Xshare:on")
    import json

    done = subprocess.run([sys.executable, "-c", probe, json.dumps(strict)], capture_output=True, text=True, timeout=300, cwd=Path(tmp_path))
    assert done.returncode == 0 and done.stdout.strip().endswith("42"), done.stderr[-2000:]


def test_column_bounds_come_from_the_statistics_of_the_files_written_after_a_sequence(project):
    """The marked keys' range (refresh/mark.py) is read from the log files' column statistics:
    only files written after the view's position count, files of NULLs only are skipped, and a
    column without usable statistics is left out."""
    import datetime

    adapter = project.adapter
    table = f"{project.test_schema}.bounds_probe"
    with adapter.connection_named("bounds"):
        for sql in (
            f"create table {table} (k bigint, d date, name string, price double) using iceberg "
            "tblproperties ('format-version' = '3')",
            f"insert into {table} values (5, date '2024-01-01', 'bob', 1.0), (9, date '2024-03-01', 'al', 2.0)",
            f"insert into {table} values (null, null, null, null)",
            f"insert into {table} values (100, date '2023-01-01', 'zed', 3.0)",
        ):
            adapter.execute(sql)
        metadata = adapter._metadata()
        assert metadata.in_jvm
        snapshot = metadata.main(table)
        columns = ["k", "d", "name", "price", "missing"]
        assert metadata.column_bounds(table, snapshot, columns, 0) == {
            "k": (5, 100), "d": (datetime.date(2023, 1, 1), datetime.date(2024, 3, 1)), "name": ("al", "zed"),
        }
        assert metadata.column_bounds(table, snapshot, ["k"], 1) == {"k": (100, 100)}  # the first file is older
        assert metadata.column_bounds(table, snapshot, ["k"], 3) == {}
