"""The view's Iceberg table as dbt configs shape it: partitioning, bucketing, contracts.

- ``partition_by``: as in dbt-spark, column names or Iceberg transforms (``days(ts)``), passed
  through as written.
- ``clustered_by`` + ``buckets``: Iceberg tables have no Hive ``CLUSTERED BY ... INTO n BUCKETS``
  (its CTAS refuses it); each clustered column becomes Iceberg's ``bucket(n, column)`` partition
  transform after the ``partition_by`` ones, which spreads rows the same way and prunes files on
  equality filters of the column.
- ``contract: {enforced: true}``: the model's columns are cast to the contracted types when the
  table is built (dbt checks names and types before anything is created); the plugin's hidden
  ``_mv_*`` columns follow the contracted ones unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlglot
from sqlglot.errors import SqlglotError

from dbt_incremental_mv.config import ConfigError
from dbt_incremental_mv.sql_text import ident


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def partitioned(config: Mapping[str, Any]) -> bool:
    """Whether the view's table is partitioned (partition_by, or clustered_by as buckets)."""
    return bool(_names(config.get("partition_by")) or _names(config.get("clustered_by")))


def partition_spec(model_name: str, config: Mapping[str, Any]) -> list[str]:
    """The ``partitioned by`` expressions of the view's table."""
    spec = _names(config.get("partition_by"))
    clustered = _names(config.get("clustered_by"))
    buckets = config.get("buckets")
    if not clustered and buckets is None:
        return spec
    if not clustered or isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1:
        raise ConfigError(
            f"Model '{model_name}': clustered_by={config.get('clustered_by')!r} with buckets={buckets!r}: a "
            "fast_refresh view buckets its Iceberg table with bucket(buckets, column) partitions, which needs "
            "both clustered_by (column names) and buckets (a positive integer). Set both, or neither."
        )
    return spec + [f"bucket({buckets}, {ident(column)})" for column in clustered]


def _spark_type(model_name: str, column: str, data_type: str) -> str:
    try:
        cast = sqlglot.parse_one(f"select cast(null as {data_type})", read="spark")
        spark_type = sqlglot.exp.DataType.build(data_type, dialect="spark", udt=False)
        selected = cast.selects[0] if isinstance(cast, sqlglot.exp.Select) else None
        if not isinstance(selected, sqlglot.exp.Cast) or selected.to.sql("spark") != spark_type.sql("spark"):
            raise ValueError(data_type)
        return spark_type.sql(dialect="spark")
    except (SqlglotError, ValueError, AttributeError) as exc:
        raise ConfigError(
            f"Model '{model_name}': the contract gives column {column} the data_type {data_type!r}, which is not "
            "a Spark type. Use a Spark SQL type such as bigint, string or decimal(10,2)."
        ) from exc


def contract_types(model: Mapping[str, Any]) -> dict[str, str] | None:
    """``{column: Spark type}`` of an enforced model contract (None when not enforced)."""
    contract = (model.get("config") or {}).get("contract") or {}
    if not contract.get("enforced"):
        return None
    name = str(model.get("name", "?"))
    return {
        str(column.get("name") or key): _spark_type(name, str(column.get("name") or key), str(column["data_type"]))
        for key, column in (model.get("columns") or {}).items()
        if column.get("data_type")
    }


def enforce_contract(query: str, columns: Sequence[str] | None, contract: Mapping[str, str] | None) -> str:
    """``query`` with the contracted columns cast to their types; ``columns`` are the query's
    output columns in order (hidden ones included), None when only the contracted ones exist."""
    if not contract:
        return query
    types = {c.lower(): t for c, t in contract.items()}
    names = list(columns) if columns is not None else list(contract)
    select = ", ".join(
        f"cast({ident(c)} as {types[c.lower()]}) as {ident(c)}" if c.lower() in types else ident(c) for c in names
    )
    return f"select {select}\nfrom (\n{query}\n) as `mv_contract`"
