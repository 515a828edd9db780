"""Quoting for generated Spark SQL: identifiers always quoted, values always literals."""

from __future__ import annotations

import datetime
from collections.abc import Iterable


def ident(name: str) -> str:
    """A backtick-quoted Spark identifier (a backtick inside is doubled)."""
    return "`" + name.replace("`", "``") + "`"


def relation(qualified: str) -> str:
    """``schema.table`` (unquoted, as dbt and the graph name it) as a quoted two-part name."""
    schema, _, table = qualified.rpartition(".")
    return f"{ident(schema)}.{ident(table)}" if schema else ident(table)


def string(value: str) -> str:
    """A Spark string literal (single quotes; backslashes and quotes escaped)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def integer(value: int) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"not an integer: {value!r}")
    return str(value)


def idents(names: Iterable[str]) -> str:
    return ", ".join(ident(n) for n in names)


def literal(value: int | str | datetime.date) -> str:
    """A Spark literal of an integer, a string or a date (what column bounds hold)."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return f"date {string(value.isoformat())}"
    if isinstance(value, str):
        return string(value)
    if isinstance(value, datetime.datetime):  # a timestamp is no bound: refused as integer() refuses it
        raise TypeError(f"not an integer: {value!r}")
    return integer(value)


def between(column: str, low: int | str | datetime.date, high: int | str | datetime.date) -> str:
    """``column BETWEEN low AND high`` (``column`` already rendered, bounds as literals): a range
    Spark pushes down to an Iceberg scan, which skips the files whose statistics are outside it."""
    return f"{column} between {literal(low)} and {literal(high)}"


def broadcast(query: str) -> str:
    """``query`` (a few changed keys) hinted to be broadcast where it filters a big table with
    IN, EXISTS or a semi join: Spark's estimate of it (from the sizes of the tables it reads,
    not from its few rows) would otherwise plan a sort-merge join that shuffles the big table."""
    return f"select /*+ BROADCAST */ * from (\n{query}\n)"
