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
