"""location_root takes effect on a fast_refresh model, on a catalog that allows custom locations."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.functional.util import capture_sources

REPO = Path(__file__).resolve().parents[2]

PROFILE = """
hive:
  target: derby
  outputs:
    derby:
      type: spark_mv
      method: session
      schema: shop
      threads: 1
      warehouse: "{root}/iceberg_warehouse"
      server_side_parameters:
        spark.master: "local[2]"
        spark.sql.shuffle.partitions: "2"
        spark.sql.catalogImplementation: hive
        spark.sql.warehouse.dir: "{root}/hive_warehouse"
        spark.hadoop.javax.jdo.option.ConnectionURL: "jdbc:derby:;databaseName={root}/metastore_db;create=true"
        spark.sql.catalog.spark_catalog: org.apache.iceberg.spark.SparkSessionCatalog
        spark.sql.catalog.spark_catalog.type: hive
        # Hive 2.3's embedded metastore has no lock tables; one process, so no lock is needed
        spark.hadoop.iceberg.engine.hive.lock-enabled: "false"
"""
PROJECT = """
name: location_root_check
version: "1.0"
config-version: 2
profile: hive
"""
SOURCES = capture_sources({"orders": "order_id"}, schema="shop")
MASTERS = """
{% macro create_masters() %}
  {% do run_query("create schema if not exists shop") %}
  {% do run_query("create table shop.orders (order_id bigint, amount decimal(10,2)) using iceberg") %}
  {% do run_query("insert into shop.orders values (1, 5.00), (2, 50.00)") %}
{% endmacro %}
"""
VIEW = """
{{ config(materialized='fast_refresh', refresh_method='fast', location_root=var('root') ~ '/views') }}
select o.order_id, o.amount from {{ source('shop', 'orders') }} o where o.amount > 10
"""


def test_location_root_places_the_view_and_survives_refresh_and_rebuild(tmp_path):
    root = tmp_path.resolve()
    (root / "models").mkdir()
    (root / "macros").mkdir()
    (root / "profiles.yml").write_text(PROFILE.format(root=root))
    (root / "dbt_project.yml").write_text(PROJECT + f"vars:\n  root: \"{root}\"\n")
    (root / "models" / "sources.yml").write_text(SOURCES)
    (root / "models" / "big_orders.sql").write_text(VIEW)
    (root / "macros" / "create_masters.sql").write_text(MASTERS)
    done = subprocess.run(
        [sys.executable, "-m", "tests.functional.hive_catalog_run", str(root)],
        cwd=root, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["location"] == f"file:{root}/views/big_orders", seen
    assert seen["data_files"], seen  # the data is written there
    assert any("big_orders: build" in line for line in seen["build"]), seen
    assert any("big_orders: fast refresh:" in line and "mixed" in line for line in seen["refresh"]), seen
    assert any("big_orders: build" in line for line in seen["rebuild"]), seen
    assert seen["view_equals_query"], seen
    assert not (REPO / "derby.log").exists() and not (REPO / "metastore_db").exists()
