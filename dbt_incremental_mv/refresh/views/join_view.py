"""Fast refresh of join views: a single master, or inner joins of several (ViewClass.JOIN).

Oracle deletes and re-inserts, master by master, the "slice" of the view that the marked rows
of each master touch: a DEL step (view rows whose key for that master is marked) and an INS
step (the defining query with that master restricted to its marked rows, every master read as
of the marked snapshot). Here the DEL steps of all masters are one DELETE and the INS steps one
INSERT, published together as one atomic Iceberg commit (statement.py):

- only after images marked (insert-only logs): ``INSERT INTO view <INS rows>``;
- only before images (delete-only logs): ``DELETE FROM view WHERE <DEL condition>``;
- otherwise the DELETE on the refresh's write branch, then the INSERT staged on it.

Neither shuffles the view: the DELETE scans the view's hidden key columns against the changed
keys (broadcast), the INSERT does not read the view. The INS queries of several masters are
made disjoint and combined with UNION ALL (no distinct, so no shuffle of the rows they make): a
new view row whose masters changed in the same refresh would come out of each one's INS query,
so each query after the first leaves out the rows of the earlier ones, each reading the
occurrence an earlier one restricted without the keys that restricted it (Oracle's INS steps
run one after the other and each sees the rows the earlier ones inserted; here they are one
statement).

The marked keys restrict the reads (marked.py): literals when few, which Spark pushes to the
masters' scans and the view's (the DELETE's OR of the masters' conditions too), else the log's
keys within the ranges of their first column. A master's own INS step reads no master at all
when its log carries every column the view reads of it: its rows are the log's after images
(``statement.inserted_rows_from_log``; with scattered keys the master's rows of them are in every data file).

**One scan of the fact for its dimensions' INS steps.** The INS step of a dimension ``c``
joined by ``o.customer_id = c.customer_id`` (its whole key) makes the same rows as the defining
query with ``o`` restricted to ``customer_id IN <changed customers>`` (analysis/links.py). So the
INS steps of an occurrence and of every dimension so linked to it are one query: that occurrence
restricted to ``key IN <its changed keys> OR customer_id IN <changed customers> OR ...``, the
rest read in full. Separately, each INS step read the fact in full for its dimension (a star of
three changed masters: three scans of the fact, each with a shuffle of the joined dimension);
together they read it once.

**A dimension's updates patched from the view (PATCH).** A changed dimension row's INS step reads
the fact whole (its rows are scattered there). An update that keeps the row in the view and its
join columns joins the same fact rows before and after, so its rows are read from the view as the
refresh found it (``VERSION AS OF`` the snapshot the write branch begins at) and written again with
the dimension's columns from its new row (``_patched_rows``; which masters and updates:
analysis/patching.py, the mark step). New rows no fact file can hold (the mark step's unreferenced
keys) are in no view row. A dimension is patched only when every one of its keys with an after
image is one of those: otherwise its INS step reads the fact anyway.

**One scan of each master when a dimension changed with the fact's children, keys scattered.**
A changed dimension's rows are scattered in the fact, so its INS step reads the fact and the
fact's children (the line items of a customer's orders) whole; with scattered keys the INS
steps of the changed orders and line items read them whole again. Then all the INS steps are
one query (``_folded_ins_query``): the fact restricted to its own keys, its dimensions' and
those its changed children hold, the children to the fact rows so found, filtered to the rows
of an inserted key. With clustered keys the separate steps read within their ranges and were
faster (TPC-H scale factor 10: benchmarks/README.md, "One query for all the INS steps").
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping

from sqlglot import exp

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.analysis.links import KeyLink, key_links
from dbt_incremental_mv.analysis.patching import Patching, patching
from dbt_incremental_mv.analysis.render import render_expression, render_select
from dbt_incremental_mv.logs.contract import INSERT
from dbt_incremental_mv.refresh.marked_log import KeyValues, MarkedLog, literal_in
from dbt_incremental_mv.refresh.views.semijoin import marked_ranges, reduce_sources
from dbt_incremental_mv.refresh.views.statement import (
    WRITE_BRANCH,
    CrossedRows,
    KeyRestriction,
    RefreshStatement,
    Write,
    WriteKind,
    any_of,
    branch_target,
    delete_write,
    inserted_rows_from_log,
    pruned_any_of,
    rebalanced,
    refresh_writes,
    split_by_literal,
)
from dbt_incremental_mv.sql_text import broadcast, ident, idents, integer, relation


def _ins_restrictions(
    view: ViewDefinition,
    marked: Mapping[str, MarkedLog],
    alias: str,
    own: bool,
    links: list[KeyLink],
    images: str = "inserts",
) -> list[KeyRestriction]:
    """The rows of ``alias`` the INS steps of itself (when ``own``) and of the dimensions
    ``links`` tie to it read, each a restriction of its own columns (to the keys with an after
    image; ``images='all'``: every marked key, as the DEL steps delete them)."""
    log = marked[view.occurrence(alias).master.name]
    found = [KeyRestriction(log, log.spec.key, images)] if own else []
    for link in links:
        found.append(KeyRestriction(marked[view.occurrence(link.source).master.name], link.columns, images))
    return found


def _ins_sources(
    view: ViewDefinition,
    sources: Mapping[str, str],
    alias: str,
    restrictions: list[KeyRestriction],
    earlier: Mapping[str, list[KeyRestriction]],
    own: KeyRestriction | None,
) -> dict[str, str]:
    """What one INS query reads: ``alias`` restricted to any of ``restrictions``, each occurrence
    an earlier INS query restricted without those rows (``earlier``: alias -> its restrictions),
    the other masters reduced to the rows that join it (semijoin.py). Its rows lie in the range of
    its marked keys, and its keys among them, when it is restricted to them alone (``own``)."""
    alone = own is not None and restrictions == [own]
    from_log = (
        inserted_rows_from_log(view, own.log, alias) if own is not None and alone and own.images != "all" else None
    )
    restricted = dict(sources)
    if from_log is not None:
        restricted[alias] = from_log
    for other, done in earlier.items():
        for restriction in done:
            restricted[other] = restriction.excluded_from(restricted[other])
    if from_log is None:
        restricted[alias] = f"(select * from {restricted[alias]} where {any_of(restrictions)})"
    ranges = marked_ranges(own.log) if own is not None and alone else {}
    key_sets = {alias: own.log.changed_keys(own.images)} if own is not None and alone else {}
    return reduce_sources(view, restricted, {alias: ranges}, key_sets)


def _ins_groups(view: ViewDefinition, ins_aliases: list[str]) -> list[tuple[str, bool, list[KeyLink]]]:
    """The INS steps as queries: (the occurrence restricted, whether its own INS step is one of
    them, the dimensions whose INS steps it also runs). The occurrence that runs the most INS
    steps goes first, and so on."""
    links = [link for link in key_links(view) if link.inner]
    left = list(ins_aliases)
    groups = []
    while left:
        best_alias = left[0]
        best_links: list[KeyLink] = []
        for occurrence in view.occurrences:
            alias = occurrence.alias
            # (two occurrences are joined in one step only: at most one link from each source)
            taken = [link for link in links if link.target == alias and link.source in left and link.source != alias]
            covered = len(taken) + (alias in left)
            if covered > len(best_links) + (best_alias in left):
                best_alias, best_links = alias, taken
        groups.append((best_alias, best_alias in left, best_links))
        done = {best_alias} | {link.source for link in best_links}
        left = [alias for alias in left if alias not in done]
    return groups


def _folded_ins_query(
    view: ViewDefinition,
    marked: Mapping[str, MarkedLog],
    sources: Mapping[str, str],
    ins_aliases: list[str],
) -> str | None:
    """The INS steps as one query that reads each master once, or None (then the INS queries
    of ``_ins_groups``).

    It applies around a *hub*: an occurrence with changed dimensions (linked to its columns)
    and changed children (holding its key), every other changed occurrence being one of those
    (the first such in the view's order). A dimension's INS step finds its rows through the hub
    and reads the hub and its children whole (a dimension's rows are scattered in them); the
    hub's and the children's own INS steps read them again, within their keys' ranges, so the
    fold is done only when the hub's or a child's own keys are scattered (``_scattered``: then
    those ranges are nearly the whole table). Folded: the view's query over the hub
    restricted to its own keys, its dimensions' keys and the keys its changed children hold in
    their after images, each child reduced to the hub rows so found (a broadcast semi join,
    semijoin.py), the rest read in full; of its rows, those whose hidden key of a changed
    occurrence is among that master's inserted keys: exactly the rows the INS steps make, each
    once (no INS query excludes another's rows)."""
    inner = [link for link in key_links(view) if link.inner]
    for hub in view.aliases:
        links: list[KeyLink] = []  # the hub's changed dimensions (one link each)
        children: list[KeyLink] = []  # its changed occurrences holding its key
        for alias in ins_aliases:
            if alias == hub:
                continue
            into = next((k for k in inner if k.source == alias and k.target == hub), None)
            held = next((k for k in inner if k.source == hub and k.target == alias), None)
            if into is not None:
                links.append(into)
            elif held is not None and marked[view.occurrence(alias).master.name].logs_columns(held.columns):
                children.append(held)
            else:
                break
        else:
            own = [a for a in (hub, *(k.target for k in children)) if a in ins_aliases]
            if links and children and any(_scattered(marked[view.occurrence(a).master.name]) for a in own):
                return _folded_query(view, marked, sources, ins_aliases, hub, links, children)
    return None


SCATTERED = 0.5  # the share of their span the marked keys' ranges cover, above which they prune little
DENSE = 1 / 16  # distinct marked values per value of the ranges' width, at or above which they are a stretch of keys


def _scattered(log: MarkedLog) -> bool:
    """Whether the log's marked keys (read from the log, not literals) lie in two or more ranges
    covering at least SCATTERED of the span from the lowest to the highest (integer or date keys)
    and hold fewer than DENSE distinct values per value of their width: an INS step restricted
    to them reads its master, and the fact joined to it, nearly whole. One range says nothing of
    the master's span (a few new keys at its end, or every key); nor do dense ranges (the keys
    of the newest orders, most of them changed: about as many keys as values in 16 ranges),
    which are a stretch of the master's keys however they fill their own span. TPC-H scale
    factor 1, such a change, warm: the view's DELETEs 1.2-1.7 s apart, 3.3 s as one statement
    (its key sets' ranges then repeated beside them: see statement.pruned_any_of)."""
    if log.known_keys("inserts") is not None or len(log.key_ranges) < 2:
        return False
    try:
        spans = [(_ordinal(low), _ordinal(high)) for low, high in log.key_ranges]
    except TypeError:
        return False
    covered = sum(high - low + 1 for low, high in spans)
    whole = max(high for _, high in spans) - min(low for low, _ in spans) + 1
    return covered >= SCATTERED * whole and log.key_range_values < DENSE * covered


def _ordinal(bound: object) -> int:
    """An integer or date bound as an integer (TypeError for any other type)."""
    if isinstance(bound, bool) or not isinstance(bound, (int, datetime.date)):
        raise TypeError(bound)
    return bound if isinstance(bound, int) else bound.toordinal()


def _folded_query(
    view: ViewDefinition,
    marked: Mapping[str, MarkedLog],
    sources: Mapping[str, str],
    ins_aliases: list[str],
    hub: str,
    links: list[KeyLink],
    children: list[KeyLink],
) -> str:
    """The folded INS query around ``hub`` (``_folded_ins_query``)."""
    hub_key = view.occurrence(hub).master.key
    found = [r.condition() for r in _ins_restrictions(view, marked, hub, hub in ins_aliases, links)]
    for link in children:
        log = marked[view.occurrence(link.target).master.name]
        held = f"select distinct {idents(link.columns)} from (\n{log.images(link.columns, INSERT)}\n)"
        found.append(f"({idents(hub_key)}) in ({broadcast(held)})")
    restricted = dict(sources)
    restricted[hub] = f"(select * from {sources[hub]}\nwhere " + "\n   or ".join(f"({f})" for f in found) + ")"
    query = render_select(view, reduce_sources(view, restricted, {hub: {}}))
    inserted = any_of(_hidden_restrictions(view, marked, ins_aliases, "inserts"))
    return f"select * from (\n{query}\n) as `_mv_i`\nwhere {inserted}"


def _hidden_restrictions(
    view: ViewDefinition, marked: Mapping[str, MarkedLog], aliases: list[str], images: str = "all"
) -> list[KeyRestriction]:
    """View rows whose hidden key for a changed occurrence is among its master's changed keys
    (``images``: ``all``, or those with an after image)."""
    found = []
    for alias in aliases:
        log = marked[view.occurrence(alias).master.name]
        by_source = view.key_columns_by_source(alias)
        found.append(KeyRestriction(log, tuple(by_source[k.lower()] for k in log.spec.key), images))
    return found


def _delete_groups(restrictions: list[KeyRestriction]) -> list[list[KeyRestriction]]:
    """The DEL steps as DELETE statements, each the restrictions it ORs: one DELETE when some
    master's keys read from its log are scattered (its own DELETE would read the view whole: the
    others then cost their key sets' joins, not a scan of the view each); otherwise the literal
    keys together and each key set read from a log alone, pruned to its ranges (TPC-H scale
    factor 1, clustered: one DELETE took 4.4 s where the three took 3.0; scale factor 10,
    scattered: 5.4 s against 7.6)."""
    if any(not r.literal and _scattered(r.log) for r in restrictions):
        return [restrictions]
    return split_by_literal(restrictions)


def _ins_queries(
    view: ViewDefinition,
    marked: Mapping[str, MarkedLog],
    sources: Mapping[str, str],
    ins_aliases: list[str],
    images: str = "inserts",
) -> list[str]:
    """The INS steps as disjoint queries, one per group of ``_ins_groups`` (two when its own keys
    are read from the log and it runs dimensions' steps too); ``images='all'``: restricted to every
    marked key (``_deleted_rows``)."""
    queries: list[str] = []
    earlier: dict[str, list[KeyRestriction]] = {}
    for alias, own, links in _ins_groups(view, ins_aliases):
        restrictions = _ins_restrictions(view, marked, alias, own, links, images)
        mine = restrictions[0] if own else None
        # its own keys' ranges prune its files: a query of their own when they are not
        # literals (see KeyRestriction); its dimensions' keys (scattered in it) prune nothing
        groups = [[mine], restrictions[1:]] if mine is not None and not mine.literal and links else [restrictions]
        for group in groups:
            queries.append(render_select(view, _ins_sources(view, sources, alias, group, earlier, mine)))
            earlier.setdefault(alias, []).extend(group)
    return queries


def _deleted_rows(view: ViewDefinition, marked: Mapping[str, MarkedLog], del_aliases: list[str]) -> str | None:
    """The rows the DEL steps delete, computed from the masters as the view reflected them before
    this refresh (MarkedLog.previous_master_snapshot), not read back from the view: the INS steps'
    disjoint queries over those snapshots, each occurrence restricted to all its marked keys (a
    view row whose key of an occurrence is among them is a row of the query over that occurrence
    restricted to them, or over the fact an inner key link ties the dimension to, restricted to
    its columns holding them). The reads follow the changed keys (their ranges prune the masters,
    sorted by their own keys) where a read-back scans the view for them: an indexed join state is
    sorted by its dimension's key, not by the facts' keys a fact change deletes by. None when a
    master's previous snapshot is not known."""
    if not del_aliases or any(marked[o.master.name].previous_master_snapshot is None for o in view.occurrences):
        return None
    sources = {o.alias: marked[o.master.name].previous_master_as_of() for o in view.occurrences}
    return "\nunion all\n".join(_ins_queries(view, marked, sources, del_aliases, "all"))


@dataclasses.dataclass(frozen=True)
class _Patch:
    """A master's updates patched in place: how (analysis/patching.py), and their keys."""

    how: Patching
    keys: KeyValues


def _patches(view: ViewDefinition, marked: Mapping[str, MarkedLog]) -> dict[str, _Patch]:
    """The updates patched in place (analysis/patching.py), by the alias of their occurrence: the
    keys the mark step found to be such updates, of a master whose every key with an after image
    is one or is in no view row (MarkedLog.inserts_patched: a new customer without orders), which
    then has no INS step (its keys may be none: only new rows). A master with another key (a new
    customer with orders, one that moved into the view) has an INS step that reads the facts
    anyway, where the patched keys cost nothing more, while their patch would read the view."""
    found = {}
    for occurrence in view.occurrences:
        log = marked[occurrence.master.name]
        keys = log.patch_key_values
        if keys is None or not log.inserts or not log.inserts_patched:
            continue
        patched = patching(view, occurrence.master.name)
        if patched is not None and patched.alias == occurrence.alias:
            found[occurrence.alias] = _Patch(patched, keys)
    return found


def _patched_rows(
    view: ViewDefinition,
    view_relation: str,
    view_snapshot: int,
    marked: Mapping[str, MarkedLog],
    sources: Mapping[str, str],
    patches: Mapping[str, _Patch],
) -> str:
    """The view's new rows of the updates patched in place (``patches``: how, and their keys, by alias):
    its rows holding one of those keys as of ``view_snapshot`` (the snapshot the refresh read: the
    DELETE has removed them from the write branch), each column reading a patched master computed
    from that master's new row where the row holds a patched key of it; but the rows holding any
    other marked key (deleted, and made again by that master's INS step from the masters, the
    patched masters read as they are now). A row holding patched keys of two masters (a customer
    and its nation, both renamed) is made once, with both new rows."""
    hidden = {alias: view.key_columns_by_source(alias) for alias in patches}

    def held(alias: str, qualifier: str = "`_mv_v`.") -> str:
        key = view.occurrence(alias).master.key
        return literal_in([f"{qualifier}{ident(hidden[alias][k.lower()])}" for k in key], patches[alias].keys)

    rows = f"{relation(view_relation)} version as of {integer(view_snapshot)}"
    rows = f"(select * from {rows}\nwhere {' or '.join(held(alias, '') for alias in patches)})"
    unpatched = dict(marked)
    for alias, patch in patches.items():  # (their keys are listed: see _patches)
        log = marked[view.occurrence(alias).master.name]
        assert log.key_values is not None
        patched_keys = set(patch.keys)
        unpatched[log.spec.master_relation] = dataclasses.replace(
            log, key_values=tuple(k for k in log.key_values if k not in patched_keys)
        )
    changed = [o.alias for o in view.occurrences if marked[o.master.name].has_changes]
    restrictions = [r for r in _hidden_restrictions(view, unpatched, changed) if r.log.known_keys() != ()]
    for restriction in restrictions:
        rows = restriction.excluded_from(rows)
    columns = []
    for output in view.outputs:
        reads = {c.table for c in output.expression.find_all(exp.Column)} & set(patches)
        if reads:
            [alias] = reads  # (a column reads a patched master's columns alone: analysis/patching.py)
            first = view.occurrence(alias).master.key[0]
            new = render_expression(output.expression)
            column = (
                f"case when {ident(alias)}.{ident(first)} is not null then {new} else `_mv_v`.{ident(output.name)} end"
            )
            columns.append(f"{column} as {ident(output.name)}")
        else:
            columns.append(f"`_mv_v`.{ident(output.name)}")
    columns += [f"`_mv_v`.{ident(column.name)}" for column in view.hidden_columns]  # (keys unchanged)
    joins, found = [], []
    for alias, patch in patches.items():
        key = view.occurrence(alias).master.key
        # its new rows, which pass its filters (their after images did when they were marked)
        conditions = [literal_in([f"{ident(alias)}.{ident(k)}" for k in key], patch.keys)]
        conditions += [render_expression(f) for f in patch.how.filters]
        new_rows = f"(select * from {sources[alias]} as {ident(alias)}\nwhere {' and '.join(conditions)})"
        on = " and ".join(f"`_mv_v`.{ident(hidden[alias][k.lower()])} = {ident(alias)}.{ident(k)}" for k in key)
        joins.append(f"left join {new_rows} as {ident(alias)}\non {on}")
        found.append(f"(not coalesce({held(alias)}, false) or {ident(alias)}.{ident(key[0])} is not null)")
    return (
        f"select {', '.join(columns)}\nfrom {rows} as `_mv_v`\n" + "\n".join(joins) + "\nwhere " + "\nand ".join(found)
    )


def refresh_statement(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    view_types: Mapping[str, str] | None = None,
    branch: str = WRITE_BRANCH,
    view_rows: int | None = None,  # (not used: the view is never rewritten whole)
    *,
    view_snapshot: int | None = None,
) -> RefreshStatement | None:
    """The writes that apply the marked changes, or None when nothing is marked.

    ``marked`` maps every master relation of the view to its marked log; ``view_types`` is
    unused (join views store what the defining query selects); ``branch`` names the write
    branch a refresh of two writes uses; ``view_snapshot``: the view snapshot the refresh read
    (its write branch begins there), from which the updates patched in place are read (None:
    none is patched).
    """
    del_aliases = [o.alias for o in view.occurrences if marked[o.master.name].deletes]
    patches = _patches(view, marked) if view_snapshot is not None else {}
    ins_aliases = [o.alias for o in view.occurrences if marked[o.master.name].inserts and o.alias not in patches]
    changed = [o.alias for o in view.occurrences if marked[o.master.name].has_changes]
    run = tuple(f"DEL {a}" for a in del_aliases) + tuple(f"INS {a}" for a in ins_aliases)
    skipped = tuple(
        f"{step} {o.alias}"
        for o in view.occurrences
        for step, needed in (("DEL", o.alias in del_aliases), ("INS", o.alias in ins_aliases))
        if not needed
    )
    if not changed:
        return None
    restrictions = _hidden_restrictions(view, marked, del_aliases)
    deletes = _delete_groups(restrictions)
    several = len(deletes) + bool(ins_aliases or any(patch.keys for patch in patches.values())) > 1
    target = branch_target(view_relation, branch) if several else relation(view_relation)
    # An update marks both images: its key is deleted and re-inserted, so DEL covers every image.
    writes = [delete_write(target, pruned_any_of(group)) for group in deletes]
    ins_query = None
    sources = {o.alias: marked[o.master.name].master_as_of() for o in view.occurrences}
    queries = []
    if ins_aliases:
        folded = _folded_ins_query(view, marked, sources, ins_aliases)
        queries = _ins_queries(view, marked, sources, ins_aliases) if folded is None else [folded]
    patched = {alias: patch for alias, patch in patches.items() if patch.keys}
    if patched:
        assert view_snapshot is not None  # (only then are updates patched)
        queries.append(_patched_rows(view, view_relation, view_snapshot, marked, sources, patched))
    if queries:
        ins_query = "\nunion all\n".join(queries)
        rows = _rebalanced_if_joined(view, ins_query, several=len(queries) > 1)
        writes.append(Write(WriteKind.INSERT, f"insert into {target} ({idents(view.stored_columns)})\n{rows}"))
    if not writes:
        return None  # only new rows in no view row (a new customer without orders): nothing to write
    deleted = any_of(restrictions) if restrictions else None
    # every row deleted or inserted has the key of a changed occurrence among its changed keys
    return refresh_writes(
        branch,
        writes,
        run + tuple(f"PATCH {alias}" for alias in patched),
        skipped,
        touched=any_of(_hidden_restrictions(view, marked, changed)),
        deleted=deleted,
        inserted=ins_query,
        deleted_rows=_deleted_rows(view, marked, del_aliases),
    )


def with_crossed_rows(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    statement: RefreshStatement | None,
    crossing: CrossedRows,
    view_types: Mapping[str, str] | None = None,  # (not read: a join view's columns are the query's)
    branch: str = WRITE_BRANCH,
) -> RefreshStatement:
    """``statement`` (the marked changes' writes, None: none) and the view rows of the master rows
    whose filters by the time give another answer now (refresh/phases/clock.py) recomputed, in
    its DELETEs and one INSERT: a DELETE of the view rows whose key of an occurrence is among its
    crossed rows' keys (``crossing.rows``, by alias: a query of those rows under the alias), after
    the changes' DELETEs; the INSERT of the changes' rows and of the defining query's rows of the
    crossed keys at the marked snapshots (the crossed rows read in place of their occurrence when
    one occurrence crossed) but those the changes' INSERT makes (a row of an inserted key), so
    that a row that changed and crossed is inserted once. DELETEs then one INSERT: a UNION ALL
    view combines them with its other branches' (union_view.py)."""
    crossed = crossing.rows
    target = branch_target(view_relation, branch)
    held = []
    for alias, rows in sorted(crossed.items()):
        key = view.occurrence(alias).master.key
        by_source = view.key_columns_by_source(alias)
        held.append(f"({idents([by_source[k.lower()] for k in key])}) in (select {idents(key)} from (\n{rows}\n))")
    condition = " or ".join(held)
    sources = {o.alias: marked[o.master.name].master_as_of() for o in view.occurrences}
    if len(crossed) == 1:
        [(alias, rows)] = crossed.items()
        recomputed = render_select(view, {**sources, alias: f"(\n{rows}\n)"})
    else:
        recomputed = f"select * from (\n{render_select(view, sources)}\n) as _mv_crossed\nwhere {condition}"
    ins_aliases = [o.alias for o in view.occurrences if marked[o.master.name].inserts]
    for restriction in _hidden_restrictions(view, marked, ins_aliases, "inserts"):
        recomputed = "select * from " + restriction.excluded_from("(\n" + recomputed + "\n)")
    changes = statement.writes if statement is not None else ()
    deletes = [
        w if statement is not None and statement.branch is not None else _on_branch(w, view_relation, target)
        for w in changes
        if w.kind is WriteKind.DELETE
    ]
    deleted = f"{statement.deleted}\n   or {condition}" if statement is not None and statement.deleted else condition
    inserted = (
        f"{statement.inserted}\nunion all\n{recomputed}" if statement is not None and statement.inserted else recomputed
    )
    writes = [
        *deletes,
        delete_write(target, condition),
        Write(
            WriteKind.INSERT,
            f"insert into {target} ({idents(view.stored_columns)})\n"
            f"{_rebalanced_if_joined(view, inserted, several=statement is not None and bool(statement.inserted))}",
        ),
    ]
    timed = tuple(f"TIME {alias}" for alias in sorted(crossed))
    return refresh_writes(
        branch,
        writes,
        (statement.steps_run if statement is not None else ()) + timed,
        statement.steps_skipped if statement is not None else (),
        cached=statement.cached if statement is not None else (),
        touched=condition
        if statement is None
        else f"{statement.touched}\n   or {condition}"
        if statement.touched
        else None,
        deleted=deleted,
        inserted=inserted,
    )


def _rebalanced_if_joined(view: ViewDefinition, rows: str, *, several: bool) -> str:
    """The rows an INSERT writes, rebalanced (statement.rebalanced) when they come from a join or
    from ``several`` queries (a UNION ALL of steps): each streams its masters' scan tasks, the changes broadcast to them, and
    wrote a data file per task (3-6 per refresh of ~100 changed orders of a 3-way join at 1M
    orders). A single master's rows (a filter) are its marked keys' few files: written as read."""
    return rebalanced(rows) if len(view.occurrences) > 1 or several else rows


def _on_branch(write: Write, view_relation: str, target: str) -> Write:
    """A write made for the view itself (a refresh of one write) aimed at its write branch."""
    verb = "delete from" if write.kind is WriteKind.DELETE else "insert into"
    written = f"{verb} {relation(view_relation)}"
    assert write.sql.startswith(written), write.sql[:80]
    return Write(write.kind, f"{verb} {target}{write.sql[len(written) :]}")
