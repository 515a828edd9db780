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
keys (broadcast), the INSERT does not read the view. The INS rows of several masters are
combined with UNION (distinct): a new view row whose masters changed in the same refresh comes
out of each master's INS query, but every view row is unique by its hidden key columns, so
removing duplicates is exact.
"""

from __future__ import annotations

from collections.abc import Mapping

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.refresh.marked import MarkedLog
from dbt_incremental_mv.refresh.statement import (
    WRITE_BRANCH, RefreshStatement, Write, branch_target, broadcast, refresh_writes,
)
from dbt_incremental_mv.sql_text import ident, idents, relation


def _sources(view: ViewDefinition, marked: Mapping[str, MarkedLog], restricted_alias: str) -> dict[str, str]:
    """Every occurrence as of its marked master snapshot; one of them restricted to its changed keys."""
    sources = {}
    for occurrence in view.occurrences:
        log = marked[occurrence.master.name]
        if occurrence.alias == restricted_alias:
            key = ", ".join(ident(k) for k in log.spec.key)
            sources[occurrence.alias] = (
                f"(select * from {log.master_as_of()} where ({key}) in ({broadcast(log.changed_keys('inserts'))}))"
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
        parts.append(f"({hidden}) in ({broadcast(log.changed_keys())})")
    return "\n   or ".join(parts)


def refresh_statement(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    view_types: Mapping[str, str] | None = None,
    branch: str = WRITE_BRANCH,
) -> RefreshStatement | None:
    """The writes that apply the marked changes, or None when nothing is marked.

    ``marked`` maps every master relation of the view to its marked log; ``view_types`` is
    unused (join views store what the defining query selects); ``branch`` names the write
    branch a refresh of two writes uses.
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
    target = relation(view_relation) if not (del_aliases and ins_aliases) else branch_target(view_relation, branch)
    writes = []
    if del_aliases:
        # An update marks both images: its key is deleted and re-inserted, so DEL covers every image.
        writes.append(Write("delete", f"delete from {target}\nwhere {_del_condition(view, marked, del_aliases)}"))
    if ins_aliases:
        ins_query = "\nunion\n".join(view.render_select(_sources(view, marked, alias)) for alias in ins_aliases)
        writes.append(Write("insert", f"insert into {target} ({idents(view.stored_columns)})\n{ins_query}"))
    return refresh_writes(branch, writes, run, skipped)
