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
  null-extended: Spark turns that outer join into an inner one).

That covers Oracle's cases in one rule: when the last matching inner row goes, the slice is
recomputed and the outer row remains once, null-extended; when the first match appears, the
null-extended row goes; several inner rows of one slice changing at once are one recomputation;
an update moving an inner row between slices recomputes both. NULL join keys simply never match.

**One statement.** As for inner joins, the refresh is one statement, one atomic commit:

- only anchor rows inserted: ``INSERT`` their slices; only anchor rows deleted: ``DELETE`` them;
- when every slice holds at most one row (each occurrence after the anchor is joined on its
  whole declared key, Oracle's "unique key" case): one ``MERGE`` on the anchor key that *updates*
  each affected view row in place (the inner columns flip to NULL when the match goes, and from
  NULL to values when it comes), inserts new slices and deletes vanished ones;
- otherwise one ``MERGE`` that deletes the old slices' rows and inserts the new ones.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.analysis.model import JoinKind
from dbt_incremental_mv.refresh.marked import MarkedLog
from dbt_incremental_mv.refresh.statement import RefreshStatement
from dbt_incremental_mv.sql_text import ident, idents, relation

ACTION = "_mv_action"
_ANCHOR = "_mv_anchor#"  # prefix of the affected anchor keys in the MERGE source (no stored name has '#')


def anchor(view: ViewDefinition) -> str:
    """The first occurrence no outer join null-extends (analysis refuses FULL joins)."""
    return next(o.alias for o in view.occurrences if o.alias not in view.null_supplying)


def blocker(view: ViewDefinition, logged: Mapping[str, object]) -> str | None:
    if not any(o.alias not in view.null_supplying for o in view.occurrences):
        return "every occurrence is null-extended by some outer join: no anchor to slice the view by"
    return None


def _plain_columns(expressions: list[exp.Expression]) -> set[str]:
    return {e.name.casefold() for e in expressions if isinstance(e, exp.Column)}


def one_row_per_anchor(view: ViewDefinition) -> bool:
    """Whether every slice holds at most one row: each occurrence other than the anchor is
    joined on an equality covering its whole declared key (so it matches at most once)."""
    first = view.occurrences[0]
    if anchor(view) == first.alias and all(s.kind is not JoinKind.RIGHT for s in view.joins):
        for step in view.joins:
            covered = _plain_columns([p.right for p in step.equi_pairs])
            key = {k.casefold() for k in view.occurrence(step.alias).master.key}
            if not key <= covered:
                return False
        return True
    if len(view.occurrences) == 2 and view.joins[0].kind is JoinKind.RIGHT:
        covered = _plain_columns([p.left for p in view.joins[0].equi_pairs])
        return {k.casefold() for k in first.master.key} <= covered
    return False


def _restricted(log: MarkedLog, keys_sql: str) -> str:
    key = idents(log.spec.key)
    return f"(select * from {log.master_as_of()} where ({key}) in ({keys_sql}))"


def _new_state(view: ViewDefinition, marked: Mapping[str, MarkedLog], restricted: dict[str, str] | None = None) -> str:
    sources = {o.alias: marked[o.master.name].master_as_of() for o in view.occurrences}
    sources.update(restricted or {})
    return view.render_select(sources)


def _hidden_key(view: ViewDefinition, alias: str, log: MarkedLog) -> list[str]:
    by_source = {h.source_column.lower(): h.name for h in view.key_columns(alias)}
    return [by_source[k.lower()] for k in log.spec.key]


def _affected_anchor_keys(
    view: ViewDefinition, view_relation: str, marked: Mapping[str, MarkedLog], changed: list[str]
) -> str:
    """Keys (named as the anchor master's key columns) of every slice that may have changed."""
    root = anchor(view)
    root_log = marked[view.occurrence(root).master.name]
    root_hidden = _hidden_key(view, root, root_log)
    renamed = ", ".join(f"{ident(h)} as {ident(k)}" for h, k in zip(root_hidden, root_log.spec.key))
    parts = []
    for alias in changed:
        log = marked[view.occurrence(alias).master.name]
        if alias == root:
            parts.append(log.changed_keys())
            continue
        hidden = _hidden_key(view, alias, log)
        parts.append(  # the old slices it is in
            f"select {renamed} from {relation(view_relation)} where ({idents(hidden)}) in ({log.changed_keys()})"
        )
        present = " and ".join(f"{ident(h)} is not null" for h in hidden)
        new_rows = _new_state(view, marked, {alias: _restricted(log, log.changed_keys())})
        parts.append(f"select {renamed} from (\n{new_rows}\n) where {present}")  # the new slices it makes
    union = "\nunion all\n".join(f"select {idents(root_log.spec.key)} from (\n{p}\n)" for p in parts)
    return f"select distinct {idents(root_log.spec.key)} from (\n{union}\n)"


def refresh_statement(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    view_types: Mapping[str, str] | None = None,
) -> RefreshStatement | None:
    """The one statement that applies the marked changes, or None when nothing is marked."""
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
        rows = _new_state(view, marked, {root: _restricted(root_log, root_log.changed_keys("inserts"))})
        return RefreshStatement(f"insert into {target} ({idents(stored)})\n{rows}", (f"INS {root}",), skipped)
    if changed == [root] and not root_log.inserts:  # anchor rows gone: so are their slices
        sql = f"delete from {target}\nwhere ({idents(root_hidden)}) in ({root_log.changed_keys()})"
        return RefreshStatement(sql, (f"DEL {root}",), skipped)
    keys = _affected_anchor_keys(view, view_relation, marked, changed)
    new_slices = _new_state(view, marked, {root: _restricted(root_log, keys)})
    run = tuple(f"SLICES {a}" for a in changed)
    if one_row_per_anchor(view):
        sql = _update_in_place(view, target, root_log, root_hidden, keys, new_slices)
        return RefreshStatement(sql, run + ("UPDATE in place",), skipped)
    hidden = [h.name for h in view.hidden_columns]
    others = [c for c in stored if c not in hidden]
    old_rows = f"select distinct {idents(hidden)} from {target}\nwhere ({idents(root_hidden)}) in ({keys})"
    delta = (
        f"select {', '.join([f'null as {ident(c)}' for c in others] + [ident(c) for c in hidden])}, 'D' as {ident(ACTION)} "
        f"from (\n{old_rows}\n)\nunion all\nselect {idents(stored)}, 'I' as {ident(ACTION)} from (\n{new_slices}\n)"
    )
    match = " and ".join(f"`_mv_t`.{ident(c)} <=> `_mv_s`.{ident(c)}" for c in hidden)
    sql = (
        f"merge into {target} as `_mv_t`\nusing (\n{delta}\n) as `_mv_s`\n"
        f"on {match} and `_mv_s`.{ident(ACTION)} = 'D'\n"
        "when matched then delete\n"
        f"when not matched and `_mv_s`.{ident(ACTION)} = 'I' then insert ({idents(stored)}) "
        f"values ({', '.join(f'`_mv_s`.{ident(c)}' for c in stored)})"
    )
    return RefreshStatement(sql, run + ("DEL+INS slices",), skipped)


def _update_in_place(
    view: ViewDefinition, target: str, root_log: MarkedLog, root_hidden: list[str], keys: str, new_slices: str
) -> str:
    """One row per anchor key: update it to its new slice row, insert new, delete vanished."""
    stored = view.stored_columns
    key_columns = root_log.spec.key
    on_keys = " and ".join(f"`_mv_k`.{ident(k)} = `_mv_n`.{ident(h)}" for k, h in zip(key_columns, root_hidden))
    source = (
        f"select {', '.join(f'`_mv_k`.{ident(k)} as {ident(_ANCHOR + k)}' for k in key_columns)}, "
        f"{', '.join(f'`_mv_n`.{ident(c)}' for c in stored)}, "
        f"case when `_mv_n`.{ident(root_hidden[0])} is null then 'D' else 'U' end as {ident(ACTION)}\n"
        f"from ({keys}) as `_mv_k`\nleft join (\n{new_slices}\n) as `_mv_n` on {on_keys}"
    )
    match = " and ".join(f"`_mv_t`.{ident(h)} = `_mv_s`.{ident(_ANCHOR + k)}" for k, h in zip(key_columns, root_hidden))
    updates = ", ".join(f"{ident(c)} = `_mv_s`.{ident(c)}" for c in stored if c not in root_hidden)
    return (
        f"merge into {target} as `_mv_t`\nusing (\n{source}\n) as `_mv_s`\n"
        f"on {match}\n"
        f"when matched and `_mv_s`.{ident(ACTION)} = 'D' then delete\n"
        f"when matched then update set {updates}\n"
        f"when not matched and `_mv_s`.{ident(ACTION)} = 'U' then insert ({idents(stored)}) "
        f"values ({', '.join(f'`_mv_s`.{ident(c)}' for c in stored)})"
    )
