"""Fast refresh of outer-join views (ViewClass.OUTER_JOIN): LEFT and RIGHT joins, mixed with inner
joins, over any number of masters.

**Slices by an anchor.** An *anchor* is an occurrence no outer join null-extends (the first such:
for ``a LEFT JOIN b`` it is ``a``, for ``a RIGHT JOIN b`` it is ``b``). Every view row holds
exactly one anchor row, and restricting the anchor to some keys commutes with the whole query
(the anchor is only ever on the preserved side), so the view is the union, over anchor rows, of
their *slices*: the rows the defining query makes of each. A refresh recomputes the slices of
the anchor keys ``K`` whose slice may have changed:

- a changed anchor row: its own key;
- a changed row of any other occurrence X: the anchor keys of the view rows it is in now (read
  from the view's hidden keys: the *old* slices), and of the rows it makes in the new state (the
  defining query with X restricted to its changed keys, keeping rows where X is not
  null-extended: Spark turns that outer join into an inner one). When X is joined to the anchor
  on the anchor's whole key (``o.customer_id = c.customer_id``), those keys are X's own columns:
  its log's before images hold the old slices' keys and its after images the new ones, so
  neither the view nor the masters are read (when the log carries those columns; else the
  changed rows of X are read, not joined). A key whose anchor row is gone finds no slice.

That covers Oracle's cases in one rule: when the last matching inner row goes, the slice is
recomputed and the outer row remains once, null-extended; when the first match appears, the
null-extended row goes; several inner rows of one slice changing at once are one recomputation;
an update moving an inner row between slices recomputes both. NULL join keys simply never match.

**One commit.** As for inner joins, the refresh is one atomic commit on the view (statement.py):

- only anchor rows inserted: ``INSERT`` their slices; only anchor rows deleted: ``DELETE`` them;
- otherwise a ``DELETE`` of the affected slices' rows on the refresh's write branch, then an
  ``INSERT`` of their new rows staged on it. Neither shuffles the view: the affected anchor
  keys are read from the view's hidden key columns (a scan), computed once into the session's
  cache and broadcast to the DELETE; the new slices are the defining query with the anchor
  restricted to those keys, and every occurrence joined to the anchor on the anchor's whole key
  (``o.customer_id = c.customer_id``: analysis/links.py) restricted to them too: its other rows
  find no anchor, and without the filter Spark reads (and shuffles) all of it for a few slices.
"""

from __future__ import annotations

from collections.abc import Mapping

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.analysis.links import KeyLink, key_links
from dbt_incremental_mv.refresh.marked import MarkedLog
from dbt_incremental_mv.refresh.statement import (
    WRITE_BRANCH, Cached, RefreshStatement, Write, branch_target, broadcast, cached_view, in_changed, refresh_writes,
)
from dbt_incremental_mv.sql_text import ident, idents, relation


def anchor(view: ViewDefinition) -> str:
    """The first occurrence no outer join null-extends (analysis refuses FULL joins)."""
    return next(o.alias for o in view.occurrences if o.alias not in view.null_supplying)


def blocker(view: ViewDefinition, logged: Mapping[str, object]) -> str | None:
    if not any(o.alias not in view.null_supplying for o in view.occurrences):
        return "every occurrence is null-extended by some outer join: no anchor to slice the view by"
    return None


def _among(log: MarkedLog, columns: list[str] | tuple[str, ...], keys_sql: str, marked_only: bool) -> str:
    """``columns`` (holding ``log``'s key) among the keys ``keys_sql`` returns; when they are
    only keys its log marked (``marked_only``), within their range (statement.in_changed)."""
    return in_changed(log, columns, keys_sql) if marked_only else f"({idents(columns)}) in ({broadcast(keys_sql)})"


def _restricted(log: MarkedLog, keys_sql: str, *, marked_only: bool = False) -> str:
    """The master as of its marked snapshot, restricted to the keys ``keys_sql`` returns (see _among)."""
    return f"(select * from {log.master_as_of()} where {_among(log, log.spec.key, keys_sql, marked_only)})"


def _slices(view: ViewDefinition, marked: Mapping[str, MarkedLog], keys_sql: str, *, marked_only: bool = False) -> str:
    """The defining query's slices of the anchor keys ``keys_sql`` returns (named as the anchor's
    key columns): the anchor restricted to them, and so is every occurrence joined on its key.
    ``marked_only``: they are keys the anchor's log marked (see _among)."""
    root = anchor(view)
    root_log = marked[view.occurrence(root).master.name]
    restricted = {root: _restricted(root_log, keys_sql, marked_only=marked_only)}
    for link in key_links(view):
        if link.source == root and link.target not in restricted:
            master = marked[view.occurrence(link.target).master.name]
            condition = _among(root_log, link.columns, keys_sql, marked_only)
            restricted[link.target] = f"(select * from {master.master_as_of()} where {condition})"
    return _new_state(view, marked, restricted)


def _new_state(view: ViewDefinition, marked: Mapping[str, MarkedLog], restricted: dict[str, str] | None = None) -> str:
    sources = {o.alias: marked[o.master.name].master_as_of() for o in view.occurrences}
    sources.update(restricted or {})
    return view.render_select(sources)


def _hidden_key(view: ViewDefinition, alias: str, log: MarkedLog) -> list[str]:
    by_source = {h.source_column.lower(): h.name for h in view.key_columns(alias)}
    return [by_source[k.lower()] for k in log.spec.key]


def _linked_anchor_keys(link: KeyLink, root_log: MarkedLog, rows: str) -> str:
    """The anchor keys (named as the anchor's key columns) that ``rows`` of ``link.target`` hold."""
    named = ", ".join(f"{ident(c)} as {ident(k)}" for c, k in zip(link.columns, root_log.spec.key))
    present = " and ".join(f"{ident(c)} is not null" for c in link.columns)
    return f"select {named} from (\n{rows}\n) where {present}"


def _affected_anchor_keys(
    view: ViewDefinition, view_relation: str, marked: Mapping[str, MarkedLog], changed: list[str]
) -> str:
    """Keys (named as the anchor master's key columns) of every slice that may have changed."""
    root = anchor(view)
    root_log = marked[view.occurrence(root).master.name]
    root_hidden = _hidden_key(view, root, root_log)
    renamed = ", ".join(f"{ident(h)} as {ident(k)}" for h, k in zip(root_hidden, root_log.spec.key))
    linked = {link.target: link for link in key_links(view) if link.source == root}
    parts = []
    for alias in changed:
        log = marked[view.occurrence(alias).master.name]
        if alias == root:
            parts.append(log.changed_keys())
            continue
        link = linked.get(alias)
        if link is not None and log.logs_columns(link.columns):
            # the slices its rows were in and are in now: the anchor keys its before and after images hold
            parts.append(_linked_anchor_keys(link, root_log, log.images(link.columns)))
            continue
        hidden = _hidden_key(view, alias, log)
        parts.append(  # the old slices it is in
            f"select {renamed} from {relation(view_relation)} where {in_changed(log, hidden, log.changed_keys())}"
        )
        if link is not None:  # the new slices it makes: the anchor keys its rows hold, no join needed
            parts.append(_linked_anchor_keys(link, root_log, _restricted(log, log.changed_keys(), marked_only=True)))
            continue
        present = " and ".join(f"{ident(h)} is not null" for h in hidden)
        new_rows = _new_state(view, marked, {alias: _restricted(log, log.changed_keys(), marked_only=True)})
        parts.append(f"select {renamed} from (\n{new_rows}\n) where {present}")  # the new slices it makes
    union = "\nunion all\n".join(f"select {idents(root_log.spec.key)} from (\n{p}\n)" for p in parts)
    return f"select distinct {idents(root_log.spec.key)} from (\n{union}\n)"


def refresh_statement(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    view_types: Mapping[str, str] | None = None,
    branch: str = WRITE_BRANCH,
) -> RefreshStatement | None:
    """The writes that apply the marked changes, or None when nothing is marked."""
    changed = [o.alias for o in view.occurrences if marked[o.master.name].has_changes]
    if not changed:
        return None
    root = anchor(view)
    root_log = marked[view.occurrence(root).master.name]
    root_hidden = _hidden_key(view, root, root_log)
    target = relation(view_relation)
    stored = view.stored_columns
    skipped = tuple(f"SLICES {o.alias}" for o in view.occurrences if o.alias not in changed)
    if changed == [root] and not root_log.deletes:  # new anchor rows: their slices are new
        rows = _slices(view, marked, root_log.changed_keys("inserts"), marked_only=True)
        writes = [Write("insert", f"insert into {target} ({idents(stored)})\n{rows}")]
        return refresh_writes(branch, writes, (f"INS {root}",), skipped)
    if changed == [root] and not root_log.inserts:  # anchor rows gone: so are their slices
        sql = f"delete from {target}\nwhere {in_changed(root_log, root_hidden, root_log.changed_keys())}"
        return refresh_writes(branch, [Write("delete", sql)], (f"DEL {root}",), skipped)
    # the affected keys read the view as it was (main): the DELETE goes to the write branch;
    # both writes read them, computed once (they join the changed rows with the masters)
    affected = Cached(cached_view(branch, "keys"), _affected_anchor_keys(view, view_relation, marked, changed))
    keys = f"select * from {ident(affected.name)}"
    new_slices = _slices(view, marked, keys)
    on_branch = branch_target(view_relation, branch)
    writes = [
        Write("delete", f"delete from {on_branch}\nwhere ({idents(root_hidden)}) in ({broadcast(keys)})"),
        Write("insert", f"insert into {on_branch} ({idents(stored)})\n{new_slices}"),
    ]
    run = tuple(f"SLICES {a}" for a in changed) + ("DEL+INS slices",)
    return refresh_writes(branch, writes, run, skipped, cached=(affected,))
