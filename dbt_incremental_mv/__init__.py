"""dbt-incremental-mv: fast-refresh materialized views for dbt on Apache Spark and Iceberg.

dbt imports every top-level ``dbt_*`` module on every command, so importing this package
must stay cheap and free of side effects: submodules are imported where they are used.
"""

__version__ = "0.1.0"
