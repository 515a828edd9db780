"""The example project as a newcomer runs it (scripts/demo.sh): the dbt CLI in fresh processes."""

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.functional.util import DBT

REPO = Path(__file__).resolve().parents[2]
JAVA_FRAME = re.compile(r"^\s+at [\w$.]+\(")


def dbt(project_dir, *args):
    env = {**os.environ, "DBT_PROFILES_DIR": str(project_dir), "DBT_MV_WAREHOUSE": str(project_dir / "warehouse")}
    done = subprocess.run([DBT, *args], cwd=project_dir, env=env, capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    noise = [line for line in output.splitlines() if JAVA_FRAME.match(line) or re.search(r"\bWARN\b(?!=)|Traceback|Exception", line)]
    assert not noise, "a normal run printed JVM or Python noise:\n" + "\n".join(noise[:20])
    return output


def test_demo_builds_refreshes_incrementally_and_passes_its_tests_cleanly(tmp_path):
    project = tmp_path / "shop"
    shutil.copytree(REPO / "integration_tests", project, ignore=shutil.ignore_patterns("target", "logs", "warehouse"))

    first = dbt(project, "build", "--full-refresh")
    assert "Done. PASS=21 WARN=0 ERROR=0" in first  # 4 seeds, 7 views, 10 tests
    assert "customer_orders: build (first run" in first

    dbt(project, "run-operation", "shop_changes")
    second = dbt(project, "run")
    assert "Done. PASS=7 WARN=0 ERROR=0" in second
    line = next(l for l in second.splitlines() if "customer_orders: fast refresh:" in l)
    assert "orders (shop.orders): mixed" in line and "customers (shop.customers): mixed" in line
    # the customer's move is an update of columns it keeps in the view: patched from the view's rows
    assert "steps run: DEL o, DEL c, INS o, PATCH c" in line, line
    assert re.search(r"view rows: \+\d+ -\d+", line)
    outer = next(l for l in second.splitlines() if "order_lines_with_products: fast refresh:" in l)
    # new lines (anchor) and changed products (inner side, joined on its key): slices updated in place
    assert "steps run: SLICES l, SLICES p, DEL+INS slices" in outer, outer
    for aggregate in ("sales_by_product", "revenue_by_country"):  # aggregates refresh incrementally too
        assert re.search(rf"{aggregate}: fast refresh: .*steps run: DELTA", second), aggregate
    # over an outer join: the new orders row by row, the moved customer's orders by its signed images
    assert re.search(r"orders_per_country: fast refresh: .*steps run: DELTA c, ROWS o", second), second
    # the view over a view: customer_orders' refresh applied as a delta
    stacked = next(l for l in second.splitlines() if "orders_by_country_status: fast refresh:" in l)
    assert "customer_orders (shop.customer_orders): mixed" in stacked and "steps run: DELTA customer_orders" in stacked, stacked
    # ... which customer_orders' refresh wrote to its log itself (mv_log=true): nothing captured
    assert re.search(r"customer_orders: fast refresh: .*; logged \d+ image\(s\) to shop.mlog_customer_orders", second), second
    assert "captured shop.mlog_customer_orders" not in stacked, stacked
    # HAVING: customer 5's second order makes it enter the view, through the recompute of the
    # groups the view did not hold
    assert re.search(r"repeat_customers: fast refresh: .*HAVING: recompute of groups the view does not hold", second)
    tested = dbt(project, "test")  # incl. matches_defining_query on every view
    assert "Done. PASS=10 WARN=0 ERROR=0" in tested and tested.count("matches_defining_query") >= 7, tested

    advice = dbt(project, "run-operation", "mv_layout_advice")
    assert "alter table `shop`.`customer_orders` write ordered by `_mv_o_order_id`, `_mv_c_customer_id`;" in advice

    litter = {"metastore_db", "derby.log", "spark-warehouse"} & {p.name for p in project.iterdir()}
    assert not litter
    assert (project / "warehouse" / "shop" / "customer_orders" / "metadata").is_dir()
    assert (project / "warehouse" / "shop" / "mlog_orders" / "metadata").is_dir()
