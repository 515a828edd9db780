"""Layout advice: Iceberg's equivalent of the indexes Oracle's fast refresh wants.

Oracle's DEL step wants an index on each rowid column of the view and its INS step indexes on
the masters' join columns. Iceberg has no indexes; it prunes data files by the min/max
statistics of their columns, which are tight when the table is sorted (or bucketed) by them:

- the view, by its hidden key columns: DEL and the MERGE find the rows of the marked keys
  in a few files;
- each master, by its key: the INS step reads the master restricted to the marked keys;
- each master that is joined to, by its join columns: the INS step looks up join partners.
"""

from __future__ import annotations

from sqlglot import exp

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.sql_text import ident, idents, relation


def _columns(expression: exp.Expression) -> list[str]:
    return [c.name for c in expression.find_all(exp.Column)]


def layout_advice(view: ViewDefinition, view_relation: str) -> list[str]:
    """Statements (as advice, never run) that make the refresh of ``view`` prune files."""
    advice = []
    hidden = [h.name for h in view.hidden_columns if h.occurrence is not None]
    if hidden:
        first = view.occurrences[0].alias
        ordered = [h.name for h in view.key_columns(first)] + [
            h for h in hidden if h not in {k.name for k in view.key_columns(first)}
        ]
        advice.append(f"alter table {relation(view_relation)} write ordered by {idents(ordered)}")
    elif view.group_key_columns:
        advice.append(f"alter table {relation(view_relation)} write ordered by {idents(view.group_key_columns)}")
    join_columns: dict[str, list[str]] = {}
    for step in (s for part in view.branches or (view,) for s in part.joins):  # (a UNION ALL's: its branches')
        master = view.occurrence(step.alias).master
        for pair in step.equi_pairs:
            for column in _columns(pair.right):
                join_columns.setdefault(master.name, [])
                if column not in join_columns[master.name]:
                    join_columns[master.name].append(column)
    seen = set()
    for occurrence in view.occurrences:
        master = occurrence.master
        if master.name in seen:
            continue
        seen.add(master.name)
        columns = list(master.key)
        for column in join_columns.get(master.name, []):
            if column not in columns:
                columns.append(column)
        advice.append(f"alter table {relation(master.name)} write ordered by {', '.join(ident(c) for c in columns)}")
    return advice
