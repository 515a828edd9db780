"""A view maintained in steps: a query the analysis refuses as one view, split into internal
states (analysis/states.py), each refreshed as a fast_refresh view of its own, in order, then the
query over them, which the view is.

A state is a table next to the view, ``<view>__mv_state_<cte>``, keyed by what its shape makes
unique (where that may be NULL, by a column of its own that writes it as a string never NULL,
analysis/states.py STATE_KEY); each of its refreshes logs the rows it changed (mv_log) to
``<view>__mv_state_<cte>__log``,
and the states after it and the view read those changes as any view reads a view. The units are
what the materialization refreshes, one after the other, each as it refreshes any model: the
model's node, its SQL, and a copy of the project's graph in which the states are models and their
logs sources (the view reading the states), so that plan, capture, mark, propagate, publish and
purge run unchanged. The view's commits record its states' relations (bookkeeping.ViewState), so
that whoever purges or captures one of its masters' logs counts what the states consumed.

A crash between units leaves every unit consistent with what it consumed: the next run goes on
from there (a state's log holds what the view has not consumed yet).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbt_incremental_mv.analysis.states import StateSplit, relations_read, with_state_relations
from dbt_incremental_mv.logs.contract import META_KEY
from dbt_incremental_mv.refresh.graph import read_nodes_by_id, relation_name

STATE_INFIX = "__mv_state_"
LOG_SUFFIX = "__log"
# the source_name of the states' change logs in the graph the units read
STATES_SOURCE = "mv_internal_states"
# the key of the view's node, in that graph, that lists its states' relations (in refresh order)
INTERNAL_STATES = "mv_internal_states"
# ... and the one that holds the model's own query (the view stores it: what it must equal)
MODEL_QUERY = "mv_model_query"
# configs of the model a state does not take: its table's layout and contract are the view's
_VIEW_ONLY_CONFIG = (
    "partition_by",
    "clustered_by",
    "buckets",
    "contract",
    "grants",
    "persist_docs",
    "unique_key",
    "indexed_state",
)
# the config of a state's node that lists the columns its table is kept sorted by (State.sort_by)
SORTED_BY = "mv_sorted_by"
# ... and of the view's over an indexed join state: the alias of the dimension it is sorted by
SORTED_BY_OCCURRENCE = "mv_sorted_by_occurrence"


@dataclass(frozen=True)
class Unit:
    """One table the materialization refreshes: ``identifier`` in the view's schema (``relation``:
    ``schema.identifier``), the model node and SQL its refresh reads, and the graph it reads them in."""

    identifier: str
    model: Mapping[str, Any]
    sql: str
    graph: Mapping[str, Any]
    relation: str


def state_identifier(view_identifier: str, state_name: str) -> str:
    """The table of the view's state ``state_name`` (a CTE's name)."""
    return f"{view_identifier}{STATE_INFIX}{state_name}".lower()


def state_log_relation(state_relation: str) -> str:
    """The change log a state's refreshes write."""
    return f"{state_relation}{LOG_SUFFIX}"


def is_state_relation(relation: str) -> bool:
    """Whether ``relation`` (``schema.table``) is named as an internal state is."""
    return STATE_INFIX in relation.rpartition(".")[2]


def model_query(model: Mapping[str, Any]) -> str | None:
    """The model's own query, when ``model`` is the last unit of a view maintained in steps."""
    return model.get(MODEL_QUERY) or None


def sorted_by(model: Mapping[str, Any]) -> tuple[str, ...]:
    """The columns the table of ``model`` is kept sorted by, when it is an indexed join state."""
    return tuple((model.get("config") or {}).get(SORTED_BY) or ())


def sorted_by_occurrence(model: Mapping[str, Any]) -> str | None:
    """The alias of the occurrence the view of ``model`` is sorted by (the dimension of an indexed
    join state), if the split chose one."""
    return (model.get("config") or {}).get(SORTED_BY_OCCURRENCE)


def internal_states(model: Mapping[str, Any]) -> tuple[str, ...]:
    """The relations of the states the view of ``model`` reads, when it is the last unit of a view
    maintained in steps; () otherwise."""
    return tuple(model.get(INTERNAL_STATES) or ())


def units(
    model: Mapping[str, Any], view_relation: str, graph: Mapping[str, Any], split: StateSplit, query: str
) -> tuple[Unit, ...]:
    """The states of ``split`` (of the model's ``query``) then the view, each as the
    materialization refreshes it."""
    schema, _, identifier = view_relation.partition(".")
    package = model.get("package_name") or "mv"
    config = {k: v for k, v in (model.get("config") or {}).items() if k not in _VIEW_ONLY_CONFIG}
    relations = {s.name: f"{schema}.{state_identifier(identifier, s.name)}" for s in split.states}
    read = {relation_name(node): unique_id for unique_id, node in read_nodes_by_id(model, graph).items()}
    nodes = dict(graph.get("nodes", {}))
    sources = dict(graph.get("sources", {}))
    made: list[tuple[str, dict[str, Any], str]] = []
    for state in split.states:
        state_table = state_identifier(identifier, state.name)
        log_key = state.log_key or state.key
        sql = with_state_relations(state.sql, relations)
        node: dict[str, Any] = {
            "resource_type": "model",
            "unique_id": f"model.{package}.{state_table}",
            "name": state_table,
            "alias": state_table,
            "schema": model.get("schema"),
            "database": model.get("database"),
            "package_name": package,
            "config": {
                **config,
                "materialized": "fast_refresh",
                META_KEY: True,
                "unique_key": list(log_key),
                **({SORTED_BY: list(state.sort_by)} if state.sort_by else {}),
            },
            "depends_on": {"nodes": _reads(sql, read)},
            "columns": {},
            "constraints": [],
            "compiled_code": sql,
            "description": f"internal state {state.name} of {model.get('name')} (dbt-incremental-mv)",
        }
        log_table = f"{state_table}{LOG_SUFFIX}"
        log = {
            "resource_type": "source",
            "unique_id": f"source.{package}.{STATES_SOURCE}.{log_table}",
            "source_name": STATES_SOURCE,
            "name": log_table,
            "identifier": log_table,
            "schema": model.get("schema"),
            "database": model.get("database"),
            "package_name": package,
            "meta": {META_KEY: {"master": state_table, "key": list(log_key)}},
            "config": {},
        }
        nodes[node["unique_id"]] = node
        sources[log["unique_id"]] = log
        read[relation_name(node)] = node["unique_id"]
        made.append((state_table, node, sql))
    top_sql = with_state_relations(split.sql, relations)
    top = {
        **model,
        **(
            {"config": {**(model.get("config") or {}), SORTED_BY_OCCURRENCE: split.indexed_alias}}
            if split.indexed_alias
            else {}
        ),
        "depends_on": {**(model.get("depends_on") or {}), "nodes": _reads(top_sql, read)},
        "compiled_code": top_sql,
        INTERNAL_STATES: [relations[s.name] for s in split.states],
        MODEL_QUERY: query,
    }
    nodes[model.get("unique_id") or f"model.{package}.{model.get('name')}"] = top
    copy = {**graph, "nodes": nodes, "sources": sources}
    return (
        *(Unit(table, node, sql, copy, f"{schema}.{table}") for table, node, sql in made),
        Unit(identifier, top, top_sql, copy, view_relation),
    )


def retired_states(previous: Sequence[str], current: Sequence[str]) -> list[str]:
    """The states a view's last commit lists that its next one does not (its query changed, or
    it is no longer maintained in steps): dropped, with their logs, once that commit is published."""
    return sorted(s for s in set(previous) - set(current) if is_state_relation(s))


def _reads(sql: str, read: Mapping[str, str]) -> list[str]:
    """The nodes of the relations ``sql`` reads, among those the model reads and the states."""
    return sorted({read[r] for r in relations_read(sql) if r in read})
