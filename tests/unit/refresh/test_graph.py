"""Which relations a model reads, as the refresh takes them from the dbt graph."""

from dbt_incremental_mv.refresh.graph import dependency_names, dependency_relations, view_consumers


def _graph():
    def model(name, materialized, *depends, schema="marts"):
        return {
            "resource_type": "model",
            "name": name,
            "schema": schema,
            "alias": name,
            "config": {"materialized": materialized},
            "depends_on": {"nodes": list(depends)},
        }

    nodes = {
        "model.p.stg_orders": model("stg_orders", "ephemeral", "source.p.raw.orders"),
        "model.p.int_orders": model("int_orders", "ephemeral", "model.p.stg_orders"),  # ephemeral over ephemeral
        "model.p.stg_customers": model("stg_customers", "incremental", "source.p.raw.customers", schema="staging"),
        "model.p.customer_orders": model(
            "customer_orders", "fast_refresh", "model.p.int_orders", "model.p.stg_customers", "model.p.stg_orders"
        ),
    }
    sources = {
        f"source.p.raw.{t}": {"resource_type": "source", "source_name": "raw", "name": t, "schema": "raw", "identifier": t}
        for t in ("orders", "customers")
    }
    return {"nodes": nodes, "sources": sources}


def test_an_ephemeral_model_is_read_through_to_what_it_reads():
    graph = _graph()
    view = graph["nodes"]["model.p.customer_orders"]
    assert dependency_relations(view, graph) == ["raw.orders", "staging.stg_customers"]
    assert dependency_names(view, graph) == {"raw.orders": "raw.orders", "staging.stg_customers": "stg_customers"}


def test_a_master_read_through_an_ephemeral_model_has_the_view_as_consumer():
    assert view_consumers(_graph(), "raw.orders") == ["marts.customer_orders"]
