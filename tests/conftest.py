from collections import Counter

import pytest

# dbt's own functional-test fixtures (project, run_dbt's profile, unique schemas).
pytest_plugins = ["dbt.tests.fixtures.project"]


def pytest_collection_modifyitems(config, items):
    """Functional tests (tests/functional) need the embedded Spark session: mark them. Under
    pytest-xdist (``-n 2 --dist loadgroup``) a test class's tests run in one worker in their order
    (a class's tests share its project, as in a serial run), a module's functions too, and the
    Thrift Server's tests all in one worker, which starts one server for them all."""
    for item in items:
        path = str(item.fspath).replace("\\", "/")
        if "tests/functional" in path:
            item.add_marker(pytest.mark.spark)
        if "tests/functional/thrift/" in path:
            item.add_marker(pytest.mark.xdist_group("thrift"))
        else:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0] + (f"::{item.cls.__name__}" if item.cls else "")))


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


KINDS = ("insert", "update", "update_key", "delete")
_from_workers = Counter()  # under pytest-xdist (-n): the workers' counts, summed in the controller


def _counts() -> Counter:
    """This run's differential-testing counts: this process's, plus its xdist workers'."""
    try:
        from tests.functional.differential import OPERATIONS
    except ImportError:
        return Counter(_from_workers)
    return OPERATIONS + _from_workers


def _operations() -> int:
    return sum(_counts()[k] for k in KINDS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """An xdist worker ended: add the counts it sent (see pytest_sessionfinish)."""
    _from_workers.update(getattr(node, "workeroutput", {}).get("differential", {}))


def pytest_sessionfinish(session, exitstatus):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: its counts go to the controller, which judges
        workeroutput["differential"] = dict(_counts())
        return
    if len(_randomized_passed) == len(RANDOMIZED) and _operations() < MIN_OPERATIONS:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print(f"\ndifferential testing ran {_operations()} random DML operations, fewer than the "
              f"floor of {MIN_OPERATIONS}: raise the rounds or batch sizes of the randomized tests")


def pytest_terminal_summary(terminalreporter):
    # How much randomized differential testing this run did (issue 7: at least 2,000 operations in
    # the default run; DBT_MV_SOAK=<n> multiplies the randomized rounds).
    counts, operations = _counts(), _operations()
    if not operations:
        return
    from tests.functional.differential import soak_factor

    kinds = ", ".join(f"{k} {counts[k]}" for k in KINDS)
    terminalreporter.write_line(
        f"differential testing: {operations} random DML operations ({kinds}) in {counts['statements']} "
        f"statements, {counts['comparisons']} view-vs-query comparisons (soak factor {soak_factor()})"
    )
