"""The examples/ project as scripts/demo.sh runs it: the dbt CLI in fresh processes, an ingestion,
a logged_merge staging model, an ephemeral staging model and one mart of each view class."""

import re
import shutil
from pathlib import Path

from tests.functional.test_example_project import dbt

REPO = Path(__file__).resolve().parents[2]
MARTS = ("customer_orders", "order_payments", "revenue_by_country", "customer_activity", "payment_methods")


def test_the_example_pipeline_refreshes_every_mart_incrementally_and_its_gate_passes(tmp_path):
    project = tmp_path / "shop_pipeline"
    shutil.copytree(REPO / "examples" / "shop_pipeline", project, ignore=shutil.ignore_patterns("target", "logs", "warehouse"))
    dbt(project, "run-operation", "ingest", "--args", "{batch: 1}")
    built = dbt(project, "build", "--full-refresh")
    assert "Done. PASS=14 WARN=0 ERROR=0" in built, built  # 1 staging model, 5 marts, 8 tests

    explained = dbt(project, "run-operation", "explain_fast_refresh", "--args", "{model: revenue_by_country}")
    assert "view class: aggregate" in explained and "fast refreshable: yes" in explained, explained
    # the ephemeral stg_orders is read through: its source is the master, not the ephemeral model
    assert "master raw.orders: log raw.mlog_orders" in explained, explained
    assert "key (customer_id) from the unique_key of model 'stg_customers'" in explained, explained

    dbt(project, "run-operation", "ingest", "--args", "{batch: 2}")
    status = dbt(project, "run-operation", "mv_status")
    assert all(re.search(rf"{mart}: stale \(changes pending", status) for mart in MARTS), status
    refreshed = dbt(project, "build")
    assert "Done. PASS=14 WARN=0 ERROR=0" in refreshed, refreshed  # matches_defining_query on every mart
    for mart in MARTS:
        assert re.search(rf"{mart}: fast refresh: ", refreshed), (mart, refreshed)
    assert re.search(r"customer_orders: fast refresh: raw.orders: mixed", refreshed), refreshed  # inserts, updates, deletes
    dbt(project, "run-operation", "mv_status", "--args", "{fail_on: [stale, needs_rebuild, unusable]}")
