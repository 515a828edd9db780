"""Which rows of a master can take part in a view at all: its filters of that master's rows alone.

A change of a master row that fails them before and after changes nothing in the view: a
``where c.segment = 'BUILDING'`` view is not touched when a customer of another segment changes,
and a ``c join o`` view then need not look for that customer's orders. The refresh's mark step
drops the images that fail them (refresh/phases/mark.py, logs/sql.py ``KeyProbe.relevant``)
before it nets and counts them, as DBSP applies a filter to a delta before it joins it
(``Δσ(R) = σ(ΔR)``); every read of the marked images applies the same predicate.

A master's predicate is the OR, over its occurrences, of the AND of each occurrence's filters;
an occurrence without one makes it TRUE (None: nothing dropped). An occurrence's filters:

- not null-extended: the WHERE conjuncts (inner join conditions are WHERE conjuncts once
  normalized) that read its columns alone;
- null-extended by a LEFT JOIN: the conjuncts of that join's ON that read its columns alone
  (a row failing them matches nothing, as if absent). Its WHERE conjuncts are not filters of its
  rows (a null-extended row may pass them where the row itself fails).

Only deterministic conjuncts without subqueries, aggregates or windows, and not reading the
clock, of JOIN, OUTER_JOIN, AGGREGATE, RANKED and WINDOWED views and UNION ALL views of those (a
ranked or windowed view's WHERE filters the rows before its window: a row failing it is in no
partition; its filters of the ranked rows are not among them). PER_PARTITION views, stacks of
queries over one master read in several places, drop nothing. A column is read as the log holds it: a
type the master's was widened from (an int now a bigint, a narrower decimal) holds the same value,
so a filter gives the same answer on it."""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

from dbt_incremental_mv.analysis.clock import is_clock
from dbt_incremental_mv.analysis.functions import is_nondeterministic
from dbt_incremental_mv.analysis.model import JoinKind, MasterOccurrence, ViewClass, ViewDefinition
from dbt_incremental_mv.analysis.render import render_expression

FILTERED_CLASSES = frozenset(
    {ViewClass.JOIN, ViewClass.OUTER_JOIN, ViewClass.AGGREGATE, ViewClass.RANKED, ViewClass.WINDOWED}
)


def relevant_rows(view: ViewDefinition, master: str) -> str | None:
    """Spark SQL over ``master``'s columns (unqualified, as a change log holds them) that its rows
    meet when they can take part in ``view``; None when any row can."""
    found: list[exp.Expr] = []
    for occurrence, filters in _occurrence_filters(view):
        if occurrence.master.name != master:
            continue
        if filters is None or not filters:
            return None
        found.append(exp.and_(*(_unqualified(f) for f in filters)) if len(filters) > 1 else _unqualified(filters[0]))
    if not found:
        return None
    predicate = found[0] if len(found) == 1 else exp.or_(*(exp.paren(f, copy=False) for f in found))
    return render_expression(predicate)


def _occurrence_filters(view: ViewDefinition) -> Iterator[tuple[MasterOccurrence, list[exp.Expr] | None]]:
    """Each occurrence of the view (its branches' for UNION ALL) with its filters (None: the view's
    class drops none)."""
    if view.view_class is ViewClass.UNION_ALL:
        for branch in view.branches:
            yield from _occurrence_filters(branch)
        return
    if view.view_class not in FILTERED_CLASSES or view.partition_query is not None:
        for occurrence in view.occurrences:
            yield occurrence, None
        return
    for occurrence in view.occurrences:
        alias = occurrence.alias
        if alias in view.null_supplying:
            own = [
                conjunct
                for step in view.joins
                if step.alias == alias and step.kind is JoinKind.LEFT
                for conjunct in step.residual
            ]
        else:
            own = list(view.where_conjuncts)
        yield occurrence, [c for c in own if _filters(c, alias)]


def _filters(conjunct: exp.Expr, alias: str) -> bool:
    """Whether ``conjunct`` is a filter of ``alias``'s rows alone that a change log's image can be
    tested by: it reads that occurrence's columns only, deterministically, without a subquery,
    an aggregate, a window or the clock."""
    columns = list(conjunct.find_all(exp.Column))
    if not columns or any(c.table != alias for c in columns):
        return False
    if conjunct.find(exp.Subquery, exp.Select, exp.AggFunc, exp.Window, exp.Placeholder) is not None:
        return False
    return not any(is_nondeterministic(node) or is_clock(node) for node in conjunct.walk())


def _unqualified(conjunct: exp.Expr) -> exp.Expr:
    """``conjunct`` over the master's columns by name alone (as its change log names them)."""
    return conjunct.copy().transform(
        lambda node: exp.column(node.name, quoted=True) if isinstance(node, exp.Column) else node
    )
