"""The view classes of one query over joined masters (join, outer join, aggregate): what a view
of one SELECT is, and what each branch of a UNION ALL view is (union_view.py dispatches its
branches here; view_classes.py adds UNION ALL itself).

Every view-class module exposes the same two functions, typed below: ``refresh_statement(view,
view_relation, marked, view_types, branch, view_rows, *, view_snapshot)`` returning a :class:`RefreshStatement` (its
writes: one atomic commit on the view) or None when nothing is marked, and optionally
``blocker(view, logged)``: why the view cannot be fast refreshed with these logs, or None, and
``with_crossed_rows(view, view_relation, marked, statement, crossed, view_types, branch)``: the
statement that also applies the rows its filters by the time moved across (refresh/phases/clock.py;
a class without it, or whose ``applies_crossed_rows(view)`` is False, is recomputed when rows
crossed).
``view_types`` maps the stored table's columns to their Spark types; ``branch`` names the write
branch a refresh of several writes stages them on; ``view_rows``: the view's rows when it may be
rewritten whole (None: it may not, e.g. a branch of a UNION ALL, whose writes are combined);
``view_snapshot``: the view snapshot the refresh read, from which a class may read the view's own
rows (None: it may not, e.g. a branch of a UNION ALL).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from dbt_incremental_mv.analysis import ViewClass, ViewDefinition
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.views import aggregate_view, join_view, outer_join_view
from dbt_incremental_mv.refresh.views.statement import CrossedRows, RefreshStatement


class Refresher(Protocol):
    def __call__(
        self,
        view: ViewDefinition,
        view_relation: str,
        marked: Mapping[str, MarkedLog],
        view_types: Mapping[str, str],
        branch: str,
        view_rows: int | None,
        *,
        view_snapshot: int | None = None,
    ) -> RefreshStatement | None: ...


class Blocker(Protocol):
    def __call__(self, view: ViewDefinition, logged: Mapping[str, Sequence[str]]) -> str | None: ...


class CrossedRowsApplier(Protocol):
    def __call__(
        self,
        view: ViewDefinition,
        view_relation: str,
        marked: Mapping[str, MarkedLog],
        statement: RefreshStatement | None,
        crossing: CrossedRows,
        view_types: Mapping[str, str],
        branch: str,
    ) -> RefreshStatement: ...


@dataclass(frozen=True)
class ViewClassModule:
    """What one view class's module gives the refresh."""

    refresh_statement: Refresher
    blocker: Blocker | None = None  # None: every view of the class can be fast refreshed
    with_crossed_rows: CrossedRowsApplier | None = None  # None: rows the time moved across recompute it
    applies_crossed_rows: Callable[[ViewDefinition], bool] = lambda view: True  # (of a view of the class)


BRANCH_CLASSES: dict[ViewClass, ViewClassModule] = {
    ViewClass.JOIN: ViewClassModule(join_view.refresh_statement, with_crossed_rows=join_view.with_crossed_rows),
    ViewClass.OUTER_JOIN: ViewClassModule(
        outer_join_view.refresh_statement, outer_join_view.blocker, outer_join_view.with_crossed_rows
    ),
    ViewClass.AGGREGATE: ViewClassModule(
        aggregate_view.refresh_statement,
        aggregate_view.blocker,
        aggregate_view.with_crossed_rows,
    ),
}


def blocker_of(
    classes: Mapping[ViewClass, ViewClassModule],
    view: ViewDefinition,
    logged: Mapping[str, Sequence[str]] | None = None,
) -> str | None:
    """Why ``view`` cannot be fast refreshed by ``classes`` (its class missing, or its module's
    blocker: ``logged`` maps master relations to the columns their logs carry), or None."""
    module = classes.get(view.view_class)
    if module is None:
        return f"fast refresh of {view.view_class.value} views is not available yet"
    return module.blocker(view, logged or {}) if module.blocker is not None else None


def crossing_applier(classes: Mapping[ViewClass, ViewClassModule], view: ViewDefinition) -> CrossedRowsApplier | None:
    """What of ``classes`` applies the rows ``view``'s filters by the time moved across as changes
    (its class's with_crossed_rows, where it applies to this view), or None: the view is
    recomputed when rows crossed."""
    module = classes.get(view.view_class)
    if module is None or module.with_crossed_rows is None or not module.applies_crossed_rows(view):
        return None
    return module.with_crossed_rows


def statement_of(
    classes: Mapping[ViewClass, ViewClassModule],
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    view_types: Mapping[str, str],
    branch: str,
    view_rows: int | None = None,
    view_snapshot: int | None = None,
) -> RefreshStatement | None:
    """The statement of ``view``'s class module in ``classes``."""
    module = classes.get(view.view_class)
    if module is None:
        raise ValueError(f"fast refresh of {view.view_class.value} views is not available")
    return module.refresh_statement(
        view, view_relation, marked, view_types, branch, view_rows, view_snapshot=view_snapshot
    )
