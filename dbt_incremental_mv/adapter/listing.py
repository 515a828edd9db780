"""dbt's relation listing in one statement per schema when the catalog holds only Iceberg tables.

Before the first model runs, dbt lists every schema of the project. dbt-spark asks
``show table extended in <schema> like '*'``, which Spark refuses for Iceberg (v2) tables
(SPARK-33393), then falls back to ``show tables`` and one ``describe extended`` per table, only to
learn each relation's type and provider: a schema of 50 tables costs 52 statements.

When the session's current catalog is Iceberg's ``org.apache.iceberg.spark.SparkCatalog`` (the
embedded mode's and the Thrift Server's Hadoop catalog, or a REST, JDBC, Glue... catalog), every
table it lists is an Iceberg table, so ``show tables`` alone says what dbt-spark learnt from the
describes. Views are not tables to such a catalog: ``show views`` lists them, and a catalog without
views (Hadoop) lists none or refuses. Any other catalog, including Iceberg's
``SparkSessionCatalog`` (which also holds Hive, parquet... tables), keeps dbt-spark's listing.

SQL only (``show``/``set``), so it works the same in the embedded session and over the Spark
Thrift Server. The catalog setting is read once per adapter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dbt.adapters.contracts.relation import RelationType
from dbt.adapters.spark.impl import SCHEMA_NOT_FOUND_MESSAGES, TABLE_OR_VIEW_NOT_FOUND_MESSAGES
from dbt.adapters.spark.impl import logger as spark_logger

from dbt_incremental_mv.sql_text import ident

ICEBERG_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
SESSION_CATALOG = "spark_catalog"

Query = Callable[[str], Sequence[Sequence[Any]]]


@dataclass(frozen=True)
class Catalog:
    """The session's current catalog: its name and implementation class ("" when unknown)."""

    name: str
    implementation: str

    @property
    def only_iceberg_tables(self) -> bool:
        return self.implementation == ICEBERG_CATALOG


@dataclass(frozen=True)
class ListedRelation:
    schema: str
    name: str
    type: str  # "table" or "view"
    information: str

    @property
    def is_iceberg(self) -> bool:
        return self.type == "table"


def _setting(query: Query, key: str) -> str | None:
    """A Spark setting's value (``set <key>`` answers ``(key, value)``), None when unset."""
    rows = query(f"set {key}")
    value = str(rows[0][1]).strip() if rows and len(rows[0]) > 1 and rows[0][1] is not None else ""
    return None if value in ("", "<undefined>") else value


def read_catalog(query: Query) -> Catalog:
    """The current catalog (``spark.sql.defaultCatalog``: dbt's two-part names resolve in it) and its
    ``spark.sql.catalog.<name>`` class. A setting that cannot be read (a server that refuses
    ``set`` of that key) leaves the implementation unknown: dbt-spark's listing then."""
    try:
        name = _setting(query, "spark.sql.defaultCatalog") or SESSION_CATALOG
        implementation = _setting(query, f"spark.sql.catalog.{name}") or ""
    except Exception as exc:  # noqa: BLE001 - any refusal only means "not known to be Iceberg"
        spark_logger.debug(f"spark_mv: cannot read the catalog setting, listing relations as dbt-spark does: {exc}")
        return Catalog(SESSION_CATALOG, "")
    return Catalog(name, implementation)


def _missing(exc: Exception) -> bool:
    message = f"{getattr(exc, 'msg', '')} {exc}"
    return any(text in message for text in SCHEMA_NOT_FOUND_MESSAGES + TABLE_OR_VIEW_NOT_FOUND_MESSAGES)


def _information(catalog: Catalog, schema: str, name: str, type_: str) -> str:
    """The lines of ``describe extended`` dbt-spark reads (Type, Provider), as it formats them."""
    lines = [f"Name: {catalog.name}.{schema}.{name}"]
    lines += ["Type: VIEW"] if type_ == "view" else ["Type: MANAGED", "Provider: iceberg"]
    return "".join(f"{line}\n" for line in lines)


def list_schema(query: Query, catalog: Catalog, schema: str) -> list[ListedRelation]:
    """The relations of ``schema`` in a catalog that holds only Iceberg tables: one ``show tables``,
    one ``show views``. A schema that does not exist has none (as in dbt-spark)."""
    try:
        tables = query(f"show tables in {ident(schema)}")
    except Exception as exc:
        if _missing(exc):
            return []
        raise
    try:
        views = query(f"show views in {ident(schema)}")
    except Exception as exc:  # noqa: BLE001 - e.g. a catalog without view support
        spark_logger.debug(f"spark_mv: no views listed in {schema}: {exc}")
        views = []

    # (namespace, name, isTemporary): a temporary view belongs to the session, not to the schema
    kinds: dict[tuple[str, str], str] = {}
    for rows, type_ in ((tables, "table"), (views, "view")):
        for row in rows:
            namespace, name, temporary = (tuple(row) + (False,))[:3]
            if _true(temporary):
                continue
            kinds[(str(namespace or schema), str(name))] = type_  # a view listed as a table too: a view
    return [
        ListedRelation(namespace, name, type_, _information(catalog, namespace, name, type_))
        for (namespace, name), type_ in kinds.items()
    ]


def _true(value: Any) -> bool:
    return value is True or str(value).strip().lower() == "true"


class ListingCatalog:
    """The catalog an adapter lists (one adapter per dbt command), read at its first listing:
    dbt lists schemas on several threads, the first reads the settings, the others wait for it."""

    def __init__(self, query: Query) -> None:
        self._query = query
        self._catalog: Catalog | None = None
        self._lock = threading.Lock()

    def get(self) -> Catalog:
        with self._lock:
            if self._catalog is None:
                self._catalog = read_catalog(self._query)
            return self._catalog


def list_relations(adapter: Any, schema_relation: Any, fallback: Callable[[Any], list]) -> list:
    """``SparkAdapter.list_relations_without_caching`` for ``adapter`` (a ``SparkMVAdapter``):
    one ``show tables`` per schema on an Iceberg ``SparkCatalog``, ``fallback`` (dbt-spark's
    listing) on any other catalog."""
    schema = schema_relation.schema
    if not schema:
        return fallback(schema_relation)
    catalog = adapter.listing_catalog.get()
    if not catalog.only_iceberg_tables:
        return fallback(schema_relation)
    return [
        adapter.Relation.create(
            schema=listed.schema,
            identifier=listed.name,
            type=RelationType.View if listed.type == "view" else RelationType.Table,
            information=listed.information,
            is_delta=False,
            is_iceberg=listed.is_iceberg,
            is_hudi=False,
        )
        for listed in list_schema(adapter._query, catalog, schema)
    ]
