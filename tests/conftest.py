import os
from collections import Counter

import pytest

from tests.depth import commit, depth, full, run_seed

# dbt's own functional-test fixtures (project, run_dbt's profile, unique schemas).
pytest_plugins = ["dbt.tests.fixtures.project"]


# Seconds a group of tests took in the CI's Spark 3.5 suite (two processes; 2026-12-06 at the CI's
# depth; the groups only the matrix runs from its full-depth runs before), for the groups over ~30 s;
# a functional group not listed counts FUNCTIONAL_SECONDS, a unit test nothing. Only their order
# matters (see pytest_collection_modifyitems): update it when a group's rank changes.
EXPECTED_SECONDS = {
    "thrift": 1050,  # the matrix's; the CI's Thrift smoke alone about 170
    "tests/functional/test_generated_views.py::TestGeneratedViews": 315,
    "tests/functional/test_having_refresh.py::TestHavingRefresh": 290,  # matrix only
    "tests/functional/test_change_logs.py::TestRefreshersInSeparateProcesses": 200,  # matrix only
    "tests/functional/test_in_steps_refresh.py::TestViewsMaintainedInSteps": 190,
    "tests/functional/test_outer_aggregate_refresh.py::TestOuterJoinAggregateRefresh": 165,
    "tests/functional/test_clock_refresh.py::TestClockRefresh": 155,
    "tests/functional/test_example_project.py": 155,
    "tests/functional/test_partitionwise_refresh.py::TestPartitionwiseRefresh": 150,  # 270 with all its views
    "tests/functional/test_indexed_state.py::TestRefreshersOfAnIndexedState": 115,
    "tests/functional/test_recomputed_types.py::TestRecomputedTypes": 110,
    "tests/functional/test_outer_join_refresh.py::TestOuterJoinRefresh": 105,
    "tests/functional/test_stacked_refresh.py::TestThreeStackedViewsOverALoggedIncrementalModel": 105,  # matrix only
    "tests/functional/test_aggregate_refresh.py::TestAggregateRefresh": 95,
    "tests/functional/test_union_all_refresh.py::TestUnionAllRefresh": 90,
    "tests/functional/test_robustness.py::TestInterruptedAggregateRefresh": 75,  # every sixth point in CI
    "tests/functional/test_location_root.py": 70,  # matrix only
    "tests/functional/test_indexed_state.py::TestIndexedJoinState": 65,
    "tests/functional/test_robustness.py::TestKilledRefresh": 65,  # 2 of 4 kill points in CI
    "tests/functional/test_explain_and_history.py::TestForceRandomized": 60,  # matrix only
    "tests/functional/test_aggregate_refresh.py::TestRecomputedAggregates": 60,
    "tests/functional/test_ranked_refresh.py::TestRankedRefresh": 55,
    "tests/functional/test_ansi_mode.py::TestAnsiOff": 55,  # matrix only
    "tests/functional/test_recomputed_types.py::TestOverflowAnsiOff": 52,
    "tests/functional/test_ansi_mode.py::TestAnsiOn": 52,
    "tests/functional/test_join_refresh.py::TestJoinRefresh": 41,
    "tests/functional/test_aggregate_refresh.py::TestMinMaxRecomputesOnlyWhatItMust": 38,
    "tests/functional/test_stacked_refresh.py::TestThreeStackedViews": 36,
    "tests/functional/test_indexed_state.py::TestIndexedStateChosenByItsRecord": 34,
    "tests/functional/test_join_refresh.py::TestMergeOnReadMasters": 33,
}
FUNCTIONAL_SECONDS = 15


def group_of(nodeid: str) -> str:
    """The test process group of a test (by its node id): a test class's tests, a module's
    functions, the Thrift Server's tests (tests/functional/thrift/, one server for them all)."""
    nodeid = nodeid.split("@")[0] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid  # xdist's group suffix
    if nodeid.startswith("tests/functional/thrift/"):
        return "thrift"
    parts = nodeid.split("[")[0].split("::")
    return "::".join(parts[:2]) if len(parts) > 2 else parts[0]


def expected_seconds(group: str) -> float:
    if group in EXPECTED_SECONDS:
        return EXPECTED_SECONDS[group]
    return FUNCTIONAL_SECONDS if group.startswith("tests/functional") else 0


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` (scripts/test.sh): each test group (``group_of``) runs in one test process,
    in its order. xdist's own loadgroup scheduler groups by a suffix it writes into the node ids, which
    pytest 9.2 no longer keeps (pytest-xdist issue 1386): its groups silently became single tests."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False  # xdist would order the groups by their number of tests
    return GroupScheduling(config, log)


# What the per-change CI (scripts/test.sh, run by .ci/run) leaves to scripts/test_matrix.sh, which
# runs everything (DBT_MV_TEST_DEPTH=full), by test group (group_of) or node id prefix: each entry
# says what in the CI covers the same capability. Keep the CI within its 40 minutes on 2 cores.
MATRIX_ONLY = {
    "thrift": "the Thrift Server at full depth; CI: a join view with its log, an aggregate and a view over the join over Thrift, one batched change (test_thrift_smoke.py)",
    "tests/functional/test_having_refresh.py::TestHavingRefresh":
        "randomized HAVING views; CI: HAVING in the example project, the generated definitions, the UNION ALL test",
    "tests/functional/test_stacked_refresh.py::TestThreeStackedViewsOverALoggedIncrementalModel":
        "views over a logged_merge model; CI: TestThreeStackedViews, the example project's view over a view",
    "tests/functional/test_ansi_mode.py::TestAnsiOff":
        "the ANSI views with ANSI off; CI: TestAnsiOn, every other test (ANSI off), the overflow test",
    "tests/functional/test_explain_and_history.py::TestForceRandomized":
        "force over random changes; CI: TestCostBasedForce, TestExplainAndHistory",
    "tests/functional/test_change_logs.py::TestRefreshersInSeparateProcesses":
        "refreshers in separate JVMs on the Hadoop catalog; CI: the same on JDBC, REST and Hive Metastore (the "
        "catalog smoke), the plugin's file system's atomic renames (test_hadoop_catalog_processes.py)",
    "tests/functional/test_location_root.py":
        "custom view locations on an embedded Hive metastore; CI: the catalog smoke on a Hive Metastore service",
    "tests/functional/test_example_pipeline.py":
        "the examples/ project end to end by the CLI (scripts/demo.sh's steps); CI: the integration_tests project "
        "by the CLI (test_example_project.py), ephemeral models and keys from unique_key in the unit suite",
    "tests/functional/test_smoke.py::TestEveryViewClass":
        "every view class once on Spark 3.5; CI: each class's randomized test (the smoke runs on Spark 4.1 "
        "and over Thrift)",
}


def matrix_only(nodeid: str, named: tuple[str, ...] = ()) -> bool:
    """Whether the CI's depth leaves the test to the matrix: it is in MATRIX_ONLY and not ``named``
    (a test file or node id given on the command line runs: the Spark 4 and catalog jobs name theirs)."""
    if any(nodeid == name or nodeid.startswith((f"{name}::", f"{name}[")) for name in named):
        return False
    group = group_of(nodeid)
    if group == "thrift":
        return not nodeid.startswith("tests/functional/thrift/test_thrift_smoke.py")
    return group in MATRIX_ONLY


def _run_lines() -> list[str]:
    """The run's depth and seed, and how to run the same again."""
    from tests.functional.test_generated_views import AGAIN, DEFINITIONS, FEATURE, ROUNDS, SEED, TestGeneratedViews

    made = f"from commit {commit()[:12]}" if commit() and "DBT_MV_TEST_SEED" not in os.environ else "given"
    drawn = len(TestGeneratedViews.DEFINITIONS)
    chosen = (
        f"{drawn} of the first {DEFINITIONS} with the feature {FEATURE!r}"
        if FEATURE
        else f"{DEFINITIONS} + {drawn - DEFINITIONS} regression cases"
    )
    return [
        f"test depth: {depth()} (DBT_MV_TEST_DEPTH=full runs what the CI leaves to scripts/test_matrix.sh)",
        f"run seed: {run_seed()} ({made}); the same draws again: DBT_MV_TEST_SEED={run_seed()}",
        f"generated definitions: seed {SEED}, {chosen}, {ROUNDS} rounds; again: {AGAIN}",
    ]


def pytest_report_header(config):
    """At the top of the output (pytest -v or default verbosity): _run_lines."""
    return _run_lines()


def pytest_sessionstart(session):
    """Quiet runs (``-q``, as CI's) print no report header: write _run_lines at the top anyway, once
    (the xdist controller or a single process, not each worker)."""
    config = session.config
    if getattr(config, "workerinput", None) is not None or config.get_verbosity() >= 0:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        for line in _run_lines():
            reporter.write_line(line)


def pytest_collection_modifyitems(config, items):
    """Functional tests (tests/functional) need the embedded Spark session: mark them. Under
    pytest-xdist (``-n 2 --dist loadgroup``) a test group runs in one process, in its order (a
    class's tests share its project, as in a serial run; pytest_xdist_make_scheduler). The groups
    run longest first (EXPECTED_SECONDS), the unit tests last: xdist hands a process the next group
    in this order whenever it has two tests or fewer left, so a long group started late would keep
    one process busy while the other has nothing left to run."""
    if not full():
        named = tuple(arg.rstrip("/") for arg in config.args if arg.split("::")[0].endswith(".py"))
        left = [item for item in items if matrix_only(item.nodeid, named)]
        if left:
            config.hook.pytest_deselected(items=left)
            items[:] = [item for item in items if not matrix_only(item.nodeid, named)]
    for item in items:
        if item.nodeid.startswith("tests/functional"):
            item.add_marker(pytest.mark.spark)
    items.sort(key=lambda item: -expected_seconds(group_of(item.nodeid)))  # stable: a group keeps its order


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
