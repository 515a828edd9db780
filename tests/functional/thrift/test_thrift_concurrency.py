"""Two refreshes of the same views at once, from two separate dbt processes, through one Spark
Thrift Server (one JVM, so Iceberg's commits are atomic between them, as on a cluster's
catalog; the embedded Hadoop catalog on a local directory is not safe for concurrent
writers in different processes).

Whatever the interleaving, each process either refreshes the views or fails cleanly naming the
other refresh; afterwards every view equals its defining query, and a further refresh (which
consumes whatever the loser left) leaves the logs without unconsumed changes. The aggregate views
would show a change applied twice as a wrong sum.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from tests.functional.thrift.test_thrift_fast_refresh import FIRST_CHANGES, MODELS, VIEWS, ExampleProject, apply
from tests.functional.util import assert_views_match_queries, rows

pytestmark = pytest.mark.thrift

DBT = str(Path(sys.executable).with_name("dbt"))
# in the one-line failure of a refresh that lost (FastRefreshEngine.publish, dbt_incremental_mv.conflicts)
LOST_RACE = "committed while this one ran"


def _outcomes(output: str) -> str:
    """What a process said of each view (its log lines and errors), for a failure's message."""
    wanted = re.compile(r"|".join(VIEWS) + r"|Error|committed while|refused|Done\.")
    return "\n".join(line for line in output.splitlines() if wanted.search(line))[-8000:]


class TestTwoProcessesRefreshAtOnce(ExampleProject):
    def test_one_wins_the_other_fails_cleanly_and_nothing_is_applied_twice(self, project, profiles_root):
        run_dbt(["build"])
        apply(project, FIRST_CHANGES)
        command = [DBT, "run", "--project-dir", str(project.project_root), "--profiles-dir", str(profiles_root)]
        processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                     for _ in range(2)]
        outputs = [process.communicate(timeout=600)[0] for process in processes]
        trail = "\n\n".join(_outcomes(output) for output in outputs)
        print(trail)  # shown whole under "Captured stdout call" if an assertion below fails
        won = {view: 0 for view in VIEWS}
        for output in outputs:
            for view in VIEWS:
                if re.search(rf"OK created sql fast_refresh model \S+\.{view}\b", output):
                    won[view] += 1
            # a refresh that lost fails cleanly: one line that says so, no Java stack trace
            errors = len(re.findall(r"ERROR creating sql fast_refresh model", output))
            assert len(re.findall(r"Runtime Error in model", output)) == errors, trail
            assert output.count(LOST_RACE) >= errors and "\tat org.apache" not in output, trail
        assert all(won.values()), (won, trail)  # every view was refreshed by one of them at least
        assert_views_match_queries(project, MODELS)

        run_dbt(["run"])  # picks up whatever the losing refresh did not apply, once
        assert_views_match_queries(project, MODELS)
        for log in ("mlog_orders", "mlog_customers", "mlog_order_lines", "mlog_products"):
            pending = rows(project, f"select count(*) from {project.test_schema}.{log} where _mv_op in ('I', 'D')")
            assert pending == [(0,)], (log, pending)
