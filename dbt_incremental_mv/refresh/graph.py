"""The dbt graph, as a refresh reads it: which relations a model reads, which views read a master."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def relation_name(node: Mapping[str, Any]) -> str:
    name = node.get("identifier") or node.get("alias") or node["name"]
    return f"{node['schema']}.{name}".lower()


READ_TYPES = ("model", "seed", "snapshot", "source")


def is_ephemeral(node: Mapping[str, Any]) -> bool:
    """An ephemeral model: dbt inlines it as a CTE; it has no relation."""
    return node.get("resource_type") == "model" and (node.get("config") or {}).get("materialized") == "ephemeral"


def read_nodes(model: Mapping[str, Any], graph: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The nodes whose relations a model reads through ref() and source(). An ephemeral model has
    no relation (dbt inlines it as a CTE): what it reads is read instead, through any depth."""
    found = read_nodes_by_id(model, graph)
    return [found[unique_id] for unique_id in sorted(found)]


def read_nodes_by_id(model: Mapping[str, Any], graph: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """read_nodes, by their unique ids."""
    nodes = {**graph.get("nodes", {}), **graph.get("sources", {})}
    found: dict[str, Mapping[str, Any]] = {}
    pending = list((model.get("depends_on") or {}).get("nodes", []))
    seen: set[str] = set()
    while pending:
        unique_id = pending.pop()
        if unique_id in seen:
            continue
        seen.add(unique_id)
        node = nodes.get(unique_id)
        if node is None or node.get("resource_type") not in READ_TYPES:
            continue
        if is_ephemeral(node):
            pending.extend((node.get("depends_on") or {}).get("nodes", []))
            continue
        found[unique_id] = node
    return found


def dependency_relations(model: Mapping[str, Any], graph: Mapping[str, Any]) -> list[str]:
    """The relations a model reads (ephemeral models' included), sorted."""
    return sorted({relation_name(node) for node in read_nodes(model, graph)})


def dependency_names(model: Mapping[str, Any], graph: Mapping[str, Any]) -> dict[str, str]:
    """The relations the model reads (as dependency_relations), each with the name the user
    writes it by: ``source_name.table_name`` for a source, the node's name for a model or seed."""
    names = {}
    for node in read_nodes(model, graph):
        written = f"{node['source_name']}.{node['name']}" if node["resource_type"] == "source" else node["name"]
        names[relation_name(node)] = written
    return dict(sorted(names.items()))


def view_consumers(graph: Mapping[str, Any], master_relation: str) -> list[str]:
    """Relations of every fast_refresh model that reads ``master_relation``."""
    consumers = []
    for node in graph.get("nodes", {}).values():
        if node.get("resource_type") != "model" or (node.get("config") or {}).get("materialized") != "fast_refresh":
            continue
        if master_relation in dependency_relations(node, graph):
            consumers.append(relation_name(node))
    return sorted(consumers)


def model_node(graph: Mapping[str, Any], view_relation: str) -> Mapping[str, Any] | None:
    """The model whose relation is ``view_relation``, or None."""
    return next(
        (
            n
            for n in graph.get("nodes", {}).values()
            if n.get("resource_type") == "model" and relation_name(n) == view_relation
        ),
        None,
    )
