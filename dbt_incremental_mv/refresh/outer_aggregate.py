"""The signed delta of an aggregate over outer joins (ViewClass.AGGREGATE with LEFT/RIGHT joins),
for aggregate_view.py, which applies it like any aggregate delta.

An inner join is linear in each of its masters, so an aggregate's delta over inner joins is a sum
of terms, each joining one master's signed log images with the others (aggregate_view.py). An
outer join is not linear in its null-supplying side: when the last order of a customer goes, the
customer's null-extended row appears, and no signed image says so. So the delta is computed by
**slices** (outer_join_view.py): every row of the join holds exactly one *anchor* row (the first
occurrence no outer join null-extends), and restricting the anchor to some keys commutes with the
whole query. For the set ``K`` of anchor keys whose slices may have changed,

    delta = + (the defining query's rows over the masters' new state, anchor in K)
            - (the same rows over the masters' old state, anchor in K)

projected, like an inner-join term, on the group keys and the aggregated expressions with a sign
of +1 or -1; aggregate_view sums the signs per group. Rows of a slice that did not change appear
once with each sign and cancel in every COUNT and SUM; for MIN/MAX they make the group's stored
extreme look removed, so the group is recomputed (aggregate_view's rule, exact either way).

- **K** is, for each changed occurrence X: the anchor's own changed keys (X the anchor); or the
  anchor keys its before and after images hold, when X is joined to the anchor on the anchor's
  whole key (analysis/links.py) and its log carries those columns; or else the anchor keys of the
  rows of the join (the FROM clause without the WHERE: a superset, so a WHERE on a null-supplying
  column cannot hide a slice that changed) in which X's changed rows are present, in the new
  state and in the old. A slice changes only if some row of it holds a changed row in one of the
  two states (a null-extended row appears only when a row holding the changed partner goes).
- **The old state** of a master is exact (an outer join needs real rows, not signed ones: a row
  and its cancelling image would still "match"): the new rows less the changed keys, plus the
  changed keys' old rows, which are the rows whose signed count (new row +1, before images +1,
  after images -1) is positive. Insert-only and delete-only logs need no grouping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.analysis.links import KeyLink, key_links
from dbt_incremental_mv.logs.contract import DELETE, INSERT
from dbt_incremental_mv.refresh.marked import MarkedLog
from dbt_incremental_mv.sql_text import broadcast, ident, idents, string

NET = "_mv_net"  # a changed key's signed count of one version of its row


def anchor(view: ViewDefinition) -> str:
    """The first occurrence no outer join null-extends (analysis refuses FULL joins)."""
    return next(o.alias for o in view.occurrences if o.alias not in view.null_supplying)


def blocker(view: ViewDefinition) -> str | None:
    if not any(o.alias not in view.null_supplying for o in view.occurrences):
        return "every occurrence is null-extended by some outer join: no anchor to slice the aggregate by"
    return None


def read_columns(view: ViewDefinition, alias: str) -> list[str]:
    """The columns the delta reads of an occurrence: those the view reads, and its key."""
    occurrence = view.occurrence(alias)
    names = {c.casefold(): c for c in view.referenced_columns[alias]}
    for column in occurrence.master.key:
        names.setdefault(column.casefold(), column)
    return sorted(names.values(), key=str.casefold)


def old_state(log: MarkedLog, columns: list[str]) -> str:
    """The master before the marked changes, as real rows (its ``columns``)."""
    new = log.master_as_of()
    if not log.has_changes:
        return new
    key = log.spec.key
    on = " and ".join(f"`_mv_m`.{ident(k)} = `_mv_k`.{ident(k)}" for k in key)
    listed = ", ".join(f"`_mv_m`.{ident(c)}" for c in columns)
    if not log.deletes:  # only inserts: the new rows less the inserted keys
        return (
            f"(select {listed} from {new} as `_mv_m` left anti join ({log.changed_keys('inserts')}) as `_mv_k` on {on})"
        )
    if not log.inserts:  # only deletes: the new rows and the deleted ones
        return f"(select {idents(columns)} from {new}\nunion all\nselect {idents(columns)} from (\n{log.images(columns, DELETE)}\n))"
    unchanged = f"select {listed} from {new} as `_mv_m` left anti join ({log.changed_keys()}) as `_mv_k` on {on}"
    sign = f"case {ident('_mv_op')} when {string(DELETE)} then 1 when {string(INSERT)} then -1 end"
    now = (
        f"select {listed}, 1 as {ident(NET)} from {new} as `_mv_m` left semi join ({log.changed_keys()}) as `_mv_k` on {on}"
    )
    images = f"select {idents(columns)}, {sign} as {ident(NET)} from (\n{log.images(columns)}\n)"
    rebuilt = (
        f"select {idents(columns)} from (\n{now}\nunion all\n{images}\n)\n"
        f"group by {idents(columns)} having sum({ident(NET)}) > 0"
    )
    return f"(\n{unchanged}\nunion all\n{rebuilt}\n)"


def _restricted(source: str, columns: tuple[str, ...] | list[str], keys_sql: str) -> str:
    """``source`` restricted to the rows whose ``columns`` are among the keys ``keys_sql`` returns."""
    return f"(select * from {source} where ({idents(columns)}) in ({broadcast(keys_sql)}))"


def _links_from_anchor(view: ViewDefinition) -> list[KeyLink]:
    root = anchor(view)
    return [link for link in key_links(view) if link.source == root]


def _slices(view: ViewDefinition, states: Mapping[str, str], keys_sql: str) -> dict[str, str]:
    """The sources of the slices of the anchor keys ``keys_sql`` returns (named as the anchor's key
    columns): the anchor restricted to them, and every occurrence joined on the anchor's key too."""
    root = anchor(view)
    sources = dict(states)
    sources[root] = _restricted(states[root], view.occurrence(root).master.key, keys_sql)
    for link in _links_from_anchor(view):
        if link.target != root:
            sources[link.target] = _restricted(states[link.target], link.columns, keys_sql)
    return sources


def _anchor_keys_of_rows(view: ViewDefinition, sources: Mapping[str, str], present: str) -> str:
    """The anchor keys of the rows of the view's join (its FROM clause, no WHERE) over ``sources``
    in which ``present`` (an alias) is not null-extended."""
    root = anchor(view)
    select = view.select_expression(sources, include_hidden=False)
    select.set("where", None)
    select.set("group", None)
    select.set("expressions", [
        exp.Alias(this=exp.column(k, table=root, quoted=True), alias=exp.to_identifier(k, quoted=True))
        for k in view.occurrence(root).master.key
    ])
    for column in view.occurrence(present).master.key:
        select = select.where(exp.Not(this=exp.Is(this=exp.column(column, table=present, quoted=True), expression=exp.Null())))
    return ViewDefinition.render_expression(select)


def affected_anchor_keys(view: ViewDefinition, marked: Mapping[str, MarkedLog], old: Mapping[str, str]) -> str:
    """The distinct anchor keys (named as the anchor master's key columns) whose slices a marked
    change may have changed; ``old``: each occurrence's old state (old_state)."""
    root = anchor(view)
    root_key = view.occurrence(root).master.key
    new = {o.alias: marked[o.master.name].master_as_of() for o in view.occurrences}
    links = {link.target: link for link in _links_from_anchor(view)}
    parts = []
    for occurrence in view.occurrences:
        log = marked[occurrence.master.name]
        if not log.has_changes:
            continue
        alias = occurrence.alias
        if alias == root:
            parts.append(log.changed_keys())
            continue
        link = links.get(alias)
        if link is not None and log.logs_columns(link.columns):
            named = ", ".join(f"{ident(c)} as {ident(k)}" for c, k in zip(link.columns, root_key))
            present = " and ".join(f"{ident(c)} is not null" for c in link.columns)
            parts.append(f"select {named} from (\n{log.images(link.columns)}\n) where {present}")
            continue
        key = occurrence.master.key
        changed = log.changed_keys()
        for states in (new, old):
            parts.append(_anchor_keys_of_rows(view, {**states, alias: _restricted(states[alias], key, changed)}, alias))
    union = "\nunion all\n".join(f"select {idents(root_key)} from (\n{p}\n)" for p in parts)
    return f"select distinct {idents(root_key)} from (\n{union}\n)"


def delta_terms(
    view: ViewDefinition, marked: Mapping[str, MarkedLog], keys_sql: str,
    project: Callable[[exp.Select, exp.Expression], str],
) -> list[str]:
    """The two signed terms of the delta: the affected slices in the new state (+1) and in the old
    (-1). ``keys_sql`` returns the affected anchor keys; ``project(select, sign)`` turns a select
    of the defining query into a term (group keys, aggregated expressions, the sign)."""
    new = {o.alias: marked[o.master.name].master_as_of() for o in view.occurrences}
    old = old_states(view, marked)
    terms = []
    for states, sign in ((new, 1), (old, -1)):
        select = view.select_expression(_slices(view, states, keys_sql), include_hidden=False)
        terms.append(project(select, exp.Literal.number(sign)))
    return terms


def old_states(view: ViewDefinition, marked: Mapping[str, MarkedLog]) -> dict[str, str]:
    """Every occurrence's old state (its new one when its log marked nothing)."""
    return {o.alias: old_state(marked[o.master.name], read_columns(view, o.alias)) for o in view.occurrences}
