"""Change logs: Oracle's materialized view logs (MLOG$), as Iceberg tables declared as dbt sources."""
