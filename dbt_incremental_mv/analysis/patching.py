"""Dimension updates patched in place: when a join view's rows of an updated master row can be
rewritten from the view itself instead of from the other masters.

Oracle deletes and re-inserts a changed row's whole "slice" of a join view, and the INS step of a
changed dimension row (a customer) finds its slice in the facts (every order and line item of
that customer): with the facts ordered by their own keys, that is a scan of them whole for any
number of changed customers. Most dimension changes are updates that keep the row in the view
and change an attribute (a name, an address): its partners in the other masters are the same
rows before and after, so its new slice is its old slice, read from the view, with the master's
columns taken from the new row. SQL Server maintains an indexed view through the view's own
index in the same way; here the view's rows of the updated keys are read from the view's
snapshot before the refresh.

A master is patched in a view when it is a dimension whose partners are scattered in another
master (a customer's orders among the orders; not an order's line items, which lie together in
the line items' key order and are found by their keys' ranges) and:

- the view is an inner join of two masters or more (ViewClass.JOIN), the master read once;
- every visible column reads the master's columns alone or none of them (a column mixing them,
  ``c.discount * o.amount``, would need the other masters' values, which the view may not keep);
- every condition reading the master's columns is a filter of its rows alone that its change
  log's images are tested by (analysis/relevance.py: an update whose before or after image fails
  one is then no update of the view's rows, and is not patched), or an equality of one of its
  columns with another master's expression (its *join columns*).

An update is then patched when its key has exactly one net before image and one net after image
in the view's marked changes (both pass the filters: the others were dropped) that agree on the
join columns: the same partners joined it before and after. The mark step finds those keys
(logs/sql.py ``KeyProbe.patch_by``); the refresh reads the view's rows of them when every key of
the master with an after image is one (refresh/views/join_view.py: otherwise its INS step reads the
facts anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dbt_incremental_mv.analysis.links import KeyLink, key_links
from dbt_incremental_mv.analysis.model import HiddenPurpose, ViewClass, ViewDefinition
from dbt_incremental_mv.analysis.relevance import occurrence_filters
from dbt_incremental_mv.analysis.resolved import split_conjuncts, unparenthesized


@dataclass(frozen=True)
class Patching:
    """How a view patches one master's updates in place."""

    alias: str  # the master's occurrence
    join_columns: tuple[str, ...]  # its join columns outside its key, in name order: an update's images agree on them
    link: KeyLink  # the first by which another master holds its key, scattered there (``_scattering_link``)
    filters: tuple[exp.Expr, ...]  # its filters, which its log's images are tested by (analysis/relevance.py)


def patching(view: ViewDefinition, master: str) -> Patching | None:
    """How ``view`` patches ``master``'s updates in place, or None when it does not: a master read
    once, a dimension whose rows' partners are scattered in another master (where its INS step
    would read that master whole), whose updates can be patched (see the module's docstring)."""
    if view.view_class is not ViewClass.JOIN or len(view.occurrences) < 2 or view.null_supplying:
        return None
    found = [o for o in view.occurrences if o.master.name == master]
    if len(found) != 1 or not found[0].master.key:
        return None
    alias = found[0].alias
    link = _scattering_link(view, alias)
    if link is None:
        return None
    filters = next((f for o, f in occurrence_filters(view) if o.alias == alias), None)
    columns = _join_columns(view, alias, filters or [])
    return Patching(alias, columns, link, tuple(filters or ())) if columns is not None else None


def _scattering_link(view: ViewDefinition, alias: str) -> KeyLink | None:
    """The first inner key link (analysis/links.py) by which another master holds ``alias``'s key
    in columns that do not begin its own key, or None: a customer's orders are scattered among the
    orders (kept in order of their keys), where an order's line items (``l_orderkey`` begins their
    key) lie together, found by the ranges of their keys. A key of ``alias`` that no row of that
    master holds is in no view row."""
    for link in key_links(view):
        if link.source != alias or not link.inner:
            continue
        target_key = tuple(k.casefold() for k in view.occurrence(link.target).master.key)
        if tuple(c.casefold() for c in link.columns) != target_key[: len(link.columns)]:
            return link
    return None


def _join_columns(view: ViewDefinition, alias: str, filters: list[exp.Expr]) -> tuple[str, ...] | None:
    """The join columns of occurrence ``alias`` outside its key, in name order, or None when its
    updates cannot be patched (see the module's docstring; ``filters``: its filters, which its
    log's images are tested by)."""
    occurrence = view.occurrence(alias)
    key = {k.casefold() for k in occurrence.master.key}
    if {k.casefold() for k in view.key_columns_by_source(alias)} != key:
        return None
    if any(h.purpose is not HiddenPurpose.ROW_KEY for h in view.hidden_columns):
        return None
    for output in view.outputs:
        tables = {c.table for c in output.expression.find_all(exp.Column)}
        if alias in tables and len(tables) > 1:
            return None
    joined: set[str] = set()
    conjuncts = list(view.where_conjuncts)
    for step in view.joins:
        conjuncts.extend(split_conjuncts(step.condition))
    for conjunct in conjuncts:
        tables = {c.table for c in conjunct.find_all(exp.Column)}
        if alias not in tables:
            continue
        if tables == {alias}:
            if not any(conjunct is f or conjunct == f for f in filters):
                return None  # a filter the images are not tested by
            continue
        column = _joined_column(conjunct, alias)
        if column is None:
            return None
        joined.add(column)
    return tuple(sorted((c for c in joined if c.casefold() not in key), key=str.casefold))


def _joined_column(conjunct: exp.Expr, alias: str) -> str | None:
    """The column of ``alias`` that ``conjunct`` equates with an expression over the others."""
    node = unparenthesized(conjunct)
    if not isinstance(node, (exp.EQ, exp.NullSafeEQ)):
        return None
    for mine, other in ((node.this, node.expression), (node.expression, node.this)):
        if (
            isinstance(mine, exp.Column)
            and mine.table == alias
            and all(c.table != alias for c in other.find_all(exp.Column))
        ):
            return mine.name
    return None
