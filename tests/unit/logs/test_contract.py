import pytest

from dbt_incremental_mv.logs.contract import (
    LogContractError,
    LogEvolution,
    log_evolution,
    log_specs_from_graph,
    logs_by_master,
    promotable,
    validate_log_columns,
)


def graph(log_meta, extra_sources=()):
    nodes = {
        "seed.shop.orders": {"resource_type": "seed", "name": "orders", "schema": "shop", "alias": "orders"},
        "model.shop.customers": {"resource_type": "model", "name": "customers", "schema": "Shop", "alias": "customers"},
    }
    sources = {
        "source.shop.raw.events": {"source_name": "raw", "name": "events", "schema": "raw", "identifier": "events_v2", "meta": {}},
        "source.shop.logs.mlog_orders": {
            "source_name": "logs", "name": "mlog_orders", "schema": "shop", "identifier": "mlog_orders", "meta": {"mv_log": log_meta},
        },
    }
    for i, (name, meta) in enumerate(extra_sources):
        sources[f"source.shop.logs.x{i}"] = {"source_name": "logs", "name": name, "schema": "shop", "identifier": name, "meta": {"mv_log": meta}}
    return {"nodes": nodes, "sources": sources}


def test_a_log_names_its_master_and_key():
    (spec,) = log_specs_from_graph(graph({"master": "orders", "key": ["Order_Id"], "capture": True}))
    assert spec.log_relation == "shop.mlog_orders"
    assert spec.master_relation == "shop.orders"
    assert spec.key == ("order_id",)
    assert spec.capture is True
    assert spec.source_name == "logs.mlog_orders"


def test_master_may_be_a_source_and_key_a_string():
    (spec,) = log_specs_from_graph(graph({"master": "raw.events", "key": "event_id"}))
    assert spec.master_relation == "raw.events_v2"
    assert spec.key == ("event_id",)
    assert spec.capture is False


def test_meta_in_config_is_read_too():
    g = graph({"master": "orders", "key": ["order_id"]})
    source = g["sources"]["source.shop.logs.mlog_orders"]
    source["config"] = {"meta": source.pop("meta")}
    assert log_specs_from_graph(g)[0].master_relation == "shop.orders"


@pytest.mark.parametrize(
    "meta, message",
    [
        ({"key": ["id"]}, "master is missing"),
        ({"master": "nope", "key": ["id"]}, "matches no model, seed or source"),
        ({"master": "orders"}, "has no declared unique key"),
        ({"master": "orders", "key": []}, "has no declared unique key"),
        ({"master": "orders", "key": ["id"], "capture": "yes"}, "capture must be true or false"),
        ({"master": "orders", "key": ["id"], "keys": ["id"]}, "unknown entries"),
        ("orders", "must be a mapping"),
    ],
)
def test_bad_declarations_are_explained(meta, message):
    with pytest.raises(LogContractError, match=message):
        log_specs_from_graph(graph(meta))


def test_two_logs_for_one_master_are_refused():
    specs = log_specs_from_graph(graph({"master": "orders", "key": ["id"]}, [("mlog_again", {"master": "orders", "key": ["id"]})]))
    with pytest.raises(LogContractError, match="has two change logs"):
        logs_by_master(specs)


MASTER = {"order_id": "bigint", "customer_id": "bigint", "amount": "decimal(10,2)"}
LOG = {"order_id": "bigint", "amount": "decimal(10, 2)", "_mv_op": "string", "_mv_commit": "bigint", "_mv_time": "timestamp"}


def spec():
    return log_specs_from_graph(graph({"master": "orders", "key": ["order_id"]}))[0]


def test_valid_log_returns_logged_columns():
    assert validate_log_columns(spec(), LOG, MASTER, 3) == ["order_id", "amount"]


@pytest.mark.parametrize(
    "log, version, message",
    [
        ({k: v for k, v in LOG.items() if k != "order_id"}, 3, r"key column 'order_id' \(the key from meta.mv_log.key of source 'logs.mlog_orders'\) is missing"),
        ({k: v for k, v in LOG.items() if k != "_mv_op"}, 3, "column '_mv_op' \\(string\\) is missing"),
        ({**LOG, "_mv_commit": "string"}, 3, "'_mv_commit' is string, the contract says bigint"),
        ({**LOG, "amount": "double"}, 3, "'amount' is double but decimal\\(10,2\\) in the master"),
        ({**LOG, "surprise": "int"}, 3, "'surprise' is not a column of the master"),
        (LOG, 2, "format-version 2 table.*SET TBLPROPERTIES"),
        (LOG, None, "format-version \\? table"),
    ],
)
def test_schema_problems_are_named(log, version, message):
    with pytest.raises(LogContractError, match=message):
        validate_log_columns(spec(), log, MASTER, version)


@pytest.mark.parametrize(
    "old, new, in_place",
    [
        ("int", "bigint", True),
        ("float", "double", True),
        ("decimal(10,2)", "decimal(12, 2)", True),
        ("decimal(10,2)", "decimal(12,3)", False),  # Iceberg keeps the scale
        ("decimal(10,2)", "decimal(9,2)", False),
        ("bigint", "int", False),
        ("string", "int", False),
        ("int", "string", False),
    ],
)
def test_type_promotions_are_icebergs(old, new, in_place):
    assert promotable(old, new) is in_place


def test_a_log_that_matches_its_master_needs_no_evolution():
    assert log_evolution(LOG, MASTER) is None
    # a column the master gained is not logged, and needs nothing either
    assert log_evolution(LOG, {**MASTER, "note": "string"}) is None


def test_a_widened_or_dropped_master_column_evolves_the_log_in_place():
    master = {"order_id": "bigint", "amount": "decimal(12,2)"}
    log = {**LOG, "channel": "string"}
    evolution = log_evolution(log, master)
    assert evolution == LogEvolution(dropped=("channel",), widened=(("amount", LOG["amount"], "decimal(12,2)"),))
    assert not evolution.recreate
    assert evolution.describe() == (
        f"column channel dropped; column amount changed type from {LOG['amount']} to decimal(12,2)"
    )
    evolved = evolution.evolved(log)
    assert evolved["amount"] == "decimal(12,2)" and "channel" not in evolved
    assert validate_log_columns(spec(), evolved, master, 3) == ["order_id", "amount"]


def test_a_type_iceberg_cannot_widen_recreates_the_log():
    evolution = log_evolution(LOG, {**MASTER, "amount": "string"})
    assert evolution.recreate and evolution.evolved(LOG) == {}
    assert f"column amount changed type from {LOG['amount']} to string" in evolution.describe()


def _with_master_model(g, **node):
    g["nodes"]["model.shop.customers"].update(node)
    return g


@pytest.mark.parametrize(
    "node, key, origin",
    [
        (
            {"constraints": [{"type": "primary_key", "columns": ["Customer_Id"]}]},
            ("customer_id",),
            "the primary_key constraint of model 'customers'",
        ),
        (
            {"columns": {"customer_id": {"name": "customer_id", "constraints": [{"type": "primary_key"}]}}},
            ("customer_id",),
            "the primary_key constraint on column customer_id of model 'customers'",
        ),
        ({"config": {"unique_key": ["region", "customer_id"]}}, ("region", "customer_id"), "the unique_key of model 'customers'"),
        ({"config": {"unique_key": "customer_id"}}, ("customer_id",), "the unique_key of model 'customers'"),
    ],
)
def test_the_key_may_come_from_the_master_models_own_declaration(node, key, origin):
    g = _with_master_model(graph({"master": "customers"}), resource_type="model", **node)
    (spec,) = log_specs_from_graph(g)
    assert spec.key == key
    assert spec.key_origin == origin


def test_a_key_in_meta_wins_over_the_models_and_messages_say_where_it_is_from():
    g = _with_master_model(graph({"master": "customers", "key": "id"}), config={"unique_key": "customer_id"})
    (spec,) = log_specs_from_graph(g)
    assert spec.key == ("id",) and spec.key_origin == "meta.mv_log.key of source 'logs.mlog_orders'"
    with pytest.raises(LogContractError, match=r"key column 'id' \(the key from meta.mv_log.key of source 'logs.mlog_orders'\) is not a column of the master"):
        validate_log_columns(spec, {"_mv_op": "string", "_mv_commit": "bigint"}, {"customer_id": "bigint"}, 3)


def test_a_master_without_any_declared_key_is_refused_saying_where_to_declare_it():
    with pytest.raises(LogContractError, match="a primary_key constraint, or unique_key"):
        log_specs_from_graph(graph({"master": "customers"}))
