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

**Row by row (Oracle's outer-join refresh).** Recomputing a slice rewrites every row of an anchor
for one changed inner row (a customer's orders for one changed order). So one changed occurrence X
that an outer join null-extends and that is joined to the anchor on the anchor's whole key (the
first such: ``c LEFT JOIN o ON o.customer_id = c.customer_id``) is applied by its rows instead.
Its view rows are exactly the rows holding X's hidden key, and they depend only on X's row and its
anchor's slice; the rows where X is null-extended are the slice's own (one per anchor that has no
row of X). So for X's changed keys: delete the view rows holding them and insert their new rows;
for the anchors its before and after images name (the affected ones): delete their null-extended
row and insert it again when they have no row of X left. Both are the affected slices filtered to
those rows (the masters read once, as for whole slices; only the changed rows written). Changes of
the other occurrences (and of the anchor) still recompute their slices whole; a slice recomputed
whole is exempt from the per-row filters (``_mv_whole`` in the affected keys).

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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.analysis.joins import filters_only_its_side
from dbt_incremental_mv.analysis.links import KeyLink, key_links
from dbt_incremental_mv.analysis.render import render_select
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.views.statement import (
    WRITE_BRANCH,
    Cached,
    CrossedRows,
    RefreshStatement,
    Write,
    WriteKind,
    branch_target,
    broadcast_exists,
    cached_view,
    delete_write,
    refresh_writes,
)
from dbt_incremental_mv.sql_text import broadcast, ident, idents, relation

WHOLE = "_mv_whole"  # in the affected anchor keys: the anchor's whole slice is recomputed


def anchor(view: ViewDefinition) -> str:
    """The first occurrence no outer join null-extends (analysis refuses FULL joins)."""
    return next(o.alias for o in view.occurrences if o.alias not in view.null_supplying)


def blocker(view: ViewDefinition, logged: Mapping[str, object]) -> str | None:
    if not any(o.alias not in view.null_supplying for o in view.occurrences):
        return "every occurrence is null-extended by some outer join: no anchor to slice the view by"
    return None


@dataclass(frozen=True)
class _Slicing:
    """How a refresh slices the view, worked out once: its anchor, the anchor's marked log and
    hidden key columns, and the occurrences joined to the anchor on its whole key (by alias, the
    first such link of each: analysis/links.py)."""

    view: ViewDefinition
    marked: Mapping[str, MarkedLog]
    root: str
    root_log: MarkedLog
    root_hidden: list[str]
    links: Mapping[str, KeyLink]

    @classmethod
    def of(cls, view: ViewDefinition, marked: Mapping[str, MarkedLog]) -> _Slicing:
        root = anchor(view)
        root_log = marked[view.occurrence(root).master.name]
        links: dict[str, KeyLink] = {}
        for link in key_links(view):
            if link.source == root:
                links.setdefault(link.target, link)
        return cls(view, marked, root, root_log, _hidden_key(view, root, root_log), links)

    def log(self, alias: str) -> MarkedLog:
        return self.marked[self.view.occurrence(alias).master.name]

    def anchor_key_from_view(self) -> str:
        """The view's hidden anchor key columns, named as the anchor master's key columns."""
        return ", ".join(f"{ident(h)} as {ident(k)}" for h, k in zip(self.root_hidden, self.root_log.spec.key))


def _among(
    log: MarkedLog, columns: list[str] | tuple[str, ...], keys_sql: str | None = None, images: str | None = None
) -> str:
    """``columns`` (holding ``log``'s key) among the keys ``keys_sql`` returns, or among the keys
    its log marked (``images``: ``all`` or ``inserts``, see MarkedLog.key_in)."""
    if images is not None:
        return log.key_in(columns, images)
    assert keys_sql is not None
    return f"({idents(columns)}) in ({broadcast(keys_sql)})"


def _restricted(log: MarkedLog, keys_sql: str | None = None, images: str | None = None) -> str:
    """The master as of its marked snapshot, restricted to some keys (see _among)."""
    return f"(select * from {log.master_as_of()} where {_among(log, log.spec.key, keys_sql, images)})"


def _slices(s: _Slicing, keys_sql: str | None = None, images: str | None = None) -> str:
    """The defining query's slices of some anchor keys (see _among: ``keys_sql`` names them as the
    anchor's key columns; ``images``: the keys the anchor's log marked): the anchor restricted to
    them, and so is every occurrence joined on its key."""
    restricted = {s.root: _restricted(s.root_log, keys_sql, images)}
    for target, link in s.links.items():
        if target not in restricted:
            condition = _among(s.root_log, link.columns, keys_sql, images)
            restricted[target] = f"(select * from {s.log(target).master_as_of()} where {condition})"
    return _new_state(s, restricted)


def _new_state(s: _Slicing, restricted: dict[str, str]) -> str:
    sources = {o.alias: s.marked[o.master.name].master_as_of() for o in s.view.occurrences}
    sources.update(restricted)
    return render_select(s.view, sources)


def _hidden_key(view: ViewDefinition, alias: str, log: MarkedLog) -> list[str]:
    by_source = view.key_columns_by_source(alias)
    return [by_source[k.lower()] for k in log.spec.key]


def linked_anchor_keys(link: KeyLink, root_key: Sequence[str], rows: str, also: str = "") -> str:
    """The anchor keys (named as the anchor's key columns ``root_key``) that ``rows`` of
    ``link.target`` hold, with the projections ``also`` of each row."""
    named = ", ".join(f"{ident(c)} as {ident(k)}" for c, k in zip(link.columns, root_key))
    present = " and ".join(f"{ident(c)} is not null" for c in link.columns)
    return f"select {named}{', ' + also if also else ''} from (\n{rows}\n) where {present}"


def _anchor_key_parts(s: _Slicing, view_relation: str, alias: str) -> list[str]:
    """Queries returning the anchor keys (named as the anchor master's key columns) of every slice
    a change of ``alias`` may have changed: its old slices and its new ones."""
    log = s.log(alias)
    if alias == s.root:
        return [log.changed_keys()]
    renamed = s.anchor_key_from_view()
    link = s.links.get(alias)
    if link is not None and log.logs_columns(link.columns):
        # the slices its rows were in and are in now: the anchor keys its before and after images hold
        images = log.images(link.columns)
        return [linked_anchor_keys(link, s.root_log.spec.key, images)]
    hidden = _hidden_key(s.view, alias, log)
    old = f"select {renamed} from {relation(view_relation)} where {log.key_in(hidden)}"
    if link is not None:  # the new slices it makes: the anchor keys its rows hold, no join needed
        return [old, linked_anchor_keys(link, s.root_log.spec.key, _restricted(log, images="all"))]
    present = " and ".join(f"{ident(h)} is not null" for h in hidden)
    new_rows = _new_state(s, {alias: _restricted(log, images="all")})
    return [old, f"select {renamed} from (\n{new_rows}\n) where {present}"]  # the new slices it makes


def _distinct_keys(root_log: MarkedLog, parts: list[str]) -> str:
    union = "\nunion all\n".join(f"select {idents(root_log.spec.key)} from (\n{p}\n)" for p in parts)
    return f"select distinct {idents(root_log.spec.key)} from (\n{union}\n)"


def _by_row(s: _Slicing, changed: list[str]) -> str | None:
    """The changed occurrence whose changes are applied row by row (Oracle's outer-join fast
    refresh), not by recomputing the slices they are in: the first one null-extended by an outer
    join and joined to the anchor on the anchor's whole key (so each of its rows is in the slice
    its join columns name). None when no changed occurrence qualifies."""
    if not all(filters_only_its_side(j) for j in s.view.joins):  # an ON condition on both sides: slices
        return None
    return next(
        (a for a in changed if a != s.root and a in s.view.null_supplying and a in s.links),
        None,
    )


def _row_pairs(s: _Slicing, view_relation: str, alias: str) -> list[str]:
    """Queries returning, for each changed row of ``alias`` (applied row by row), the anchor key of
    each slice it was in or is in now with its own key: the anchor key named as the anchor
    master's key columns, its key as its hidden key columns in the view."""
    log = s.log(alias)
    link = s.links[alias]
    hidden = _hidden_key(s.view, alias, log)
    own = ", ".join(f"{ident(k)} as {ident(h)}" for k, h in zip(log.spec.key, hidden))
    columns = list(dict.fromkeys([*link.columns, *log.spec.key]))
    if log.logs_columns(columns):  # its before and after images: the slices it was in and is in now
        images = log.images(columns)
        return [linked_anchor_keys(link, s.root_log.spec.key, images, own)]
    old = (  # the view rows it is in now
        f"select {s.anchor_key_from_view()}, {idents(hidden)} from {relation(view_relation)} where {log.key_in(hidden)}"
    )
    return [old, linked_anchor_keys(link, s.root_log.spec.key, _restricted(log, images="all"), own)]


def _null_extended(x_hidden: list[str], row: str) -> str:
    """Whether the view row ``row`` (an alias) is null-extended in X (its hidden key NULL)."""
    return " and ".join(f"{row}.{ident(h)} is null" for h in x_hidden)


def _row_filter(
    root_log: MarkedLog, root_hidden: list[str], x_hidden: list[str], keys: str, whole: bool, row: str
) -> str:
    """Whether the view row ``row`` (an alias) is one the row-by-row refresh rewrites: a row of a
    changed row of X (its anchor and key in the pairs), a null-extended row of an affected anchor,
    or any row of a slice recomputed whole. One semi join on the anchor key with the pairs
    broadcast: a row of another anchor is dismissed by one hash probe."""
    anchor_match = " and ".join(
        f"`_mv_k`.{ident(k)} = {row}.{ident(h)}" for k, h in zip(root_log.spec.key, root_hidden)
    )
    x_null = _null_extended(x_hidden, row)
    x_match = " and ".join(f"{row}.{ident(h)} = `_mv_k`.{ident(h)}" for h in x_hidden)
    which = ([f"`_mv_k`.{ident(WHOLE)}"] if whole else []) + [f"({x_null})", f"({x_match})"]
    return broadcast_exists(keys, "`_mv_k`", f"{anchor_match} and ({' or '.join(which)})")


def _whole_slices(
    s: _Slicing, view_relation: str, parts: list[str], run: tuple[str, ...], skipped: tuple[str, ...], branch: str
) -> RefreshStatement:
    """The writes recomputing whole the slices of the anchor keys ``parts`` return (each a query of
    them named as the anchor's key columns): their rows deleted on the write branch, the defining
    query's rows of them inserted; the keys computed once into the session's cache."""
    on_branch = branch_target(view_relation, branch)
    name = cached_view(branch, "keys")
    keys = f"select {idents(s.root_log.spec.key)} from {ident(name)}"
    affected = Cached(name, _distinct_keys(s.root_log, parts))
    in_slices = f"({idents(s.root_hidden)}) in ({broadcast(keys)})"
    slices = _slices(s, keys)
    writes = [
        delete_write(on_branch, in_slices),
        Write(WriteKind.INSERT, f"insert into {on_branch} ({idents(s.view.stored_columns)})\n{slices}"),
    ]
    return refresh_writes(
        branch,
        writes,
        (*run, "DEL+INS slices"),
        skipped,
        cached=(affected,),
        touched=in_slices,
        deleted=in_slices,
        inserted=slices,
    )


def _crossed_key_parts(s: _Slicing, view_relation: str, alias: str, rows: str) -> list[str]:
    """Queries returning the anchor keys of every slice that the rows of ``alias`` which crossed the
    view's time boundary (``rows``: a query of them, at the snapshot the refresh reads, under the
    alias) are in, at the time the view reflects or at this refresh's: the keys of crossed anchor
    rows; the anchor keys a crossed row holds when it is joined to the anchor on the anchor's whole
    key; else the anchors of the view rows holding a crossed row (it was in) and of the rows the
    defining query at this time makes of them (it is in now). A row is in the view exactly when
    its filters hold, so no other slice changed (a crossed row that also changed: its old slice is
    its before image's, among the changes' affected anchors)."""
    key = s.view.occurrence(alias).master.key
    crossed = f"(\n{rows}\n)"
    if alias == s.root:
        return [f"select {idents(key)} from {crossed}"]
    link = s.links.get(alias)
    if link is not None:  # joined on the anchor's whole key: the anchor keys its rows hold, no join needed
        return [linked_anchor_keys(link, s.root_log.spec.key, rows)]
    hidden = _hidden_key(s.view, alias, s.log(alias))
    held = f"({idents(hidden)}) in (select {idents(key)} from {crossed})"
    old = f"select {s.anchor_key_from_view()} from {relation(view_relation)} where {held}"
    present = " and ".join(f"{ident(h)} is not null" for h in hidden)
    new_rows = _new_state(s, {alias: crossed})
    return [old, f"select {s.anchor_key_from_view()} from (\n{new_rows}\n) where {present}"]


def with_crossed_rows(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    statement: RefreshStatement | None,
    crossing: CrossedRows,
    view_types: Mapping[str, str] | None = None,  # (not read: an outer-join view's columns are the query's)
    branch: str = WRITE_BRANCH,
) -> RefreshStatement:
    """The marked changes and the rows that crossed the view's time boundary (``crossing.rows``, by
    alias: a query of those rows under the alias) applied in one recomputation of the slices they
    are in (in place of ``statement``, the changes' alone): the changes' affected anchors
    (_anchor_key_parts, each changed occurrence's slices whole, none row by row) and the crossed
    rows' (_crossed_key_parts), their rows deleted and the defining query's at this time inserted."""
    slicing = _Slicing.of(view, marked)
    changed = [o.alias for o in view.occurrences if marked[o.master.name].has_changes]
    parts = [part for a in changed for part in _anchor_key_parts(slicing, view_relation, a)]
    for alias, rows in sorted(crossing.rows.items()):
        parts += _crossed_key_parts(slicing, view_relation, alias, rows)
    run = tuple(f"SLICES {a}" for a in changed) + tuple(f"TIME {a}" for a in sorted(crossing.rows))
    skipped = tuple(f"SLICES {o.alias}" for o in view.occurrences if o.alias not in changed)
    return _whole_slices(slicing, view_relation, parts, run, skipped, branch)


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
    """The writes that apply the marked changes, or None when nothing is marked."""
    changed = [o.alias for o in view.occurrences if marked[o.master.name].has_changes]
    if not changed:
        return None
    slicing = _Slicing.of(view, marked)
    root, root_log, root_hidden = slicing.root, slicing.root_log, slicing.root_hidden
    target = relation(view_relation)
    stored = view.stored_columns
    skipped = tuple(f"SLICES {o.alias}" for o in view.occurrences if o.alias not in changed)
    if changed == [root] and not root_log.deletes:  # new anchor rows: their slices are new
        rows = _slices(slicing, images="inserts")
        writes = [Write(WriteKind.INSERT, f"insert into {target} ({idents(stored)})\n{rows}")]
        touched = root_log.key_in(root_hidden)
        return refresh_writes(branch, writes, (f"INS {root}",), skipped, touched=touched, inserted=rows)
    if changed == [root] and not root_log.inserts:  # anchor rows gone: so are their slices
        touched = root_log.key_in(root_hidden)
        return refresh_writes(
            branch, [delete_write(target, touched)], (f"DEL {root}",), skipped, touched=touched, deleted=touched
        )
    # the affected keys read the view as it was (main): the DELETE goes to the write branch;
    # both writes read them, computed once (they join the changed rows with the masters)
    by_row = _by_row(slicing, changed)
    whole = [part for a in changed if a != by_row for part in _anchor_key_parts(slicing, view_relation, a)]
    on_branch = branch_target(view_relation, branch)
    name = cached_view(branch, "keys")
    keys = f"select {idents(root_log.spec.key)} from {ident(name)}"
    if by_row is None:
        run = tuple(f"SLICES {a}" for a in changed)
        return _whole_slices(slicing, view_relation, whole, run, skipped, branch)
    # Oracle's outer-join algorithm for ``by_row`` (X): the view rows of its changed rows are
    # deleted and inserted, and the anchors its images name (the affected ones) only get their
    # null-extended row fixed: deleted when the anchor had no row of X and has some now, inserted
    # when the last one went. The other changed occurrences' slices are recomputed whole, as above.
    x_log = slicing.log(by_row)
    x_hidden = _hidden_key(view, by_row, x_log)
    # the affected keys: (anchor, row of X) pairs, and anchors whose slice is recomputed whole
    key_list = idents(root_log.spec.key)
    tagged = [
        f"select {key_list}, {idents(x_hidden)}" + (f", false as {ident(WHOLE)}" if whole else "") + f" from (\n{p}\n)"
        for p in _row_pairs(slicing, view_relation, by_row)
    ]
    nulls = ", ".join(f"null as {ident(h)}" for h in x_hidden)  # (typed by the union)
    tagged += [f"select {key_list}, {nulls}, true as {ident(WHOLE)} from (\n{p}\n)" for p in whole]
    affected = Cached(name, "\nunion all\n".join(tagged))
    every = f"select * from {ident(name)}"
    rows_of = _row_filter(root_log, root_hidden, x_hidden, every, bool(whole), "`_mv_v`")
    # the new rows: the affected slices (the masters read once, as for whole slices), less their
    # rows that did not change
    new_rows = f"select * from (\n{_slices(slicing, keys)}\n) as `_mv_v`\nwhere {rows_of}"
    # what Spark pushes to the DELETE's scan of the view: its rows of X lie within X's marked
    # keys, and its null-extended rows sort first (the view is written sorted by the largest
    # master's hidden key, layout.py), so the files between are not planned
    prefilter = None if whole else x_log.key_prefilter([f"`_mv_v`.{ident(h)}" for h in x_hidden])
    nulls_or_marked = f"(({_null_extended(x_hidden, '`_mv_v`')}) or {prefilter})\nand " if prefilter else ""
    writes = [
        delete_write(on_branch, f"{nulls_or_marked}{rows_of}", "`_mv_v`"),
        Write(WriteKind.INSERT, f"insert into {on_branch} ({idents(stored)})\n{new_rows}"),
    ]
    run = (f"ROWS {by_row}",) + tuple(f"SLICES {a}" for a in changed if a != by_row) + ("DEL+INS rows",)
    return refresh_writes(
        branch,
        writes,
        run,
        skipped,
        cached=(affected,),
        touched=rows_of,
        deleted=rows_of,
        inserted=new_rows,
    )
