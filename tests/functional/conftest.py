import pytest


@pytest.fixture(scope="session")
def embedded_warehouse(tmp_path_factory):
    """One Iceberg warehouse for the whole run: all tests share the process's Spark session."""
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="class")
def dbt_profile_target(embedded_warehouse):
    return {
        "type": "spark_mv",
        "method": "session",
        "warehouse": str(embedded_warehouse),
        "threads": 1,
        "server_side_parameters": {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "4"},
    }
