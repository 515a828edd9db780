"""Semi-join reduction: the masters of an inner-join refresh query read only the rows that can
join the few rows the query starts from.

An INS step (join views) or a delta term (aggregate views) joins a few restricted rows (one
master's changed rows, or the rows tied to them) with the other masters read in full. Spark
plans those joins from the tables' sizes, and a restricted subquery keeps the size of the table
it reads: after the first join, the others become sort-merge joins that shuffle the other
masters whole (TPC-H-shaped data: the line items of the orders of a few changed customers were
found by shuffling all 6M line items and all orders).

Along every inner key link (analysis/links.py: one side's columns equal the other's whole key)
the restriction moves to the neighbour, as a broadcast semi join with the restricted side's
values (written as a ``LEFT SEMI JOIN``, not an ``IN``: Spark infers an ``IN`` subquery through
the join's equality onto the restricted side too, and reads it once more for nothing):

- **to the occurrence that holds the restricted one's key** (the fact of a changed dimension, the
  line items of changed orders): always. The neighbour is then streamed through a broadcast semi
  join instead of being shuffled; the price is reading the restricted side once more for its keys;
- **to the occurrence whose key the restricted one holds** (the orders of changed line items):
  only when the marked keys bound those values (their literals or ranges, see marked.py), so
  that Iceberg skips the neighbour's files outside them. Without them the neighbour is already
  streamed against the broadcast change, and an extra ``IN`` only adds a Spark job (measured: a
  1.07 s delta became 1.71 s).

A view of two masters gets no semi join: its one join is between the restricted side, whose
size Spark estimates small (a log), and its neighbour, which Spark then streams against it. Its
neighbour is restricted by literal values only (a filter at no cost that prunes the neighbour's
files and row groups where it is sorted by them: an indexed join state, analysis/indexed.py).

Values or ranges are known for a restricted side's key columns when its rows are a log's marked
images (or the master restricted to their keys), and they move with the values through each
link, as a filter Spark pushes to the neighbour's scan; literal values restrict the neighbour by
themselves (no semi join: the restricted side is not read again). Only inner links: a neighbour row that
matches none of the restricted rows makes no row of the query.

**Keys from the log, not the master.** A side restricted to a log's marked keys (an INS step's
master) has no key outside them: when a link's columns on its side are among its key columns,
their values are read from the log's keys (``key_sets``) instead of from the restricted master
(TPC-H-shaped data: the orders of changed line items were found by reading ``lineitem`` once
more, two of its data files at scale factor 10, for ``l_orderkey`` values the log holds).
"""

from __future__ import annotations

from collections.abc import Mapping

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.analysis.links import key_links
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.sql_text import between, broadcast, ident, idents, literal

# what is known of a column's values among a restricted side's rows: ("values", the distinct
# values) or ("ranges", disjoint (lowest, highest) ranges holding them)
Known = tuple[str, tuple]
# column (case-folded) -> what is known of its values
Ranges = dict[str, Known]
REDUCED_FROM = 3  # masters in a view whose refresh queries are reduced (see above)


def marked_ranges(log: MarkedLog) -> Ranges:
    """What the mark step knows of the key columns of ``log``'s marked images: every column's
    values when the keys are literals, else the ranges of the first column."""
    if log.key_values is not None:
        return {
            column.casefold(): ("values", tuple(dict.fromkeys(k[i] for k in log.key_values if k[i] is not None)))
            for i, column in enumerate(log.spec.key)
        }
    if log.key_ranges:
        return {log.spec.key[0].casefold(): ("ranges", log.key_ranges)}
    return {}


def known_filter(column: str, known: Known) -> str:
    """``column`` (rendered) within what is known of its values: a filter Spark pushes to a scan."""
    kind, items = known
    if kind == "values":
        return f"{column} in ({', '.join(literal(v) for v in items)})" if items else "false"
    ranges = [between(column, low, high) for low, high in items]
    return ranges[0] if len(ranges) == 1 else f"({' or '.join(ranges)})"


def reduce_sources(
    view: ViewDefinition,
    sources: Mapping[str, str],
    restricted: Mapping[str, Ranges],
    key_sets: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``sources`` (alias -> what the query reads for it) with the occurrences reachable from the
    ``restricted`` ones (alias -> the ranges known on its columns) through inner key links
    restricted in turn, breadth first, each at most once. ``key_sets``: alias -> a query of
    keys its restricted rows' keys are among (its master's key columns, named as in the master)."""
    key_sets = key_sets or {}
    out = dict(sources)
    # of two masters, the restricted side and its neighbour are a broadcast join already: the
    # neighbour is restricted only by literals (which prune its files and row groups, as an
    # indexed join state sorted by them), not by a semi join reading the restricted side again
    literals_only = len(view.occurrences) < REDUCED_FROM
    ranges = {alias: dict(known) for alias, known in restricted.items()}
    queue = [alias for alias in view.aliases if alias in restricted]
    links = [link for link in key_links(view) if link.inner]
    while queue:
        alias = queue.pop(0)
        for link in links:
            if link.source == alias:  # the neighbour holds our key
                neighbour, ours, theirs = link.target, view.occurrence(alias).master.key, link.columns
            elif link.target == alias:  # we hold the neighbour's key
                neighbour, ours, theirs = link.source, link.columns, view.occurrence(link.source).master.key
            else:
                continue
            if neighbour in ranges:
                continue
            pairs = [(o, t) for o, t in zip(ours, theirs) if o.casefold() in ranges[alias]]
            if link.target == alias and not pairs:
                continue
            carried = {t.casefold(): ranges[alias][o.casefold()] for o, t in pairs}
            bounded = [known_filter(f"`_mv_y`.{ident(t)}", carried[t.casefold()]) for _, t in pairs]
            if len(pairs) == len(ours) and all(carried[t.casefold()][0] == "values" for _, t in pairs):
                # the join values are literals: they restrict the neighbour without reading the
                # restricted side again (a superset of its partners, as any reduction may be)
                out[neighbour] = f"(select `_mv_y`.* from {out[neighbour]} as `_mv_y`\nwhere {' and '.join(bounded)})"
                ranges[neighbour] = carried
                queue.append(neighbour)
                continue
            if literals_only:
                continue
            key = {c.casefold() for c in view.occurrence(alias).master.key}
            if alias in key_sets and all(o.casefold() in key for o in ours):  # (a superset of the values)
                values = f"select distinct {idents(ours)} from (\n{key_sets[alias]}\n)"
            else:
                values = f"select distinct {idents(ours)} from {out[alias]}"
            on = " and ".join(f"`_mv_y`.{ident(t)} = `_mv_r`.{ident(o)}" for o, t in zip(ours, theirs))
            where = f"\nwhere {' and '.join(bounded)}" if bounded else ""
            out[neighbour] = (
                f"(select `_mv_y`.* from {out[neighbour]} as `_mv_y`\n"
                f"left semi join ({broadcast(values)}) as `_mv_r` on {on}{where})"
            )
            ranges[neighbour] = carried
            queue.append(neighbour)
    return out
