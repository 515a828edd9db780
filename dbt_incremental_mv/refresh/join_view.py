"""Fast refresh of join views: a single master, or inner joins of several (ViewClass.JOIN).

Oracle deletes and re-inserts, master by master, the "slice" of the view that the marked rows
of each master touch: a DEL step (view rows whose key for that master is marked) and an INS
step (the defining query with that master restricted to its marked rows, every master read as
of the marked snapshot). Here both steps of all masters become ONE statement, so the refresh is
one atomic Iceberg commit:

- only after images marked (insert-only logs): ``INSERT INTO view <INS rows>``;
- only before images (delete-only logs): ``DELETE FROM view WHERE <DEL condition>``;
- otherwise one ``MERGE`` fed by the DEL rows (flagged D) and the INS rows (flagged I).

The INS rows of several masters are combined with UNION (distinct): a new view row whose
masters changed in the same refresh comes out of each master's INS query, but every view row
is unique by its hidden key columns, so removing duplicates is exact.
"""

from __future__ import annotations

from collections.abc import Mapping

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.refresh.marked import MarkedLog
from dbt_incremental_mv.refresh.statement import RefreshStatement
from dbt_incremental_mv.sql_text import ident, idents, relation

ACTION = "_mv_action"


def _sources(view: ViewDefinition, marked: Mapping[str, MarkedLog], restricted_alias: str) -> dict[str, str]:
    """Every occurrence as of its marked master snapshot; one of them restricted to its changed keys."""
    sources = {}
    for occurrence in view.occurrences:
        log = marked[occurrence.master.name]
        if occurrence.alias == restricted_alias:
            key = ", ".join(ident(k) for k in log.spec.key)
            sources[occurrence.alias] = (
                f"(select * from {log.master_as_of()} where ({key}) in ({log.changed_keys('inserts')}))"
            )
        else:
            sources[occurrence.alias] = log.master_as_of()
    return sources


def _del_condition(view: ViewDefinition, marked: Mapping[str, MarkedLog], aliases: list[str]) -> str:
    """View rows whose hidden key for any changed occurrence is among its master's changed keys."""
    parts = []
    for alias in aliases:
        log = marked[view.occurrence(alias).master.name]
        columns = view.key_columns(alias)
        by_source = {h.source_column.lower(): h.name for h in columns}
        hidden = ", ".join(ident(by_source[k]) for k in log.spec.key)
        parts.append(f"({hidden}) in ({log.changed_keys()})")
    return "\n   or ".join(parts)


def refresh_statement(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    view_types: Mapping[str, str] | None = None,
) -> RefreshStatement | None:
    """The one statement that applies the marked changes, or None when nothing is marked.

    ``marked`` maps every master relation of the view to its marked log; ``view_types`` is
    unused (join views store what the defining query selects).
    """
    del_aliases = [o.alias for o in view.occurrences if marked[o.master.name].deletes]
    ins_aliases = [o.alias for o in view.occurrences if marked[o.master.name].inserts]
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
    target = relation(view_relation)
    stored = view.stored_columns
    ins_query = "\nunion\n".join(view.render_select(_sources(view, marked, alias)) for alias in ins_aliases)
    if not del_aliases:
        return RefreshStatement(f"insert into {target} ({idents(stored)})\n{ins_query}", run, skipped)
    # An update marks both images: its key is deleted and re-inserted, so DEL covers every image.
    del_condition = _del_condition(view, marked, del_aliases)
    if not ins_aliases:
        return RefreshStatement(f"delete from {target}\nwhere {del_condition}", run, skipped)
    hidden = [h.name for h in view.hidden_columns]
    del_rows = (
        f"select distinct {idents(hidden)} from {target}\nwhere {del_condition}"
    )
    others = [c for c in stored if c not in hidden]
    del_projection = ", ".join([f"null as {ident(c)}" for c in others] + [ident(c) for c in hidden])
    delta = (
        f"select {del_projection}, 'D' as {ident(ACTION)} from (\n{del_rows}\n)\n"
        f"union all\nselect {idents(stored)}, 'I' as {ident(ACTION)} from (\n{ins_query}\n)"
    )
    match = " and ".join(f"mv.{ident(c)} <=> delta.{ident(c)}" for c in hidden)
    values = ", ".join(f"delta.{ident(c)}" for c in stored)
    sql = (
        f"merge into {target} as mv\nusing (\n{delta}\n) as delta\n"
        f"on {match} and delta.{ident(ACTION)} = 'D'\n"
        "when matched then delete\n"
        f"when not matched and delta.{ident(ACTION)} = 'I' then insert ({idents(stored)}) values ({values})"
    )
    return RefreshStatement(sql, run, skipped)
