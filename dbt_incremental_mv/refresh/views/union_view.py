"""Fast refresh of UNION ALL views (ViewClass.UNION_ALL, analysis/union.py): branch by branch,
in one DELETE and one INSERT.

Each branch whose masters changed is refreshed by its own class's module, on its own rows only
(a join branch's hidden keys are NULL on other branches' rows; an aggregate branch groups by
``_mv_branch``). The writes of those modules are not run as they are: every module's INSERT reads
the view as it was (``main``), the masters and its cached views, never what its DELETE left on
the write branch, so the branches' writes combine into

- one DELETE whose condition is the OR of the branches' DELETE conditions, and
- one INSERT of the branches' new rows, UNION ALL-ed, each laid out as the stored columns (NULL
  for the other branches' hidden columns),

published as one commit like any view's (two writes on the write branch, or one on ``main``).
So a UNION ALL view of two changed branches costs what one view does, not twice its statements,
and the INSERT's commit holds exactly the rows inserted (what a view keeping its own log reads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.analysis.render import branch_rows
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.views.branch_classes import BRANCH_CLASSES, blocker_of, crossing_applier, statement_of
from dbt_incremental_mv.refresh.views.statement import (
    WRITE_BRANCH,
    CrossedRows,
    RefreshStatement,
    Write,
    WriteKind,
    branch_target,
    delete_write,
    rebalanced,
    refresh_writes,
)
from dbt_incremental_mv.sql_text import idents, relation


def blocker(view: ViewDefinition, logged: Mapping[str, Sequence[str]]) -> str | None:
    """Why a branch cannot be fast refreshed (the first one), or None."""
    for number, branch in enumerate(view.branches, start=1):
        reason = blocker_of(BRANCH_CLASSES, branch, logged)
        if reason is not None:
            return f"UNION ALL branch {number}: {reason}"
    return None


def refresh_statement(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    view_types: Mapping[str, str] | None = None,
    branch: str = WRITE_BRANCH,
    view_rows: int | None = None,  # (not used: the view is never rewritten whole)
    *,
    view_snapshot: int | None = None,  # (not used: nothing is read from the view's own rows)
) -> RefreshStatement | None:
    """The writes that apply the marked changes to every branch they touch, or None."""
    return _statement(view, view_relation, marked, view_types or {}, branch, None)


def applies_crossed_rows(view: ViewDefinition) -> bool:
    """Whether every branch's class applies the rows the time moved across as changes in writes
    this module combines (every branch class does: join, outer join, aggregate)."""
    return all(crossing_applier(BRANCH_CLASSES, part) is not None for part in view.branches)


def with_crossed_rows(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    statement: RefreshStatement | None,
    crossing: CrossedRows,
    view_types: Mapping[str, str],
    branch: str = WRITE_BRANCH,
) -> RefreshStatement:
    """The writes that apply the marked changes and the rows the time moved across (by alias: each
    names the branch it is in) to every branch they touch, in place of ``statement``: each branch
    with crossed rows by its class's with_crossed_rows, combined as refresh_statement's are."""
    made = _statement(view, view_relation, marked, view_types, branch, crossing)
    assert made is not None  # (rows crossed)
    return made


def _statement(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    view_types: Mapping[str, str],
    branch: str,
    crossing: CrossedRows | None,
) -> RefreshStatement | None:
    parts: list[tuple[int, ViewDefinition, RefreshStatement]] = []
    skipped: list[str] = []
    for number, part in enumerate(view.branches, start=1):
        # (each branch's cached views are its own: their names carry the branch's number)
        own = f"{branch}_{number}"
        statement = statement_of(BRANCH_CLASSES, part, view_relation, marked, view_types, own)
        aliases = {o.alias for o in part.occurrences}
        crossed = {alias: rows for alias, rows in (crossing.rows if crossing else {}).items() if alias in aliases}
        if crossing is not None and crossed:
            applier = crossing_applier(BRANCH_CLASSES, part)
            assert applier is not None, "a branch class that applies crossed rows (applies_crossed_rows)"
            filters = tuple(f for f in crossing.filters if f.alias in aliases)
            statement = applier(part, view_relation, marked, statement, CrossedRows(crossed, filters), view_types, own)
        if statement is None:
            skipped.append(f"branch {number}")
            continue
        _check_combinable(number, statement)
        parts.append((number, part, statement))
    if not parts:
        return None
    deletes = [s.deleted for _, _, s in parts if s.deleted is not None]
    inserts = [
        branch_rows(number, part, s.inserted, view.stored_columns, tuple(o.name for o in view.outputs), view_types)
        for number, part, s in parts
        if s.inserted is not None
    ]
    target = branch_target(view_relation, branch) if deletes and inserts else relation(view_relation)
    writes = []
    deleted = "\n   or ".join(f"({d})" for d in deletes) if deletes else None
    if deleted is not None:
        writes.append(delete_write(target, deleted, "`_mv_v`"))
    inserted = "\nunion all\n".join(inserts) if inserts else None
    if inserted is not None:
        # (rebalanced: each branch's rows come from its own scans and cached views, a file per task)
        insert = f"insert into {target} ({idents(view.stored_columns)})\n{rebalanced(inserted)}"
        writes.append(Write(WriteKind.INSERT, insert))
    touched = [s.touched for _, _, s in parts]
    stats = [(number, s) for number, _, s in parts if s.stats_sql is not None]
    return refresh_writes(
        branch,
        writes,
        tuple(f"branch {number}: {step}" for number, _, s in parts for step in s.steps_run),
        tuple(skipped) + tuple(f"branch {number}: {step}" for number, _, s in parts for step in s.steps_skipped),
        _stats_sql(stats),
        tuple(f"branch {number} {label}" for number, s in stats for label in s.stats_labels),
        tuple(c for _, _, s in parts for c in s.cached),
        touched=None if any(t is None for t in touched) else "\n   or ".join(f"({t})" for t in touched),
        deleted=deleted,
        inserted=inserted,
    )


def _check_combinable(number: int, statement: RefreshStatement) -> None:
    """A branch's writes are DELETEs (their condition known as one: a join branch splits it in
    several statements when some keys are literals and others read from a log) then at most one
    INSERT (its query known); the view's one DELETE and one INSERT combine those of its branches."""
    kinds = [w.kind for w in statement.writes]
    deletes = kinds.count(WriteKind.DELETE)
    known = (statement.deleted is not None) == (deletes > 0) and (statement.inserted is not None) == (
        WriteKind.INSERT in kinds
    )
    if not kinds or kinds[deletes:] not in ([], [WriteKind.INSERT]) or not known:
        raise ValueError(f"UNION ALL branch {number}: its writes ({', '.join(kinds)}) cannot be combined")


def _stats_sql(stats: list[tuple[int, RefreshStatement]]) -> str | None:
    """One row of every branch's counts, side by side."""
    if not stats:
        return None
    return "select * from " + "\ncross join ".join(f"(\n{s.stats_sql}\n) as `_mv_s{number}`" for number, s in stats)
