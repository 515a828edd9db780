"""Which module refreshes which view class.

Every view-class module exposes ``refresh_statement(view, view_relation, marked, view_types,
branch, view_rows)`` returning a :class:`RefreshStatement` (its writes: one atomic commit on the
view) or None when nothing is marked. ``view_types`` maps the stored table's columns to their
Spark types; ``branch`` names the write branch a refresh of several writes stages them on;
``view_rows``: the view's rows when it may be rewritten whole (None: it may not, e.g. a branch of
a UNION ALL, whose writes are combined).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from importlib import import_module

from dbt_incremental_mv.analysis import ViewClass, ViewDefinition
from dbt_incremental_mv.refresh.marked import MarkedLog
from dbt_incremental_mv.refresh.statement import WRITE_BRANCH, RefreshStatement

# module (in dbt_incremental_mv.refresh) of each fast-refreshable view class
MODULES: dict[ViewClass, str] = {
    ViewClass.JOIN: "join_view",
    ViewClass.OUTER_JOIN: "outer_join_view",
    ViewClass.AGGREGATE: "aggregate_view",
    ViewClass.UNION_ALL: "union_view",
}

Refresher = Callable[[ViewDefinition, str, Mapping[str, MarkedLog], Mapping[str, str], str, "int | None"], "RefreshStatement | None"]


def refresher(view_class: ViewClass) -> Refresher | None:
    """The refresh function of a view class, or None when the class cannot be fast refreshed yet."""
    name = MODULES.get(view_class)
    if name is None:
        return None
    try:
        module = import_module(f"dbt_incremental_mv.refresh.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"dbt_incremental_mv.refresh.{name}":
            return None
        raise
    return module.refresh_statement


def blocker(view: ViewDefinition, logged: Mapping[str, Sequence[str]] | None = None) -> str | None:
    """Why this view cannot be fast refreshed by this version, or None.

    ``logged`` maps master relations to the columns their change logs carry; a view-class
    module that reads values from the logs says (in its own ``blocker``) what it misses.
    """
    if refresher(view.view_class) is None:
        return f"fast refresh of {view.view_class.value} views is not available yet"
    module = import_module(f"dbt_incremental_mv.refresh.{MODULES[view.view_class]}")
    check = getattr(module, "blocker", None)
    return check(view, logged or {}) if check is not None else None


def refresh_statement(
    view: ViewDefinition, view_relation: str, marked: Mapping[str, MarkedLog], view_types: Mapping[str, str],
    branch: str = WRITE_BRANCH,
    view_rows: int | None = None,
) -> RefreshStatement | None:
    function = refresher(view.view_class)
    if function is None:
        raise ValueError(f"fast refresh of {view.view_class.value} views is not available")
    return function(view, view_relation, marked, view_types, branch, view_rows)
