"""The delta of an aggregate over outer joins (ViewClass.AGGREGATE with LEFT/RIGHT joins), for
aggregate_view.py, which applies it like any aggregate delta (signed rows summed per group).

The delta is a telescoping sum over the changed occurrences, as for inner joins: the change of
one occurrence with those before it in their new state and those after it in their old state.

- **An occurrence no outer join null-extends** (the anchor, or one inner joined to it): the query
  is linear in it (a LEFT JOIN makes each left row's rows independently of the other left rows),
  so its term is its signed log images joined with the others, as for inner joins
  (aggregate_view.py), the others' old states as real rows where an outer join reads them, and
  every occurrence joined on its key read for the changed keys only.
- **A null-supplying occurrence X, row by row** (Oracle's outer-join refresh), when X is joined
  by a LEFT JOIN on equalities (and filters of its own) and no later join reads X or null-extends
  what comes before it. Then the rows an earlier row makes with X depend on it only through the
  values ``v`` of the equalities' other side: X's rows matching ``v``, or one null-extended row
  when there are none. So the change is: the earlier rows joined with X's signed images (where X
  is present), plus the null-extended row (+1) of the earlier rows whose ``v`` lost its last
  row of X, less it (-1) where ``v`` got its first one. Those transitions are read from the count
  of X's new rows for the values the images hold (a scan of X with those values broadcast) less
  the images' signed count (the old count): no old state of X is built.
- **Otherwise, by slices** (outer_join_view.py): every row of the join holds exactly one anchor
  row (the first occurrence no outer join null-extends), and restricting the anchor to some keys
  commutes with the whole query. For the anchor keys ``K`` whose slices the change may have
  changed, the term is (rows of the slices with X new, +1) - (rows with X old, -1). ``K``: the
  anchor keys X's before and after images hold when X is joined to the anchor on the anchor's
  whole key (analysis/links.py) and its log carries those columns; else the anchor keys of the
  rows of the join (the FROM clause without the WHERE: a superset) in which X's changed rows are
  present, in X's new state and its old. Unchanged rows of a slice appear with both signs and
  cancel in COUNT and SUM; for MIN/MAX they make the stored extreme look removed, and the group
  is recomputed (aggregate_view's rule: exact either way).

**Old states as real rows.** An outer join needs real rows, not signed ones (a row and its
cancelling image would still "match"): the new rows less the changed keys, plus the changed
keys' old rows, which are the versions whose signed count (new row +1, before images +1, after
images -1) is positive. Insert-only and delete-only logs need no grouping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.analysis.joins import filters_only_its_side, references
from dbt_incremental_mv.analysis.links import KeyLink, key_links
from dbt_incremental_mv.analysis.model import JoinKind, JoinStep
from dbt_incremental_mv.analysis.render import render_expression, select_expression
from dbt_incremental_mv.logs.contract import DELETE
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.views.outer_join_view import anchor, linked_anchor_keys
from dbt_incremental_mv.sql_text import broadcast, ident, idents

NET = "_mv_net"  # a changed key's signed count of one version of its row


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
    now = f"select {listed}, 1 as {ident(NET)} from {new} as `_mv_m` left semi join ({log.changed_keys()}) as `_mv_k` on {on}"
    images = log.signed_images(columns, NET, invert=True)
    rebuilt = (
        f"select {idents(columns)} from (\n{now}\nunion all\n{images}\n)\n"
        f"group by {idents(columns)} having sum({ident(NET)}) > 0"
    )
    return f"(\n{unchanged}\nunion all\n{rebuilt}\n)"


def _restricted(source: str, columns: tuple[str, ...] | list[str], keys_sql: str) -> str:
    """``source`` restricted to the rows whose ``columns`` are among the keys ``keys_sql`` returns."""
    return f"(select * from {source} where ({idents(columns)}) in ({broadcast(keys_sql)}))"


# a delta term from a select of the defining query and the sign of its rows (aggregate_view._term)
Project = Callable[[exp.Select, exp.Expr], str]
# the affected anchor keys of a changed occurrence, computed once: (alias, query) -> what reads them
Keys = Callable[[str, str], str]


def null_supplying_terms(
    view: ViewDefinition,
    alias: str,
    marked: Mapping[str, MarkedLog],
    states: Mapping[str, str],
    project: Project,
    keys: Keys,
) -> list[str]:
    """The delta terms of the change of ``alias``, an occurrence an outer join null-extends, with
    every other occurrence read from ``states`` (the new state of those before it in the
    telescoping sum, the old state of those after it: real rows when the change is applied by
    slices or an outer join reads them; else possibly signed, ``project`` multiplying the signs)."""
    log = marked[view.occurrence(alias).master.name]
    step = by_row_step(view, alias)
    if step is not None:
        return _row_terms(view, step, log, states, project)
    return _slice_terms(view, alias, log, states, project, keys)


def restrict_to_changed_keys(
    view: ViewDefinition, alias: str, log: MarkedLog, sources: Mapping[str, str]
) -> dict[str, str]:
    """``sources`` of the term of a change of ``alias`` (no outer join null-extends it: its signed
    images), with every occurrence joined on its key restricted to the keys the log marked: their
    other rows join no image, whatever the join (for inner-join views semijoin.py does this)."""
    out = dict(sources)
    for link in key_links(view):
        if link.source == alias and link.target != alias:
            out[link.target] = f"(select * from {out[link.target]} where {log.key_in(link.columns)})"
    return out


# ---------------------------------------------------------------- row by row
def by_row_step(view: ViewDefinition, alias: str) -> JoinStep | None:
    """The LEFT JOIN step of ``alias`` when its change applies row by row: ``alias`` is joined by
    equalities with what comes before it (plus filters of its own: analysis/joins.py), no later
    step reads it or null-extends what comes before (a RIGHT JOIN), and nothing else does (WHERE
    never reads a null-supplying occurrence). Then the rows it makes of an earlier row depend on
    that row only through the values of the equalities' other side (``v``)."""
    steps = list(view.joins)
    position = next((i for i, s in enumerate(steps) if s.alias == alias), None)
    if position is None:
        return None
    step = steps[position]
    if step.kind is not JoinKind.LEFT or not step.equi_pairs or any(p.null_safe for p in step.equi_pairs):
        return None
    if not filters_only_its_side(step):  # its matches also depend on the earlier rows' other columns
        return None
    for later in steps[position + 1 :]:
        if later.kind is JoinKind.RIGHT or (later.condition is not None and alias in references(later.condition)):
            return None
    return step


def _value_names(step: JoinStep) -> list[str]:
    return [f"_mv_v{i}" for i in range(len(step.equi_pairs))]


def _own_values(step: JoinStep, rows: str, also: str = "") -> str:
    """``rows`` (real or signed rows of the step's occurrence, as its alias) that can match: their
    join values (``_mv_v<i>``) not null, its own ON filters true; with ``also`` projected."""
    alias = step.alias
    values = ", ".join(
        f"{render_expression(p.right)} as {ident(n)}" for p, n in zip(step.equi_pairs, _value_names(step))
    )
    conditions = [f"{render_expression(p.right)} is not null" for p in step.equi_pairs]
    conditions += [f"({render_expression(r)})" for r in step.residual]
    return (
        f"select {values}{', ' + also if also else ''} from {rows} as {ident(alias)} where {' and '.join(conditions)}"
    )


def _transitions(step: JoinStep, log: MarkedLog, columns: list[str]) -> str:
    """The join values ``v`` whose rows of the occurrence went from none to some (sign -1: the
    earlier rows' null-extended row goes) or from some to none (+1: it comes), with the sign.
    Counted from the new state (rows matching the values the images hold) less the images'
    signed count: the old count."""
    names = _value_names(step)
    listed = idents(names)
    images = f"({log.signed_images(columns, '_mv_s')})"
    net = (
        f"select {listed}, sum(`_mv_s`) as `_mv_d` from (\n{_own_values(step, images, '`_mv_s`')}\n) group by {listed}"
    )
    wanted = f"select distinct {listed} from (\n{net}\n)"
    now = (
        f"select {listed}, count(*) as `_mv_n` from (\n{_own_values(step, log.master_as_of())}\n)\n"
        f"where ({listed}) in ({broadcast(wanted)}) group by {listed}"
    )
    on = " and ".join(f"`_mv_d`.{ident(n)} = `_mv_n`.{ident(n)}" for n in names)
    count = "coalesce(`_mv_n`.`_mv_n`, 0)"
    return (  # (the counts are a few rows, whatever Spark estimates from the fact's size)
        f"select /*+ BROADCAST(`_mv_n`) */ {', '.join(f'`_mv_d`.{ident(n)}' for n in names)}, "
        f"case when {count} = 0 then 1 else -1 end as `_mv_t`\n"
        f"from (\n{net}\n) as `_mv_d` left join (\n{now}\n) as `_mv_n` on {on}\n"
        f"where ({count} = 0) <> ({count} - `_mv_d`.`_mv_d` = 0)"
    )


def _row_terms(
    view: ViewDefinition, step: JoinStep, log: MarkedLog, states: Mapping[str, str], project: Project
) -> list[str]:
    """Row by row (Oracle's outer-join refresh, for an aggregate): the earlier rows joined with
    the occurrence's signed images (rows where it is present), and the null-extended rows that
    come (+1) or go (-1) for the join values whose rows went from some to none or back."""
    alias = step.alias
    columns = read_columns(view, alias)
    signed = f"({log.signed_images(columns, '_mv_s')})"
    changed = select_expression(view, {**states, alias: signed}, include_hidden=False)
    changed = changed.where(
        exp.Not(this=exp.Is(this=exp.column("_mv_s", table=alias, quoted=True), expression=exp.Null()))
    )
    terms = [project(changed, exp.column("_mv_s", table=alias, quoted=True))]
    empty = f"(select {idents(columns)} from {log.master_as_of()} where false)"
    extended = select_expression(view, {**states, alias: empty}, include_hidden=False)
    on = exp.and_(
        *(
            exp.EQ(this=p.left.copy(), expression=exp.column(n, table="_mv_t", quoted=True))
            for p, n in zip(step.equi_pairs, _value_names(step))
        )
    )
    extended = extended.join(
        exp.Subquery(
            this=exp.maybe_parse(broadcast(_transitions(step, log, columns)), dialect="spark"),
            alias=exp.TableAlias(this=exp.to_identifier("_mv_t", quoted=True)),
        ),
        on=on,
        join_type="inner",
    )
    terms.append(project(extended, exp.column("_mv_t", table="_mv_t", quoted=True)))
    return terms


# ---------------------------------------------------------------- by slices
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
    select = select_expression(view, sources, include_hidden=False)
    select.set("where", None)
    select.set("group", None)
    select.set(
        "expressions",
        [
            exp.Alias(this=exp.column(k, table=root, quoted=True), alias=exp.to_identifier(k, quoted=True))
            for k in view.occurrence(root).master.key
        ],
    )
    for column in view.occurrence(present).master.key:
        select = select.where(
            exp.Not(this=exp.Is(this=exp.column(column, table=present, quoted=True), expression=exp.Null()))
        )
    return render_expression(select)


def affected_anchor_keys(view: ViewDefinition, alias: str, log: MarkedLog, states: Mapping[str, str]) -> str:
    """The distinct anchor keys (named as the anchor master's key columns) whose slices the change
    of ``alias`` (an occurrence other than the anchor) may have changed."""
    root_key = view.occurrence(anchor(view)).master.key
    link = next((link for link in _links_from_anchor(view) if link.target == alias), None)
    if link is not None and log.logs_columns(link.columns):
        named = ", ".join(f"{ident(c)} as {ident(k)}" for c, k in zip(link.columns, root_key))
        present = " and ".join(f"{ident(c)} is not null" for c in link.columns)
        return f"select distinct {named} from (\n{log.images(link.columns)}\n) where {present}"
    key = view.occurrence(alias).master.key
    parts = [
        _anchor_keys_of_rows(view, {**states, alias: f"(select * from {state} where {log.key_in(key)})"}, alias)
        for state in (log.master_as_of(), old_state(log, read_columns(view, alias)))
    ]
    union = "\nunion all\n".join(f"select {idents(root_key)} from (\n{p}\n)" for p in parts)
    return f"select distinct {idents(root_key)} from (\n{union}\n)"


def _slice_terms(
    view: ViewDefinition,
    alias: str,
    log: MarkedLog,
    states: Mapping[str, str],
    project: Project,
    keys: Keys,
) -> list[str]:
    """By slices: the affected slices with ``alias`` in its new state (+1) and in its old (-1)."""
    keys_sql = keys(alias, affected_anchor_keys(view, alias, log, states))
    terms = []
    for state, sign in ((log.master_as_of(), 1), (old_state(log, read_columns(view, alias)), -1)):
        select = select_expression(view, _slices(view, {**states, alias: state}, keys_sql), include_hidden=False)
        terms.append(project(select, exp.Literal.number(sign)))
    return terms


def crossed_slice_terms(
    at_new: ViewDefinition,
    at_old: ViewDefinition,
    alias: str,
    rows: str,
    states: Mapping[str, str],
    project: Project,
    keys: Keys,
) -> list[str]:
    """The terms of the rows of ``alias`` (an occurrence an outer join null-extends) that crossed
    the view's time boundary (``rows``: a query of them, under the alias), by slices: the slices
    holding a crossed row at either time (the anchor keys it names when joined on the anchor's
    whole key, else those of the join's rows it is present in, by the definition at the new time
    ``at_new`` and at the old ``at_old``), their rows at the new time (+1) less those at the old
    (-1), every occurrence read from ``states`` (real rows). A row is in the join exactly when its
    filters hold, so no other slice changed."""
    root_key = at_new.occurrence(anchor(at_new)).master.key
    crossed = f"(\n{rows}\n)"
    link = next((link for link in _links_from_anchor(at_new) if link.target == alias), None)
    if link is not None:
        parts = [linked_anchor_keys(link, root_key, rows)]
    else:
        parts = [_anchor_keys_of_rows(d, {**states, alias: crossed}, alias) for d in (at_new, at_old)]
    union = "\nunion all\n".join(f"select {idents(root_key)} from (\n{p}\n)" for p in parts)
    keys_sql = keys(f"{alias}_time", f"select distinct {idents(root_key)} from (\n{union}\n)")
    terms = []
    for definition, sign in ((at_new, 1), (at_old, -1)):
        select = select_expression(definition, _slices(definition, states, keys_sql), include_hidden=False)
        terms.append(project(select, exp.Literal.number(sign)))
    return terms
