"""Fast refresh of views recomputed by window partition: RANKED views (ViewClass.RANKED), the top
rows of each window partition of one master's rows, "latest row per key" above all
(analysis/ranking.py), and WINDOWED views (ViewClass.WINDOWED), rows carrying window functions
over a common partition (LEAD/LAG validity ranges, running totals, first values per key:
analysis/windowing.py), and PER_PARTITION views (ViewClass.PER_PARTITION), stacked queries over one
master whose windows, groupings and DISTINCTs all partition by common master columns ("latest row
per key" then aggregated, windows over windows: analysis/partitionwise.py).

**Partitions.** A row's rank depends only on the rows of its partition, so the view is the union,
over partitions, of each one's top rows. A refresh recomputes the partitions its changes touch:

- from the log's before and after images, when it carries the columns the partition
  expressions read: the partitions each changed row was in and is in now;
- otherwise from the view and the master: the partitions of the view rows holding a changed key
  (the old ones) and of the master's rows with a changed key (the new ones). A changed row that is
  not in the view ranked below the top in its old partition: taking it away changes no rank above
  it (a WINDOWED view holds every row of its partitions). That is not so when the query filters
  the ranked or windowed rows (a row that fails the filter is not in the view, yet its partition's
  windows read it), so such a view needs the images (``blocker``), as a PER_PARTITION view does
  (its rows are not the master's: no view row holds a master key).

Partition values are matched null-safely (a NULL partition key is a partition).

**Only new rows** (RANKED views; an append-only master: "latest row per key" over ingested events): the new top
rows of a partition are the top rows of its rows in the view and the new rows, ranked again on the
view's stored columns (it keeps the columns the window reads); the master is not read at all.

**One commit.** The affected partitions, computed once into the session's cache, are deleted from
the view on the refresh's write branch (a scan of the view with them broadcast) and recomputed:
the defining query over the master's rows of those partitions (a semi join with them broadcast),
staged on the branch and published with the refresh's state (statement.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.analysis.model import Lookup, PartitionQuery, Ranking, Windowing
from dbt_incremental_mv.analysis.render import render_expression, render_select, unranked_rows
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
    inserted_rows_from_log,
    refresh_writes,
)
from dbt_incremental_mv.sql_text import ident, idents, relation

KEY = "_mv_k"  # the affected partitions, as a table alias
VIEW = "_mv_v"  # the view's rows, as a table alias


def _partitioned(view: ViewDefinition) -> Ranking | Windowing | PartitionQuery:
    """What the view's rows are partitioned by (RANKED, WINDOWED or PER_PARTITION)."""
    found = view.ranking or view.windowing or view.partition_query
    assert found is not None  # a view of this module has one
    return found


def _needs_images(view: ViewDefinition) -> bool:
    """Whether the partitions a change leaves can only be read from the log's before images:
    the view filters its ranked or windowed rows, or holds no master row as it is."""
    partitioned = _partitioned(view)
    return isinstance(partitioned, PartitionQuery) or bool(partitioned.post_conjuncts)


def _partition_by(view: ViewDefinition, alias: str) -> tuple[exp.Expr, ...]:
    """The partition expressions over the occurrence ``alias``'s columns (a PER_PARTITION view
    partitions each of its masters by columns of its own)."""
    partitioned = _partitioned(view)
    if isinstance(partitioned, PartitionQuery) and partitioned.partitions:
        return partitioned.partitions[alias]
    return partitioned.partition_by


def _lookup(view: ViewDefinition, alias: str) -> Lookup | None:
    """How the occurrence ``alias`` of a PER_PARTITION view is joined, when it has no partition column."""
    return view.partition_query.lookups.get(alias) if view.partition_query is not None else None


def partition_source_columns(view: ViewDefinition, alias: str) -> tuple[str, ...]:
    """The master columns the partition expressions of the occurrence ``alias`` read, in name order
    (a lookup's: the column it is joined by)."""
    lookup = _lookup(view, alias)
    if lookup is not None:
        return (lookup.column,)
    names = {c.name for p in _partition_by(view, alias) for c in p.find_all(exp.Column)}
    return tuple(sorted(names, key=str.casefold))


def blocker(view: ViewDefinition, logged: Mapping[str, Sequence[str]]) -> str | None:
    if not _needs_images(view):
        return None
    for occurrence in view.occurrences:
        master = occurrence.master.name
        carried = {c.casefold() for c in logged.get(master, ())}
        missing = [c for c in partition_source_columns(view, occurrence.alias) if c.casefold() not in carried]
        if master in logged and missing:
            what = (
                "the query is recomputed by partition of its rows"
                if view.partition_query is not None
                else f"the query filters the {'ranked' if view.ranking is not None else 'windowed'} rows"
            )
            return (
                f"{what}, so the partitions a change leaves are read from the "
                f"change log's before images, and the log of {master} does not carry {', '.join(missing)}"
            )
    return None


def _partition_names(ranking: Ranking | Windowing | PartitionQuery) -> list[str]:
    return [f"_mv_p{i}" for i in range(1, len(ranking.partition_by) + 1)]


def _partitions_of(view: ViewDefinition, rows: str, alias: str) -> str:
    """The partition values of ``rows`` (a query of the occurrence ``alias``'s master columns),
    named ``_mv_p<i>``."""
    ranking = _partitioned(view)
    values = ", ".join(
        f"{render_expression(p)} as {ident(n)}" for p, n in zip(_partition_by(view, alias), _partition_names(ranking))
    )
    return f"select {values} from (\n{rows}\n) as {ident(alias)}"


def _affected_parts(view: ViewDefinition, view_relation: str, marked: Mapping[str, MarkedLog], alias: str) -> list[str]:
    """Queries returning the partitions the marked changes of the occurrence ``alias`` touch (see
    the module's doc): a lookup's, those of the rows of the table it is joined to that hold the
    values its changed rows had or have."""
    ranking = _partitioned(view)
    log = marked[view.occurrence(alias).master.name]
    read = partition_source_columns(view, alias)
    if _lookup(view, alias) is not None:
        return [_partitions_of_rows(view, marked, log.images(read), alias)]
    if log.logs_columns(read):
        return [_partitions_of(view, log.images(read), alias)]
    hidden = [view.key_columns_by_source(alias)[k.lower()] for k in log.spec.key]
    stored = ", ".join(
        f"{ident(c)} as {ident(n)}" for c, n in zip(ranking.partition_columns, _partition_names(ranking))
    )
    old = f"select {stored} from {relation(view_relation)} where {log.key_in(hidden)}"
    new = _partitions_of(view, f"select * from {log.master_as_of()} where {log.key_in(log.spec.key)}", alias)
    return [old, new]


def _partitions_of_rows(view: ViewDefinition, marked: Mapping[str, MarkedLog], rows: str, alias: str) -> str:
    """The partitions of ``rows`` of the occurrence ``alias`` (a query of its master's columns):
    a lookup's, those of the rows of the table it is matched to (up the chain of lookups to a
    partitioned table) that match them."""
    while (lookup := _lookup(view, alias)) is not None:
        through = view.occurrence(lookup.through)
        value, column = render_expression(lookup.through_value), ident(lookup.column)
        matched = f"{value} in (select {column} from (\n{rows}\n))"
        if lookup.null_sensitive:  # NOT IN
            matched = f"({matched} or {value} is null or exists (select 1 from (\n{rows}\n) where {column} is null))"
        rows = (
            f"select {ident(through.alias)}.* from {marked[through.master.name].master_as_of()} as "
            f"{ident(through.alias)} where {matched}"
        )
        alias = through.alias
    return _partitions_of(view, rows, alias)


def _merged_with_new_rows(view: ViewDefinition, view_relation: str, log: MarkedLog, in_view: str) -> str | None:
    """Only new rows (no before image marked): the new top rows of each affected partition are
    the top rows of the view's rows of it and the new rows, ranked again on the stored columns
    (a row outranked before is outranked still: every row ranked above a new top row is in the
    view or new). The master is not read: the new rows are the log's after images (the view's
    columns of them, when the log carries them: ``statement.inserted_rows_from_log``). Not for a view that filters
    the ranked rows (a top row that fails the filter is not in the view, yet outranks) or selects
    an expression over the rank, or a WINDOWED view; None then."""
    if view.ranking is None:
        return None
    ranking = view.ranking
    occurrence = view.occurrences[0]
    new_rows = inserted_rows_from_log(view, log, occurrence.alias)
    if (
        log.deletes
        or ranking.post_conjuncts
        or new_rows is None
        or any(
            o.expression.find(exp.Window) is not None and not isinstance(o.expression, exp.Window) for o in view.outputs
        )
    ):
        return None
    stored = view.stored_columns
    kept = f"select {idents(stored)} from {relation(view_relation)} as {ident(VIEW)} where {in_view}"
    new = unranked_rows(view, {occurrence.alias: new_rows})
    keys = {h.expression: h.name for h in view.key_columns(occurrence.alias)}
    order = [f"{ident(c)} {_direction(o)}" for c, o in zip(ranking.order_columns, ranking.order_by)]
    order += [f"{ident(keys[t])} nulls first" for t in ranking.tie_break]
    window = f"{ranking.function.value}() over (partition by {idents(ranking.partition_columns)} order by {', '.join(order)})"
    ranks = {o.name for o in view.outputs if isinstance(o.expression, exp.Window)}
    listed = ", ".join(f"`_mv_rank` as {ident(c)}" if c in ranks else ident(c) for c in stored)
    return (
        f"select {listed} from (\nselect *, {window} as `_mv_rank` from (\n{kept}\nunion all\n{new}\n)\n)\n"
        f"where `_mv_rank` <= {ranking.keep}"
    )


def _direction(ordered: exp.Ordered) -> str:
    """An ORDER BY item's direction and NULL placement, written out (Spark's defaults: NULLs
    first ascending, last descending)."""
    descending = bool(ordered.args.get("desc"))
    nulls_first = ordered.args.get("nulls_first")
    if nulls_first is None:
        nulls_first = not descending
    return f"{'desc' if descending else 'asc'} nulls {'first' if nulls_first else 'last'}"


def _matches(ranking: Ranking | Windowing | PartitionQuery, values: Sequence[str]) -> str:
    """A row of the affected partitions (alias ``_mv_k``) with the partition ``values``, null-safely."""
    return " and ".join(f"{ident(KEY)}.{ident(n)} <=> {v}" for n, v in zip(_partition_names(ranking), values))


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
    return _statement(view, view_relation, marked, branch, {})


def with_crossed_rows(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    statement: RefreshStatement | None,
    crossing: CrossedRows,
    view_types: Mapping[str, str] | None = None,  # (not read)
    branch: str = WRITE_BRANCH,
) -> RefreshStatement:
    """The writes of a view of this module that apply the marked changes and the rows its filters by
    the time moved across (refresh/phases/clock.py; by alias: a query of its master's rows that
    crossed, under the alias): the partitions of those rows are recomputed with the changes' own,
    in the same DELETE and INSERT (steps ``TIME <alias>``), which replace ``statement``'s."""
    statement = _statement(view, view_relation, marked, branch, crossing.rows)
    assert statement is not None  # (rows crossed)
    return statement


def _statement(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    branch: str,
    crossed: Mapping[str, str],
) -> RefreshStatement | None:
    changed = [o for o in view.occurrences if marked[o.master.name].has_changes]
    if not changed and not crossed:
        return None
    ranking = _partitioned(view)
    name = cached_view(branch, "partitions")
    names = idents(_partition_names(ranking))
    parts = [p for o in changed for p in _affected_parts(view, view_relation, marked, o.alias)]
    parts += [_partitions_of_rows(view, marked, rows, alias) for alias, rows in sorted(crossed.items())]
    union = "\nunion all\n".join(f"select {names} from (\n{p}\n)" for p in parts)
    affected = Cached(name, f"select distinct {names} from (\n{union}\n)")
    partitions = f"select * from {ident(name)}"
    in_view = broadcast_exists(
        partitions, ident(KEY), _matches(ranking, [f"{ident(VIEW)}.{ident(c)}" for c in ranking.partition_columns])
    )
    first = changed[0] if changed else None
    merged = (
        _merged_with_new_rows(view, view_relation, marked[first.master.name], in_view)
        if first is not None and not crossed
        else None
    )
    steps: tuple[str, ...]
    if merged is not None and first is not None:
        recomputed, steps = merged, (f"MERGE {first.alias}", "DEL+INS partitions")
    else:
        sources = {}
        for each in view.occurrences:
            alias = ident(each.alias)
            if _lookup(view, each.alias) is not None:  # read whole: the rows of the partitions join any of them
                sources[each.alias] = marked[each.master.name].master_as_of()
                continue
            in_master = broadcast_exists(
                partitions,
                ident(KEY),
                _matches(ranking, [render_expression(p) for p in _partition_by(view, each.alias)]),
            )
            sources[each.alias] = (
                f"(select {alias}.* from {marked[each.master.name].master_as_of()} as {alias} where {in_master})"
            )
        recomputed = render_select(view, sources)
        timed = tuple(f"TIME {alias}" for alias in sorted(crossed))
        steps = ((f"PARTITIONS {', '.join(o.alias for o in changed)}",) if changed else ()) + timed
        steps += ("DEL+INS partitions",)
    on_branch = branch_target(view_relation, branch)
    writes = [
        delete_write(on_branch, in_view, ident(VIEW)),
        Write(WriteKind.INSERT, f"insert into {on_branch} ({idents(view.stored_columns)})\n{recomputed}"),
    ]
    return refresh_writes(
        branch,
        writes,
        steps,
        (),
        cached=(affected,),
        touched=in_view,
        deleted=in_view,
        inserted=recomputed,
    )
