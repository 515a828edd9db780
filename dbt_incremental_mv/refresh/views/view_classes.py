"""Which module refreshes which view class: the classes of one query (branch_classes.py),
UNION ALL, whose branches are each one of those (union_view.py), and the views recomputed by
window partition: the top rows of each (RANKED), rows carrying windows (WINDOWED), stacked queries over
one master partitioned alike (PER_PARTITION) (ranked_view.py). See branch_classes.py for the
interface every view-class module exposes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dbt_incremental_mv.analysis import ViewClass, ViewDefinition
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.views import ranked_view, union_view
from dbt_incremental_mv.refresh.views.branch_classes import (
    BRANCH_CLASSES,
    ViewClassModule,
    blocker_of,
    crossing_applier,
    statement_of,
)
from dbt_incremental_mv.refresh.views.statement import WRITE_BRANCH, CrossedRows, RefreshStatement

CLASSES: dict[ViewClass, ViewClassModule] = {
    **BRANCH_CLASSES,
    ViewClass.UNION_ALL: ViewClassModule(
        union_view.refresh_statement, union_view.blocker, union_view.with_crossed_rows, union_view.applies_crossed_rows
    ),
    ViewClass.RANKED: ViewClassModule(
        ranked_view.refresh_statement, ranked_view.blocker, ranked_view.with_crossed_rows
    ),
    ViewClass.WINDOWED: ViewClassModule(
        ranked_view.refresh_statement, ranked_view.blocker, ranked_view.with_crossed_rows
    ),
    ViewClass.PER_PARTITION: ViewClassModule(
        ranked_view.refresh_statement, ranked_view.blocker, ranked_view.with_crossed_rows
    ),
}


def applies_crossed_rows(view: ViewDefinition) -> bool:
    """Whether the view's class applies the rows its filters by the time moved across as changes
    (else a refresh that finds some recomputes the view)."""
    return crossing_applier(CLASSES, view) is not None


def with_crossed_rows(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    statement: RefreshStatement | None,
    crossed: CrossedRows,
    view_types: Mapping[str, str],
    branch: str = WRITE_BRANCH,
) -> RefreshStatement:
    """``statement`` (the marked changes' writes, None: none) with the rows that ``crossed`` the
    view's time boundary applied too."""
    applier = crossing_applier(CLASSES, view)
    assert applier is not None, "a class that applies crossed rows (applies_crossed_rows)"
    return applier(view, view_relation, marked, statement, crossed, view_types, branch)


def blocker(view: ViewDefinition, logged: Mapping[str, Sequence[str]] | None = None) -> str | None:
    """Why this view cannot be fast refreshed by this version, or None.

    ``logged`` maps master relations to the columns their change logs carry; a view-class
    module that reads values from the logs says (in its own ``blocker``) what it misses.
    """
    return blocker_of(CLASSES, view, logged)


def refresh_statement(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    view_types: Mapping[str, str],
    branch: str = WRITE_BRANCH,
    view_rows: int | None = None,
    view_snapshot: int | None = None,
) -> RefreshStatement | None:
    return statement_of(CLASSES, view, view_relation, marked, view_types, branch, view_rows, view_snapshot)
