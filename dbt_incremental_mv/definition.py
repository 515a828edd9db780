"""What a view was built from, and whether the model has changed since.

The view stores its compiled SQL and the types of the master columns it reads as Iceberg table
properties. A later run compares them with the model's current SQL (normalized: whitespace and
comments do not count) and the masters' current columns; any difference means the stored view
no longer answers the model's query, so refreshing it incrementally would be wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import sqlglot
from sqlglot.errors import SqlglotError

DEFINITION_PROPERTY = "dbt_incremental_mv.definition"
COLUMNS_PROPERTY = "dbt_incremental_mv.master_columns"
# a view maintained in steps (refresh/units.py) stores the query over its states as its definition,
# and the model's own query here: what the view must equal, recomputed on the masters
MODEL_QUERY_PROPERTY = "dbt_incremental_mv.model_query"


def defining_query(properties: Mapping[str, str]) -> str | None:
    """The query a built view must equal, recomputed on the masters: the model's own, also for a
    view maintained in steps (whose definition reads its states)."""
    return properties.get(MODEL_QUERY_PROPERTY) or properties.get(DEFINITION_PROPERTY)


def normalized_sql(sql: str) -> str:
    """The SQL as sqlglot writes it back without comments; whitespace-collapsed text if it
    does not parse."""
    try:
        statements = sqlglot.parse(sql, read="spark")
        return ";".join(s.sql(dialect="spark", comments=False) for s in statements if s is not None)
    except SqlglotError:
        return " ".join(sql.split())


def encode_columns(columns: Mapping[str, Mapping[str, str]]) -> str:
    """``{master: {column: type}}`` of the master columns the view reads, as stored."""
    return json.dumps({m: dict(sorted(c.items())) for m, c in sorted(columns.items())}, sort_keys=True)


def definition_change(
    stored_sql: str | None,
    compiled_sql: str,
    stored_columns: str | None,
    current_columns: Mapping[str, Mapping[str, str]] | None,
) -> str | None:
    """Why the stored view no longer matches the model (None: it still does)."""
    if stored_sql is not None and normalized_sql(stored_sql) != normalized_sql(compiled_sql):
        return "the model's SQL changed since the view was built"
    if stored_columns is None or current_columns is None:
        return None
    try:
        before = json.loads(stored_columns)
    except ValueError:
        return None
    for master, columns in sorted(before.items()):
        now = {c.lower(): t for c, t in (current_columns.get(master) or {}).items()}
        for column, spark_type in sorted(columns.items()):
            current = now.get(column.lower())
            if current is None:
                return f"column {column} of {master}, which the view reads, was dropped"
            if current.lower() != str(spark_type).lower():
                return f"column {column} of {master}, which the view reads, changed type from {spark_type} to {current}"
    return None
