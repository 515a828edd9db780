"""dbt's relation listing (adapter/listing.py) against a fake SQL endpoint: which statements it
issues, what it makes of their rows, and when it leaves the listing to dbt-spark."""

import pytest
from dbt.adapters.spark.relation import SparkRelation
from dbt_common.exceptions import DbtRuntimeError

from dbt_incremental_mv.adapter.listing import ICEBERG_CATALOG, ListingCatalog, list_relations

HADOOP = {"spark.sql.catalog.spark_catalog": ICEBERG_CATALOG, "spark.sql.defaultCatalog": "spark_catalog"}


class FakeAdapter:
    """The parts of SparkMVAdapter the listing uses: ``_query`` (rows of one statement),
    ``listing_catalog`` and ``Relation``; the fake answers from ``settings`` and ``schemas`` and records every statement."""

    Relation = SparkRelation

    def __init__(self, settings, schemas, views=None, views_error=None):
        self.settings = settings
        self.schemas = schemas  # schema -> table names
        self.views = views or {}  # schema -> view names
        self.views_error = views_error
        self.statements = []
        self.fallbacks = []
        self.listing_catalog = ListingCatalog(self._query)

    def _query(self, sql):
        self.statements.append(sql)
        words = sql.split()
        if words[0] == "set":
            return [(words[1], self.settings.get(words[1], "<undefined>"))]
        schema = words[-1].strip("`")
        if words[:2] == ["show", "tables"]:
            if schema not in self.schemas:
                raise DbtRuntimeError(
                    f"org.apache.iceberg.exceptions.NoSuchNamespaceException: Namespace does not exist: {schema}"
                )
            return [(schema, name, False) for name in self.schemas[schema]] + [("", "tmp_view", True)]
        if words[:2] == ["show", "views"]:
            if self.views_error:
                raise DbtRuntimeError(self.views_error)
            return [(schema, name, False) for name in self.views.get(schema, [])] + [("", "tmp_view", True)]
        raise AssertionError(f"unexpected statement: {sql}")

    def fallback(self, schema_relation):
        self.fallbacks.append(schema_relation.schema)
        return ["dbt-spark's listing"]

    def list(self, schema):
        return list_relations(self, SparkRelation.create(schema=schema), self.fallback)


def test_one_show_tables_per_schema_and_the_catalog_read_once():
    adapter = FakeAdapter(HADOOP, {"shop": [f"t{i}" for i in range(50)], "staging": ["s"]})

    shop = adapter.list("shop")
    staging = adapter.list("staging")

    assert adapter.statements == [
        "set spark.sql.defaultCatalog",
        "set spark.sql.catalog.spark_catalog",
        "show tables in `shop`",
        "show views in `shop`",
        "show tables in `staging`",
        "show views in `staging`",
    ]
    assert [r.identifier for r in shop] == [f"t{i}" for i in range(50)]  # no temporary view
    assert [r.render() for r in staging] == ["staging.s"]
    assert not adapter.fallbacks


def test_every_table_of_an_iceberg_spark_catalog_is_an_iceberg_table():
    relation = FakeAdapter(HADOOP, {"shop": ["orders"]}).list("shop")[0]
    assert relation.type == "table" and relation.is_table
    assert relation.is_iceberg is True and relation.is_delta is False and relation.is_hudi is False
    # what dbt-spark's macros and relation checks read from describe extended
    assert "Provider: iceberg\n" in relation.information
    assert "Type: MANAGED\n" in relation.information
    assert "Type: VIEW" not in relation.information


def test_views_are_listed_as_views():
    # Iceberg's SparkCatalog lists views only in `show views`, never in `show tables`
    adapter = FakeAdapter(HADOOP, {"shop": ["orders"]}, views={"shop": ["recent_orders"]})
    relations = {r.identifier: r for r in adapter.list("shop")}
    assert set(relations) == {"orders", "recent_orders"}
    view = relations["recent_orders"]
    assert view.type == "view" and view.is_view
    assert not view.is_iceberg
    assert "Type: VIEW" in view.information and "Provider: iceberg" not in view.information
    assert relations["orders"].type == "table"


def test_a_name_listed_as_table_and_view_is_a_view():
    relations = FakeAdapter(HADOOP, {"shop": ["v"]}, views={"shop": ["v"]}).list("shop")
    assert [(r.identifier, str(r.type)) for r in relations] == [("v", "view")]


def test_a_catalog_that_refuses_show_views_has_no_views():
    adapter = FakeAdapter(HADOOP, {"shop": ["orders"]}, views_error="Listing views is not supported by catalog")
    relations = adapter.list("shop")
    assert [(r.identifier, str(r.type)) for r in relations] == [("orders", "table")]


def test_a_missing_schema_has_no_relations():
    adapter = FakeAdapter(HADOOP, {})
    assert adapter.list("nowhere") == []
    assert adapter.statements[-1] == "show tables in `nowhere`"  # no views probe after that


def test_any_other_error_is_raised():
    class Broken(FakeAdapter):
        def _query(self, sql):
            if sql.startswith("show tables"):
                raise DbtRuntimeError("Permission denied")
            return super()._query(sql)

    with pytest.raises(DbtRuntimeError, match="Permission denied"):
        Broken(HADOOP, {"shop": []}).list("shop")


def test_the_schema_is_quoted():
    adapter = FakeAdapter(HADOOP, {"we`ird": ["t"]})
    adapter.list("we`ird")
    assert "show tables in `we``ird`" in adapter.statements


@pytest.mark.parametrize(
    "settings",
    [
        {},  # Spark's own session catalog (Hive or in-memory): parquet, Delta, Hive tables
        # Iceberg's SparkSessionCatalog also holds the session catalog's non-Iceberg tables
        {"spark.sql.catalog.spark_catalog": "org.apache.iceberg.spark.SparkSessionCatalog"},
        {"spark.sql.catalog.spark_catalog": "io.delta.sql.DeltaCatalog"},
        # two-part names resolve in the default catalog, whatever spark_catalog is
        {**HADOOP, "spark.sql.defaultCatalog": "other"},
    ],
)
def test_any_other_catalog_falls_back_to_dbt_spark(settings):
    adapter = FakeAdapter(settings, {"shop": ["orders"]})
    assert adapter.list("shop") == ["dbt-spark's listing"]
    assert adapter.list("staging") == ["dbt-spark's listing"]
    assert adapter.fallbacks == ["shop", "staging"]
    assert all(s.startswith("set ") for s in adapter.statements)  # only the catalog check...
    assert len(adapter.statements) == 2  # ...once


def test_the_default_catalog_is_the_one_checked():
    adapter = FakeAdapter(
        {"spark.sql.defaultCatalog": "lake", "spark.sql.catalog.lake": ICEBERG_CATALOG}, {"shop": ["orders"]}
    )
    relation = adapter.list("shop")[0]
    assert adapter.statements[:2] == ["set spark.sql.defaultCatalog", "set spark.sql.catalog.lake"]
    assert relation.is_iceberg and "Name: lake.shop.orders" in relation.information


def test_a_refused_setting_falls_back_to_dbt_spark():
    class NoSet(FakeAdapter):
        def _query(self, sql):
            if sql.startswith("set "):
                raise DbtRuntimeError("[CONFIG_NOT_AVAILABLE] Configuration spark.sql.defaultCatalog is not available.")
            return super()._query(sql)

    adapter = NoSet(HADOOP, {"shop": ["orders"]})
    assert adapter.list("shop") == ["dbt-spark's listing"]


def test_each_adapter_reads_its_own_catalog():
    first, second = FakeAdapter(HADOOP, {"shop": ["a"]}), FakeAdapter({}, {"shop": ["a"]})
    assert first.list("shop")[0].is_iceberg
    assert second.list("shop") == ["dbt-spark's listing"]
