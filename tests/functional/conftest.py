import os

import pytest

from tests.functional.catalogs import catalog_parameters
from tests.faults import install as install_fault_injection

install_fault_injection()  # the tests in this process (tests/faults.py)


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


# Spark's interpreted evaluation (no generated code) in the tests' embedded sessions: their statements
# read a few rows, where compiling and loading each statement's generated classes costs more than it
# saves (TestJoinRefresh in one process, alternated: 126-127 s against 150 s, 19% less CPU; docs/correctness.md).
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def execution_parameters() -> dict[str, str]:
    """``DBT_MV_TEST_CODEGEN=true`` runs the functional tests with Spark's generated code, as users run
    (the Spark 4 job; the Thrift tests and the example project, with their own settings, run it
    always); unset, Spark's interpreted evaluation (INTERPRETED)."""
    return {} if os.environ.get("DBT_MV_TEST_CODEGEN", "").strip().lower() == "true" else dict(INTERPRETED)


@pytest.fixture(scope="class")
def dbt_profile_target(embedded_warehouse, catalog_server_parameters):
    return {
        "type": "spark_mv",
        "method": "session",
        "warehouse": str(embedded_warehouse),
        "threads": 1,
        "server_side_parameters": {
            "spark.master": "local[2]", "spark.sql.shuffle.partitions": "4", **catalog_server_parameters,
            **ansi_parameters(), **execution_parameters(),
        },
    }


@pytest.fixture(autouse=True)
def small_views_compacted_as_before(monkeypatch):
    """The tests' views are a few KB, compacted by default at 8 extra files (layout.py: a small view's
    scan is a job's fixed cost), and their refreshes write a file per task (4 shuffle partitions):
    the randomized tests' views would be compacted every few refreshes, minutes of the suite spent
    on what a user's view reads. They are compacted at the threshold of a view over 16 MB (32 extra
    files) instead; the tests of compaction set their own thresholds (below both)."""
    from dbt_incremental_mv import layout

    monkeypatch.setattr(layout, "COMPACT_SMALL_VIEW_EXTRA_FILES", 32)
