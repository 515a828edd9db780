"""Definition changes: what makes a stored view stale (no Spark)."""

import pytest

from dbt_incremental_mv.config import ConfigError, FastRefreshConfig
from dbt_incremental_mv.definition import definition_change, encode_columns, normalized_sql
from dbt_incremental_mv.refresh.phases.decide import DefinitionChanged, PlanFacts, decide_refresh

SQL = "select o.order_id, c.name\nfrom shop.orders o join shop.customers c on o.customer_id = c.customer_id"
COLUMNS = {"shop.orders": {"order_id": "bigint", "customer_id": "bigint"}, "shop.customers": {"name": "string", "customer_id": "bigint"}}


def test_whitespace_and_comments_do_not_count():
    edited = "-- who ordered what\nselect   o.order_id, c.name /* the name */ from shop.orders o\n join shop.customers c on o.customer_id = c.customer_id"
    assert normalized_sql(edited) == normalized_sql(SQL)
    assert definition_change(SQL, edited, None, None) is None


def test_sql_edit_is_a_change():
    assert definition_change(SQL, SQL.replace("c.name", "c.name as customer"), None, None) == (
        "the model's SQL changed since the view was built"
    )


def test_master_column_changes():
    stored = encode_columns(COLUMNS)
    added = {**COLUMNS, "shop.orders": {**COLUMNS["shop.orders"], "note": "string"}}
    assert definition_change(SQL, SQL, stored, added) is None  # a new column the view does not read
    retyped = {**COLUMNS, "shop.customers": {"name": "int", "customer_id": "bigint"}}
    assert "column name of shop.customers, which the view reads, changed type from string to int" in definition_change(
        SQL, SQL, stored, retyped
    )
    dropped = {**COLUMNS, "shop.orders": {"order_id": "bigint"}}
    assert "column customer_id of shop.orders, which the view reads, was dropped" in definition_change(SQL, SQL, stored, dropped)


def test_a_change_rebuilds_or_fails():
    apply = FastRefreshConfig.from_model_config("v", {"refresh_method": "fast"})
    changed = PlanFacts("table", definition_change="the model's SQL changed since the view was built")
    decision = decide_refresh("v", apply, changed)
    assert decision.action == "build" and "SQL changed" in decision.reason
    fail = FastRefreshConfig.from_model_config("v", {"on_configuration_change": "fail"})
    with pytest.raises(DefinitionChanged, match="on_configuration_change='fail'"):
        decide_refresh("v", fail, changed)
    # --full-refresh rebuilds whatever the setting
    assert decide_refresh("v", fail, PlanFacts("table", True, definition_change="x")).action == "build"


def test_on_configuration_change_values():
    with pytest.raises(ConfigError, match="on_configuration_change='continue'"):
        FastRefreshConfig.from_model_config("v", {"on_configuration_change": "continue"})
