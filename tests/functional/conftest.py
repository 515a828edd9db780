import os

import pytest

from tests.functional.catalogs import catalog_parameters
from tests.functional.util import TEST_PROCESS_JVM_OPTIONS

# The JVM of each test process (and a Thrift Server's) lives for the whole run and serves hundreds of
# small dbt commands, each statement new code to the JIT compiler: it compiles only what runs 4 times
# as often as the JVM's default thresholds would (TestAggregateRefresh alone: JVM CPU 384 -> 344 s,
# JIT 221 -> 135 s of compiler threads, wall unchanged). dbt command lines started by tests run
# without it, as users run them (util.cli_env).
os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_PROCESS_JVM_OPTIONS)


@pytest.fixture(scope="session")
def embedded_warehouse(tmp_path_factory):
    """One Iceberg warehouse for the whole run: all tests share the process's Spark session."""
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def catalog_server_parameters(tmp_path_factory):
    """server_side_parameters of the catalog DBT_MV_TEST_CATALOG names (tests/functional/catalogs.py)."""
    with catalog_parameters(tmp_path_factory.mktemp("catalog")) as parameters:
        yield parameters


def ansi_parameters() -> dict[str, str]:
    """``DBT_MV_TEST_ANSI=true`` runs the functional tests with ANSI mode on (the Spark 4 job: Spark 4's
    default), ``false`` or unset with dbt-spark's default (off)."""
    value = os.environ.get("DBT_MV_TEST_ANSI", "").strip().lower()
    return {"spark.sql.ansi.enabled": value} if value else {}


@pytest.fixture(scope="class")
def dbt_profile_target(embedded_warehouse, catalog_server_parameters):
    return {
        "type": "spark_mv",
        "method": "session",
        "warehouse": str(embedded_warehouse),
        "threads": 1,
        "server_side_parameters": {
            "spark.master": "local[2]", "spark.sql.shuffle.partitions": "4", **catalog_server_parameters,
            # Spark keeps 100 classes of generated code; a run's statements make thousands
            # (TestAggregateRefresh: 2,932 compiled with 100 kept, 1,195 with 4,096)
            "spark.sql.codegen.cache.maxEntries": "4096",
            **ansi_parameters(),
        },
    }
