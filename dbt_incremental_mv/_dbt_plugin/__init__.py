"""dbt looks adapter plugins up as ``dbt.adapters.<type>``: the wheel installs this file as
``dbt/adapters/spark_mv/__init__.py``. The plugin itself lives in ``dbt_incremental_mv.adapter``."""

from dbt_incremental_mv.adapter import Plugin  # noqa: F401
