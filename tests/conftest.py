import pytest

# dbt's own functional-test fixtures (project, run_dbt's profile, unique schemas).
pytest_plugins = ["dbt.tests.fixtures.project"]


def pytest_collection_modifyitems(config, items):
    """Functional tests (tests/functional) need the embedded Spark session: mark them."""
    for item in items:
        if "tests/functional" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)


def pytest_terminal_summary(terminalreporter):
    """How much randomized differential testing this run did (issue: at least 2,000 operations
    in the default run; ``DBT_MV_SOAK=<n>`` multiplies the randomized rounds)."""
    try:
        from tests.functional.differential import OPERATIONS, soak_factor
    except ImportError:
        return
    operations = sum(OPERATIONS[k] for k in ("insert", "update", "update_key", "delete"))
    if not operations:
        return
    kinds = ", ".join(f"{k} {OPERATIONS[k]}" for k in ("insert", "update", "update_key", "delete"))
    terminalreporter.write_line(
        f"differential testing: {operations} random DML operations ({kinds}) in {OPERATIONS['statements']} "
        f"statements, {OPERATIONS['comparisons']} view-vs-query comparisons (soak factor {soak_factor()})"
    )
