import pytest

# dbt's own functional-test fixtures (project, run_dbt's profile, unique schemas).
pytest_plugins = ["dbt.tests.fixtures.project"]


def pytest_collection_modifyitems(config, items):
    """Functional tests (tests/functional) need the embedded Spark session: mark them."""
    for item in items:
        if "tests/functional" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)
