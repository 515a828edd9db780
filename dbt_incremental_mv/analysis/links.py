"""Key links: where a join condition equates one occurrence's columns with another's whole key.

A refresh restricts an occurrence to the keys its log marked (an INS step, an outer join's
slices). A *key link* says that a restriction can move (or be copied) through a join: when the
view joins ``target`` to ``source`` with ``target.c1 = source.k1 AND ...`` covering the whole
declared key of ``source``, every view row in which both are present has
``(target.c1, ...) = (source.k1, ...)``. So:

- on an **inner** join, the rows the view makes of ``source`` restricted to keys ``K`` are the
  rows it makes of ``target`` restricted to ``(c1, ...) IN K``: the INS step of a changed
  dimension can run as a filter on the fact it is joined to, and the INS steps of several
  dimensions of one fact as one filter (one scan of the fact);
- on an **outer** join, restricting ``source`` to ``K`` lets ``target`` be restricted to
  ``(c1, ...) IN K`` as well (its other rows find no partner): the new slices of an outer-join
  view read only the inner rows of the affected anchors.

Only plain column equalities (not null-safe ``<=>``: a NULL would match a NULL) between columns
of the same type qualify, so the ``IN`` compares exactly what the join compares.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dbt_incremental_mv.analysis.model import JoinKind, MasterOccurrence, ViewDefinition


@dataclass(frozen=True)
class KeyLink:
    """``target``'s ``columns`` equal ``source``'s key (in key order) wherever both are present."""

    source: str  # the alias whose key is equated
    target: str  # the alias whose columns hold it
    columns: tuple[str, ...]  # target's columns, one per key column of source
    inner: bool  # the join step that equates them is an inner join


def _type(occurrence: MasterOccurrence, column: str) -> str | None:
    wanted = column.casefold()
    return next((t.casefold() for name, t in occurrence.master.columns if name.casefold() == wanted), None)


def _link(view: ViewDefinition, source: str, target: str, pairs: list[tuple[str, str]], inner: bool) -> KeyLink | None:
    """The link when ``pairs`` ((source column, target column) equalities) cover source's key."""
    source_occurrence, target_occurrence = view.occurrence(source), view.occurrence(target)
    key = source_occurrence.master.key
    columns = []
    for key_column in key:
        partner = next((t for s, t in pairs if s.casefold() == key_column.casefold()), None)
        if partner is None:
            return None
        source_type = _type(source_occurrence, key_column)
        if source_type is None or source_type != _type(target_occurrence, partner):
            return None
        columns.append(partner)
    return KeyLink(source, target, tuple(columns), inner) if key else None


def key_links(view: ViewDefinition) -> tuple[KeyLink, ...]:
    """Every key link of the view's joins, in join order (for each step: the step's occurrence's
    key equated by an earlier occurrence, then the other way round)."""
    links = []
    for step in view.joins:
        by_partner: dict[str, list[tuple[str, str]]] = {}  # earlier alias -> (its column, step's column)
        for pair in step.equi_pairs:
            if pair.null_safe or not isinstance(pair.left, exp.Column) or not isinstance(pair.right, exp.Column):
                continue
            if pair.right.table != step.alias or not pair.left.table:
                continue
            by_partner.setdefault(pair.left.table, []).append((pair.left.name, pair.right.name))
        inner = step.kind is JoinKind.INNER
        for partner, pairs in by_partner.items():
            for link in (
                _link(view, step.alias, partner, [(mine, theirs) for theirs, mine in pairs], inner),
                _link(view, partner, step.alias, pairs, inner),
            ):
                if link is not None:
                    links.append(link)
    return tuple(links)
