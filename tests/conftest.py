import pytest

# dbt's own functional-test fixtures (project, run_dbt's profile, unique schemas).
pytest_plugins = ["dbt.tests.fixtures.project"]


def pytest_collection_modifyitems(config, items):
    """Functional tests (tests/functional) need the embedded Spark session: mark them."""
    for item in items:
        if "tests/functional" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)


# The default run's floor of random DML operations (issue 7), checked when every randomized
# differential test of the view classes ran and passed.
MIN_OPERATIONS = 2000
RANDOMIZED = (
    "test_join_refresh.py", "test_outer_join_refresh.py", "test_aggregate_refresh.py", "test_outer_aggregate_refresh.py",
    "test_having_refresh.py", "test_stacked_refresh.py", "test_union_all_refresh.py",
)
_randomized_passed = set()


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed and "test_randomized_workload" in report.nodeid:
        _randomized_passed.update(name for name in RANDOMIZED if name in report.nodeid)


def _operations() -> int:
    try:
        from tests.functional.differential import OPERATIONS
    except ImportError:
        return 0
    return sum(OPERATIONS[k] for k in ("insert", "update", "update_key", "delete"))


def pytest_sessionfinish(session, exitstatus):
    if len(_randomized_passed) == len(RANDOMIZED) and _operations() < MIN_OPERATIONS:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\ndifferential testing ran {_operations()} random DML operations, fewer than the "
              f"floor of {MIN_OPERATIONS}: raise the rounds or batch sizes of the randomized tests")


def pytest_terminal_summary(terminalreporter):
    # How much randomized differential testing this run did (issue 7: at least 2,000 operations in
    # the default run; DBT_MV_SOAK=<n> multiplies the randomized rounds).
    operations = _operations()
    if not operations:
        return
    from tests.functional.differential import OPERATIONS, soak_factor

    kinds = ", ".join(f"{k} {OPERATIONS[k]}" for k in ("insert", "update", "update_key", "delete"))
    terminalreporter.write_line(
        f"differential testing: {operations} random DML operations ({kinds}) in {OPERATIONS['statements']} "
        f"statements, {OPERATIONS['comparisons']} view-vs-query comparisons (soak factor {soak_factor()})"
    )
