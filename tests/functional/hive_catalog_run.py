"""A fast_refresh project on a catalog that accepts custom table locations: Iceberg's
SparkSessionCatalog on a Hive metastore (embedded Derby), in one process of its own.

The shared embedded warehouse of the other tests is an Iceberg Hadoop catalog, which refuses any
custom location, and one Spark session per process cannot switch catalogs: test_location_root.py
runs this module as ``python -m tests.functional.hive_catalog_run <project dir>``; it prints
one JSON line of what it saw.
"""

import json
import sys
from pathlib import Path

from dbt.cli.main import dbtRunner


def main(project_dir: str) -> None:
    lines: list[str] = []
    runner = dbtRunner(callbacks=[lambda event: lines.append(event.info.msg)])

    def dbt(*args: str) -> list[str]:
        lines.clear()
        result = runner.invoke([*args, "--project-dir", project_dir, "--profiles-dir", project_dir])
        if not result.success:
            raise SystemExit(f"dbt {' '.join(args)} failed: {result.exception}\n" + "\n".join(lines))
        return list(lines)

    dbt("run-operation", "create_masters")
    build = dbt("run")
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    spark.sql("insert into shop.orders values (3, 30.00), (4, 40.00)")
    spark.sql("update shop.orders set amount = 11.00 where order_id = 1")
    refresh = dbt("run")
    rebuild = dbt("run", "--full-refresh")
    location = next(
        str(row.data_type) for row in spark.sql("describe table extended shop.big_orders").collect()
        if row.col_name == "Location"
    )
    view = sorted(tuple(r) for r in spark.sql("select order_id, amount from shop.big_orders").collect())
    query = sorted(tuple(r) for r in spark.sql("select order_id, amount from shop.orders where amount > 10").collect())
    print(json.dumps({
        "build": [l for l in build if "big_orders:" in l],
        "refresh": [l for l in refresh if "big_orders:" in l],
        "rebuild": [l for l in rebuild if "big_orders:" in l],
        "location": location,
        "view_equals_query": view == query,
        "data_files": sorted(p.name for p in (Path(location.removeprefix("file:")) / "data").glob("*.parquet"))[:1],
    }))


if __name__ == "__main__":
    main(sys.argv[1])
