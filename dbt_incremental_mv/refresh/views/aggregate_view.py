"""Fast refresh of aggregate views (ViewClass.AGGREGATE): GROUP BY or global aggregates with
COUNT(*), COUNT(x), SUM(x), AVG(x), MIN(x), MAX(x) over one master, inner joins of several, or
LEFT/RIGHT joins.

The refresh is ONE ``MERGE`` into the view, fed by the *signed net delta* of every affected
group (SQL Server's indexed-view maintenance, Oracle's aggregate fast refresh):

1. **Signed rows.** A change log's images are a signed bag: an after image (``I``) counts +1, a
   before image (``D``) -1 (an update is both). Summed over the marked images of a master they
   are exactly ``new state - old state``, whatever order the changes happened in, so nothing
   here needs the log's order. For a join ``R1 x ... x Rn`` the delta is
   ``sum over changed i of  R1' x ... x R(i-1)' x dRi x R(i+1) x ... x Rn``, with ``Rj'`` the new
   state (the master as of the marked snapshot) and ``Rj`` the old one, rebuilt from the new
   state and the log: the new rows minus the inserted keys (insert-only logs), plus the deleted
   images (delete-only logs), or the new rows plus the images with their sign inverted (mixed).
   A row's sign is the product of its occurrences' signs; WHERE and ON filters apply as written.
   A single-master view reads only the log, never the master.
2. **Per group** (matched null-safely on the GROUP BY columns): ``d_count = sum(sign)``, for each
   COUNT(x) ``sum(sign where x is not null)``, for each SUM(x) ``sum(sign * x)``; for MIN/MAX the
   extreme of the positive rows (candidates) and of the negative rows (possible removals).
3. **Apply**, without a shuffle of the view (statement.py): a ``DELETE`` of the delta's groups
   on the write branch (a scan of the view with the delta broadcast), then an ``INSERT`` of their
   new rows staged on it: the delta joined with the groups' stored rows (read with the same
   broadcast filter, so only a few rows are joined). A group reaching zero rows is not inserted
   again; SUM is NULL when its hidden non-NULL count is 0; AVG = hidden sum / hidden count in the
   stored type. A global aggregate (no GROUP BY) always keeps its one row. (A ``MERGE`` would
   write the same delete files and rows, but Spark plans its join with the view from size
   estimates that ignore how few rows the delta has, and a MERGE takes no join hint.)
4. **MIN/MAX.** The new extreme is ``greatest(stored, candidates)`` (``least`` for MIN) unless a
   negative row may have removed the stored extreme: its value reaches the stored one (or the
   group had none). Only those groups are recomputed, from the masters as of the marked
   snapshot restricted to the flagged groups' rows (a semi join below the aggregation), and
   only when some log has before images: insert-only refreshes never recompute. Oracle
   recomputes every group the log mentions; here deleting a non-extreme row recomputes nothing.
   (A positive row that is not really new always comes with an equal negative one, which flags
   the group whenever that positive could have won, so candidates never overstate.)
5. **Outer joins.** Over LEFT/RIGHT joins the sum of step 1 still holds for the masters no outer
   join null-extends (the query is linear in them); a null-supplying master's change is applied
   row by row or by slices (outer_aggregate.py). Its negative rows may remove a stored extreme
   whatever the logs hold, so MIN/MAX groups are checked (and recomputed) then too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import exp

from dbt_incremental_mv.analysis import OutputKind, ViewDefinition
from dbt_incremental_mv.analysis.hidden import RESERVE, ROW_COUNT_COLUMN
from dbt_incremental_mv.analysis.model import HiddenColumn, HiddenPurpose
from dbt_incremental_mv.analysis.render import render_expression, select_expression
from dbt_incremental_mv.logs.contract import DELETE
from dbt_incremental_mv.refresh.views import outer_aggregate
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.views.semijoin import marked_ranges, reduce_sources
from dbt_incremental_mv.refresh.views.statement import (
    WRITE_BRANCH, Cached, RefreshStatement, Write, branch_target, broadcast_exists, cached_view,
    delete_write, refresh_writes,
)
from dbt_incremental_mv.sql_text import broadcast, ident, idents, relation

SIGN = "_mv_sign"
RECOMPUTED = "_mv_recomputed"
RECOMPUTED_PREFIX = "_mv_r_"  # the recomputed value of a column, in the rows the writes read


def blocker(view: ViewDefinition, logged: Mapping[str, Sequence[str]]) -> str | None:
    """Aggregate deltas are read from the logs' images: every column the view reads must be logged."""
    if view.null_supplying:
        why = outer_aggregate.blocker(view)
        if why is not None:
            return why
    for occurrence in view.occurrences:
        columns = logged.get(occurrence.master.name)
        if columns is None:
            continue
        have = {c.casefold() for c in columns}
        missing = sorted(c for c in view.referenced_columns[occurrence.alias] if c.casefold() not in have)
        if missing:
            return (
                f"the change log of {occurrence.master.name} does not log {', '.join(missing)}, which the "
                "aggregate reads (log these columns: aggregate deltas come from the logged values)"
            )
    return None


class _Arguments:
    """The aggregated expressions of the view, each projected once by the delta terms."""

    def __init__(self, view: ViewDefinition) -> None:
        self.expressions: list[exp.Expression] = []
        self.by_column: dict[str, int] = {}
        for output in view.outputs:
            if output.argument is not None:
                self.by_column[output.name] = self._index(output.argument)
        for hidden in view.hidden_columns:
            if hidden.purpose not in (HiddenPurpose.ROW_COUNT, HiddenPurpose.RESERVE):  # (a reserve's: its output's)
                self.by_column[hidden.name] = self._index(hidden.expression.this)

    def _index(self, expression: exp.Expression) -> int:
        for index, known in enumerate(self.expressions):
            if known == expression:
                return index
        self.expressions.append(expression)
        return len(self.expressions) - 1

    @staticmethod
    def name(index: int) -> str:
        return f"_mv_x{index}"


def _old_state(log: MarkedLog, columns: list[str]) -> tuple[str, bool]:
    """The occurrence's master before the marked changes, and whether its rows carry signs."""
    new = log.master_as_of()
    if not log.has_changes:
        return new, False
    if not log.deletes:  # only inserts: the new rows minus the inserted keys
        on = " and ".join(f"`_mv_m`.{ident(k)} = `_mv_k`.{ident(k)}" for k in log.spec.key)
        return (
            f"(select `_mv_m`.* from {new} as `_mv_m` left anti join ({log.changed_keys('inserts')}) as `_mv_k` on {on})",
            False,
        )
    current = f"select {idents(columns)}, 1 as {ident(SIGN)} from {new}"
    if not log.inserts:  # only deletes: the new rows plus the deleted ones
        deleted = f"select {idents(columns)}, 1 as {ident(SIGN)} from (\n{log.images(columns, DELETE)}\n)"
        return f"(\n{current}\nunion all\n{deleted}\n)", True
    return f"(\n{current}\nunion all\n{log.signed_images(columns, invert=True)}\n)", True


def _delta_terms(
    view: ViewDefinition, marked: Mapping[str, MarkedLog], arguments: _Arguments, keys: outer_aggregate.Keys,
) -> list[str]:
    """The delta, a telescoping sum over the changed occurrences: each one's change with the
    occurrences before it in their new state and those after it in their old state. An occurrence
    no outer join null-extends (every one of an inner-join view) makes one SELECT: its signed
    images joined with the others, the query being linear in it. The change of a null-supplying
    one is not linear: outer_aggregate.py makes its terms, with the others as real rows.
    ``keys(alias, query)``: what reads the affected anchor keys ``query`` returns (a cached view)."""
    changed = [o.alias for o in view.occurrences if marked[o.master.name].has_changes]
    columns = {o.alias: sorted(view.referenced_columns[o.alias], key=str.casefold) or list(marked[o.master.name].spec.key) for o in view.occurrences}
    # the sum holds in any order: over outer joins the null-supplying changes go first, so that
    # the others' terms read them in their new state (no old state of a fact is rebuilt)
    order = sorted(view.aliases, key=lambda a: a not in view.null_supplying) if view.null_supplying else list(view.aliases)
    terms = []
    for position, alias in enumerate(order):
        if alias not in changed:
            continue
        outer_change = alias in view.null_supplying
        # real rows where an outer join reads them, and for a change applied by slices (which
        # recompute rows); a change applied row by row is linear in the other masters
        real_rows = outer_change and outer_aggregate.by_row_step(view, alias) is None
        sources: dict[str, str] = {}
        signed: list[str] = []
        for other_position, other in enumerate(order):
            log = marked[view.occurrence(other).master.name]
            if other == alias:
                if not outer_change:
                    sources[other] = f"(\n{log.signed_images(columns[other])}\n)"
                    signed.append(other)
            elif other_position < position:
                sources[other] = log.master_as_of()  # already changed: new state
            elif real_rows or other in view.null_supplying:
                sources[other] = outer_aggregate.old_state(log, outer_aggregate.read_columns(view, other))
            else:
                source, has_sign = _old_state(log, columns[other])
                sources[other] = source
                if has_sign:
                    signed.append(other)

        def project(select: exp.Select, sign: exp.Expression, signed: list[str] = signed) -> str:
            for other in signed:
                sign = exp.Mul(this=sign, expression=exp.column(SIGN, table=other, quoted=True))
            return _term(view, arguments, select, sign)

        if outer_change:
            terms += outer_aggregate.null_supplying_terms(view, alias, marked, sources, project, keys)
            continue
        if not view.null_supplying:
            sources = reduce_sources(view, sources, {alias: marked_ranges(marked[view.occurrence(alias).master.name])})
        else:  # what is joined on its key, read for its changed keys only (outer_aggregate.py)
            sources = outer_aggregate.restrict_to_changed_keys(view, alias, marked[view.occurrence(alias).master.name], sources)
        select = select_expression(view, sources, include_hidden=False)
        terms.append(project(select, exp.column(SIGN, table=signed[0], quoted=True), signed[1:]))
    return terms


def _term(view: ViewDefinition, arguments: _Arguments, select: exp.Select, sign: exp.Expression) -> str:
    """A delta term from a select of the defining query: its rows' group keys, aggregated
    expressions and ``sign``, not grouped."""
    projections = [
        exp.Alias(this=view.output(name).expression.copy(), alias=exp.to_identifier(name, quoted=True))
        for name in view.group_key_columns
    ]
    projections += [
        exp.Alias(this=e.copy(), alias=exp.to_identifier(_Arguments.name(i), quoted=True))
        for i, e in enumerate(arguments.expressions)
    ]
    projections.append(exp.Alias(this=sign, alias=exp.to_identifier(SIGN, quoted=True)))
    select.set("expressions", projections)
    select.set("group", None)
    return render_expression(select)


def _delta_name(column: str, tag: str) -> str:
    return f"_mv_d{tag}_{column}"


def _delta_rows(terms: list[str]) -> str:
    """The delta ``terms`` as one relation (a subquery)."""
    return "(\n" + "\nunion all\n".join(terms) + "\n)"


def _delta_query(view: ViewDefinition, terms: list[str], arguments: _Arguments, min_max: list[str]) -> str:
    """Per group: the signed net change of the row count and of every aggregate (the delta
    ``terms`` read once; see _delta_of_rows)."""
    return _delta_of_rows(view, _delta_rows(terms), arguments, min_max)


def _delta_of_rows(view: ViewDefinition, rows: str, arguments: _Arguments, min_max: list[str]) -> str:
    """Per group: the signed net change of the row count and of every aggregate, from the delta
    rows ``rows`` (a relation: a subquery or a cached view), and each reserve's change (its
    argument's values netted: _reserve_deltas), which reads them once more."""
    s = ident(SIGN)
    parts = [ident(c) for c in view.group_key_columns] + [f"sum({s}) as {ident(_delta_name(ROW_COUNT_COLUMN, ''))}"]
    for column in _counted_columns(view):
        x = ident(_Arguments.name(arguments.by_column[column]))
        parts.append(f"sum(case when {x} is not null then {s} else 0 end) as {ident(_delta_name(column, ''))}")
    for column in _summed_columns(view):
        x = ident(_Arguments.name(arguments.by_column[column]))
        parts.append(f"sum(case when {s} > 0 then {x} else -{x} end) as {ident(_delta_name(column, ''))}")
    for column in min_max:
        x = ident(_Arguments.name(arguments.by_column[column]))
        function = "max" if view.output(column).kind is OutputKind.MAX else "min"
        parts.append(f"{function}(case when {s} > 0 then {x} end) as {ident(_delta_name(column, 'p'))}")
        parts.append(f"{function}(case when {s} < 0 then {x} end) as {ident(_delta_name(column, 'n'))}")
    group = f"\ngroup by {idents(view.group_key_columns)}" if view.group_key_columns else ""
    delta = f"select {', '.join(parts)}\nfrom {rows}{group}"
    reserves = _reserve_deltas(view, rows, arguments)
    if not reserves:
        return delta
    keys = view.group_key_columns
    joined = ", ".join(f"`_mv_r{i}`.{ident(column)}" for i, (columns, _) in enumerate(reserves) for column in columns)
    joins = "".join(
        f"\nleft join (\n{query}\n) as `_mv_r{i}` on {_group_match('`_mv_g`', f'`_mv_r{i}`', keys)}"
        for i, (_, query) in enumerate(reserves)
    )
    return f"select `_mv_g`.*, {joined} from (\n{delta}\n) as `_mv_g`{joins}"


def _counted_columns(view: ViewDefinition) -> list[str]:
    """COUNT(x) outputs and hidden non-NULL counts: maintained by adding the delta count."""
    names = [o.name for o in view.outputs if o.kind is OutputKind.COUNT]
    return names + [h.name for h in view.hidden_columns if h.purpose is HiddenPurpose.NONNULL_COUNT]


def _summed_columns(view: ViewDefinition) -> list[str]:
    """SUM(x) outputs and hidden sums (for AVG): maintained by adding the delta sum."""
    names = [o.name for o in view.outputs if o.kind is OutputKind.SUM]
    return names + [h.name for h in view.hidden_columns if h.purpose is HiddenPurpose.SUM]


def _nonnull_count_of(view: ViewDefinition, column: str) -> str:
    """The hidden COUNT(x) column serving the SUM/AVG output (or hidden sum) ``column``."""
    served = view.output(column).name if column in {o.name for o in view.outputs} else None
    for hidden in view.hidden_columns:
        if hidden.purpose is not HiddenPurpose.NONNULL_COUNT:
            continue
        if served is not None and served in hidden.outputs:
            return hidden.name
    # a hidden SUM column: the count serving the same outputs
    sum_column = next(h for h in view.hidden_columns if h.name == column)
    return next(
        h.name for h in view.hidden_columns
        if h.purpose is HiddenPurpose.NONNULL_COUNT and set(sum_column.outputs) & set(h.outputs)
    )


def _safe(view: ViewDefinition, column: str, delta: str, stored: str) -> str:
    """The new extreme of ``column`` is ``greatest(stored, candidates)`` (``least`` for MIN): no
    negative row, or every one beyond the stored extreme, or a positive row beyond every negative
    one. That positive is really new (a positive that is not comes with an equal negative), and
    whatever remains of the old rows is within the stored extreme, which it reaches or passes:
    a MAX whose row was updated upwards is not recomputed."""
    removed = f"{delta}.{ident(_delta_name(column, 'n'))}"
    added = f"{delta}.{ident(_delta_name(column, 'p'))}"
    beyond = "<" if view.output(column).kind is OutputKind.MAX else ">"
    return (
        f"({removed} is null or ({stored}.{ident(column)} is not null and {removed} {beyond} {stored}.{ident(column)})"
        f" or {removed} {beyond} {added})"
    )


def _cast(expression: str, column: str, view_types: Mapping[str, str]) -> str:
    spark_type = next((t for c, t in view_types.items() if c.casefold() == column.casefold()), None)
    return f"cast({expression} as {spark_type})" if spark_type else expression


def _new_values(
    view: ViewDefinition, view_types: Mapping[str, str], recompute: bool, stored: str, source: str,
    reserves_in_source: bool = False,
) -> dict[str, str]:
    """Each stored column's value after the refresh, from the row ``source`` (the group's delta
    and, for recomputed groups, its recomputed values) and the stored row ``stored`` (all NULL
    for a new group); ``reserves_in_source``: the new reserves are columns of ``source``
    (_with_new_reserves), not computed here."""
    def old(column: str) -> str:
        return f"{stored}.{ident(column)}"

    def delta(column: str, tag: str = "") -> str:
        return f"{source}.{ident(_delta_name(column, tag))}"

    # (a global aggregate's delta is one row even when no changed row passes the filters: NULLs)
    count = f"(coalesce({old(ROW_COUNT_COLUMN)}, 0) + coalesce({delta(ROW_COUNT_COLUMN)}, 0))"
    values: dict[str, str] = {name: f"{source}.{ident(name)}" for name in view.group_key_columns}
    values[ROW_COUNT_COLUMN] = count
    for column in _counted_columns(view):
        values[column] = f"(coalesce({old(column)}, 0) + coalesce({delta(column)}, 0))"
    for column in _summed_columns(view):
        counted = _nonnull_count_of(view, column)
        values[column] = (
            f"case when {values[counted]} = 0 then null "
            f"else coalesce({old(column)}, 0) + coalesce({delta(column)}, 0) end"
        )
    for output in view.outputs:
        if output.kind is OutputKind.COUNT_STAR:
            values[output.name] = count
        elif output.kind is OutputKind.AVG:
            support = view.support_columns(output.name)
            total = next(h.name for h in support if h.purpose is HiddenPurpose.SUM)
            counted = next(h.name for h in support if h.purpose is HiddenPurpose.NONNULL_COUNT)
            values[output.name] = (
                f"case when {values[counted]} = 0 then null else ({values[total]}) / ({values[counted]}) end"
            )
        elif output.kind in (OutputKind.MIN, OutputKind.MAX) and _reserve_of(view, output.name) is not None:
            reserve = (
                f"{source}.{ident(_new_reserve_name(output.name))}" if reserves_in_source
                else _reserve(view, output.name, view_types, stored, source)
            )
            values[output.name] = f"try_element_at({reserve}, 1).`v`"
            values[_reserve_of(view, output.name).name] = reserve
        elif output.kind in (OutputKind.MIN, OutputKind.MAX):
            function = "greatest" if output.kind is OutputKind.MAX else "least"
            values[output.name] = f"{function}({old(output.name)}, {delta(output.name, 'p')})"
    result = {}
    for column in view.stored_columns:
        value = values[column]
        if recompute and column not in view.group_key_columns:
            value = f"case when {source}.{ident(RECOMPUTED)} then {source}.{ident(RECOMPUTED_PREFIX + column)} else {value} end"
        result[column] = _cast(value, column, view_types)
    return result


def _rewrite(
    view: ViewDefinition, view_relation: str, marked: Mapping[str, MarkedLog], view_types: Mapping[str, str],
    branch: str, changed: list[str],
) -> RefreshStatement | None:
    """A small view rewritten whole, in ONE statement: its stored rows full-outer-joined with the
    delta (computed inline, read once), the delta's groups with their new values, the others as
    they are. A copy-on-write overwrite of a few rows costs less than caching the delta, deleting
    its groups and inserting them (three Spark statements). Not for views that recompute groups
    from the masters (MIN/MAX after deletes, HAVING): they read the delta several times, None."""
    min_max = [o.name for o in view.outputs if o.kind in (OutputKind.MIN, OutputKind.MAX)]
    any_deletes = any(marked[o.master.name].deletes for o in view.occurrences)
    if view.having is not None or (min_max and (any_deletes or view.null_supplying)):
        return None
    arguments = _Arguments(view)

    def anchor_keys(alias: str, query: str) -> str:  # the slices' anchor keys: inline, read once
        return query

    delta = _delta_query(view, _delta_terms(view, marked, arguments, anchor_keys), arguments, min_max)
    keys = view.group_key_columns
    values = _new_values(view, view_types, False, "`_mv_t`", "`_mv_s`")
    # an unchanged group keeps its stored values exactly; a new group's keys come from the delta
    stored = view.stored_columns
    in_delta = "coalesce(`_mv_s`.`_mv_in_delta`, false)"
    kept = [
        f"case when {in_delta} then {values[c]} else `_mv_t`.{ident(c)} end as {ident(c)}"
        if c not in keys else f"coalesce(`_mv_s`.{ident(c)}, `_mv_t`.{ident(c)}) as {ident(c)}"
        for c in stored
    ]
    new_count = values[ROW_COUNT_COLUMN]
    joined = (
        f"select {', '.join(kept)}, {in_delta} as `_mv_changed`, {new_count} as `_mv_new_count`\n"
        f"from (select *, true as `_mv_in_delta` from (\n{delta}\n)) as `_mv_s`\n"
        f"full outer join {relation(view_relation)} as `_mv_t` on {_group_match('`_mv_s`', '`_mv_t`', keys)}"
    )
    # a group whose rows all went is not written again; a global aggregate keeps its one row
    where = "\nwhere not `_mv_changed` or `_mv_new_count` > 0" if keys else ""
    rows = f"select {idents(stored)} from (\n{joined}\n){where}"
    target = relation(view_relation)
    write = Write("overwrite", f"insert overwrite {target} ({idents(stored)})\n{rows}")
    run = tuple(f"{'ROWS' if a in view.null_supplying else 'DELTA'} {a}" for a in changed) + ("rewrite of the view",)
    skipped = tuple(f"DELTA {o.alias}" for o in view.occurrences if o.alias not in changed)
    touched = broadcast_exists(delta, "`_mv_k`", _group_match("`_mv_k`", "`_mv_v`", keys))
    return refresh_writes(branch, [write], run, skipped, touched=touched)


STORED = "`_mv_t`"  # in the cached delta: the group's stored row, a struct of the view's columns


def _with_stored_rows(view: ViewDefinition, delta: str, rows: str, view_relation: str) -> str:
    """Each group of ``delta`` with its stored row (``_mv_t``: a struct of the view's columns,
    NULL fields for a group the view does not hold): the view read once, through a semi join
    with the group keys of the delta's rows (``rows``) broadcast, so what is joined is a few
    rows, never the whole view. Cached with the delta, the writes read both from the session's
    cache. (The semi join takes the keys, not the delta: Spark reuses no exchange between the
    two, and the delta's aggregations and reserves, each a scan of the rows and two to four
    shuffles, were computed twice: at TPC-H scale factor 1, 6 scans of the log in one statement.)"""
    keys = view.group_key_columns
    # (the rows written out twice: Spark finds no cached data for a query whose WITH is read twice)
    groups = f"select distinct {idents(keys)} from {rows}" if keys else delta
    stored = (
        f"select `_mv_v`.* from {relation(view_relation)} as `_mv_v`\n"
        f"left semi join ({broadcast(groups)}) as `_mv_k` on {_group_match('`_mv_k`', '`_mv_v`', keys)}"
    )
    return (
        f"select `_mv_d`.*, struct(`_mv_v`.*) as {STORED} from (\n{delta}\n) as `_mv_d`\n"
        f"left join (\n{stored}\n) as `_mv_v` on {_group_match('`_mv_d`', '`_mv_v`', keys)}"
    )


def _new_reserve_name(output: str) -> str:
    return f"_mv_nr_{output}"


def _cached_delta(view: ViewDefinition, view_types: Mapping[str, str], delta: str, rows: str, view_relation: str) -> str:
    """What the refresh caches of ``delta`` (of the delta rows ``rows``): each group with its
    stored row (_with_stored_rows) and its new MIN/MAX reserves (_with_new_reserves)."""
    return _with_new_reserves(view, view_types, _with_stored_rows(view, delta, rows, view_relation))


def _with_new_reserves(view: ViewDefinition, view_types: Mapping[str, str], rows: str) -> str:
    """The delta's groups with their stored rows (``rows``: _with_stored_rows) and each MIN/MAX
    reserve's new value (``_mv_nr_<output>``): merged once per group where the delta is cached,
    not in each of the several places the writes read it (Spark evaluates the higher-order
    functions of a merge row by row, interpreted)."""
    if not view.reserves:
        return rows
    merged = ", ".join(
        f"{_reserve(view, reserve.outputs[0], view_types, f'`_mv_c`.{STORED}', '`_mv_c`')} "
        f"as {ident(_new_reserve_name(reserve.outputs[0]))}"
        for reserve in view.reserves
    )
    return f"select `_mv_c`.*, {merged} from (\n{rows}\n) as `_mv_c`"


def _group_match(left: str, right: str, columns: Sequence[str]) -> str:
    if not columns:
        return "true"
    return " and ".join(f"{left}.{ident(c)} <=> {right}.{ident(c)}" for c in columns)


def _recompute_ctes(
    view: ViewDefinition, marked: Mapping[str, MarkedLog], min_max: list[str],
) -> list[str]:
    """The groups recomputed from the masters as of the marked snapshot (``_mv_flagged``): those
    whose stored extreme a negative row may have removed (``min_max``), and for a view with
    HAVING every group of the delta the view does not hold (it did not pass, or did not exist:
    its state is not stored). Of an output with a reserve, the groups whose reserve ran out while
    they still have values (see _reserve); of one without (a global aggregate), the groups with
    negative rows, less those stored with every extreme safe (a group not in the view has no
    stored extreme and is recomputed)."""
    keys = view.group_key_columns
    # the flagged keys by position: a key named like an occurrence alias (an output `c1` over
    # `customers c1`) would capture the correlated reference `c1.region_id` inside the EXISTS
    flagged_keys = [f"_mv_g{i}" for i in range(len(keys))]
    projection = ", ".join(f"`_mv_d`.{ident(c)} as {ident(g)}" for c, g in zip(keys, flagged_keys)) or "1 as `_mv_one`"
    group = [view.output(name).expression for name in keys]
    sources = {o.alias: marked[o.master.name].master_as_of() for o in view.occurrences}
    if keys:  # the flagged groups' rows only: a semi join below the aggregation
        correlated = " and ".join(
            f"`_mv_f`.{ident(flagged)} <=> ({render_expression(expression)})"
            for flagged, expression in zip(flagged_keys, group)
        )
        flagged_rows = sqlglot.parse_one(f"exists (select 1 from `_mv_flagged` as `_mv_f` where {correlated})", read="spark")
        restricted = select_expression(view, sources, row_filter=flagged_rows)
        flagged_only = ""
    else:  # a global aggregate has its one row even over no rows: filter after it
        restricted = select_expression(view, sources)
        flagged_only = "\nwhere exists (select 1 from `_mv_flagged`)"
    recomputed = ", ".join(
        f"`_mv_q`.{ident(c)}" if c in keys else f"`_mv_q`.{ident(c)} as {ident(RECOMPUTED_PREFIX + c)}"
        for c in view.stored_columns
    )
    ctes, flagged = [], []
    reserved = [c for c in min_max if _reserve_of(view, c) is not None]
    plain = [c for c in min_max if c not in reserved]
    stored = f"`_mv_d`.{STORED}"  # the group's stored row (NULL fields when the view has none)
    held = f"{stored}.{ident(ROW_COUNT_COLUMN)} is not null"
    if reserved:
        exhausted = " or ".join(
            f"(size(`_mv_d`.{ident(_new_reserve_name(c))}) = 0 and {_new_count(view, c, stored, '`_mv_d`')} > 0)"
            for c in reserved
        )
        flagged.append(f"select {projection} from `_mv_delta` as `_mv_d`\nwhere {exhausted}")
    if plain:
        negative = " or ".join(f"`_mv_d`.{ident(_delta_name(c, 'n'))} is not null" for c in plain)
        safe = " and ".join(_safe(view, c, "`_mv_d`", stored) for c in plain)
        flagged.append(f"select {projection} from `_mv_delta` as `_mv_d`\nwhere ({negative}) and not coalesce({held} and {safe}, false)")
    if view.having is not None:  # the delta's groups the view does not hold
        flagged.append(f"select {projection} from `_mv_delta` as `_mv_d`\nwhere not {held}")
    union = "\nunion\n".join(flagged)
    return ctes + [
        f"`_mv_flagged` as (\n{union}\n)",
        f"`_mv_recompute` as (\nselect {recomputed}, true as {ident(RECOMPUTED)} from (\n"
        f"{render_expression(restricted)}\n) as `_mv_q`{flagged_only}\n)",
    ]


# ---------------------------------------------------------------- MIN/MAX reserves
def _reserve_of(view: ViewDefinition, output: str) -> HiddenColumn | None:
    """The reserve of a MIN/MAX output (analysis/hidden.py), or None (a global aggregate's)."""
    return next((h for h in view.reserves if output in h.outputs), None)


def _reserve_delta_name(output: str) -> str:
    return f"_mv_dr_{output}"


def _reserve_deltas(view: ViewDefinition, terms: str, arguments: _Arguments) -> list[tuple[tuple[str, ...], str]]:
    """Per argument of reserves: (their delta columns, a query of them per group): the delta's
    values of the argument netted (value, signed count), and per reserve the RESERVE most extreme
    of its positive ones and of its negative ones (no others can reach the reserve: see
    _reserve). Reserves of one argument (a MIN and a MAX of the same column) share the netting:
    one read of the rows, one aggregation, one shuffle for both rankings."""
    keys = idents(view.group_key_columns)
    by_argument: dict[str, list[str]] = {}
    for reserve in view.reserves:
        name = reserve.outputs[0]
        by_argument.setdefault(_Arguments.name(arguments.by_column[name]), []).append(name)
    found = []
    for argument, names in by_argument.items():
        x = ident(argument)
        ranks = [(f"`_mv_rk{i}`", "desc" if view.output(name).kind is OutputKind.MAX else "asc") for i, name in enumerate(names)]
        ranked = ", ".join(
            f"row_number() over (partition by {keys}, `_mv_n` > 0 order by `_mv_v` {order}) as {rank}" for rank, order in ranks
        )
        lists = ", ".join(
            f"collect_list(case when {rank} <= {RESERVE} then named_struct('v', `_mv_v`, 'n', `_mv_n`) end) "
            f"as {ident(_reserve_delta_name(name))}"
            for (rank, _), name in zip(ranks, names)
        )
        found.append((tuple(_reserve_delta_name(name) for name in names), (
            f"select {keys}, {lists} from (\n"
            f"select *, {ranked} from (\n"
            f"select {keys}, {x} as `_mv_v`, sum({ident(SIGN)}) as `_mv_n` from {terms}\n"
            f"where {x} is not null group by {keys}, {x} having sum({ident(SIGN)}) <> 0\n)\n"
            f") where {' or '.join(f'{rank} <= {RESERVE}' for rank, _ in ranks)} group by {keys}"
        )))
    return found


def _reserve(view: ViewDefinition, output: str, view_types: Mapping[str, str], stored: str, delta: str) -> str:
    """The new reserve of MIN/MAX ``output`` (stored row ``stored``, delta row ``delta``).

    A reserve holds the group's most extreme distinct values with their counts: exactly every
    value from the extreme down to its last one (its floor). So a change at or beyond the floor
    is merged in (counts added, values gone dropped), and one short of it cannot be placed and
    is left out (which values lie between is not known), unless the reserve is complete (its
    counts add up to the group's COUNT(x): it holds every value). The RESERVE most extreme of
    the result are kept. The new extreme is its first value; a group whose reserve runs out
    while it still has values is recomputed."""
    hidden = _reserve_of(view, output)
    assert hidden is not None
    stored_type = next((t for c, t in view_types.items() if c.casefold() == hidden.name.casefold()), None)
    typed = f"cast({{}} as {stored_type})" if stored_type else "{}"
    maximum = view.output(output).kind is OutputKind.MAX
    empty = typed.format("array()")
    old = f"coalesce({stored}.{ident(hidden.name)}, {empty})"
    change = f"coalesce({typed.format(f'{delta}.{ident(_reserve_delta_name(output))}')}, {empty})"
    count = _nonnull_count_of(view, output)
    complete = f"(aggregate({old}, cast(0 as bigint), (`_mv_a`, `_mv_e`) -> `_mv_a` + `_mv_e`.`n`) = coalesce({stored}.{ident(count)}, 0))"
    reaches = ">=" if maximum else "<="
    kept = f"filter({change}, `_mv_e` -> {complete} or `_mv_e`.`v` {reaches} try_element_at({old}, -1).`v`)"
    merged = (
        f"map_zip_with(map_from_entries(transform({old}, `_mv_e` -> struct(`_mv_e`.`v`, `_mv_e`.`n`))), "
        f"map_from_entries(transform({kept}, `_mv_e` -> struct(`_mv_e`.`v`, `_mv_e`.`n`))), "
        f"(`_mv_k`, `_mv_p`, `_mv_q`) -> coalesce(`_mv_p`, 0) + coalesce(`_mv_q`, 0))"
    )
    before, after = (">", "<") if maximum else ("<", ">")
    ordered = (
        f"array_sort(transform(filter(map_entries({merged}), `_mv_e` -> `_mv_e`.`value` > 0), "
        f"`_mv_e` -> named_struct('v', `_mv_e`.`key`, 'n', `_mv_e`.`value`)), "
        f"(`_mv_l`, `_mv_r`) -> case when `_mv_l`.`v` {before} `_mv_r`.`v` then -1 "
        f"when `_mv_l`.`v` {after} `_mv_r`.`v` then 1 else 0 end)"
    )
    return f"slice({ordered}, 1, {RESERVE})"


def _new_count(view: ViewDefinition, output: str, stored: str, delta: str) -> str:
    """The group's COUNT(x) after the refresh, for MIN/MAX ``output``."""
    count = _nonnull_count_of(view, output)
    return f"(coalesce({stored}.{ident(count)}, 0) + coalesce({delta}.{ident(_delta_name(count, ''))}, 0))"


def refresh_statement(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    view_types: Mapping[str, str] | None = None,
    branch: str = WRITE_BRANCH,
    view_rows: int | None = None,
) -> RefreshStatement | None:
    """The writes that apply the marked changes, or None when nothing is marked: a DELETE of the
    delta's groups on the write branch, then an INSERT of their new rows staged on it; or, for a
    small view (``view_rows``: its rows when small enough to be rewritten, config rewrite_rows),
    one statement rewriting it whole (see _rewrite)."""
    changed = [o.alias for o in view.occurrences if marked[o.master.name].has_changes]
    if not changed:
        return None
    if view_rows is not None:
        rewritten = _rewrite(view, view_relation, marked, view_types or {}, branch, changed)
        if rewritten is not None:
            return rewritten
    view_types = view_types or {}
    arguments = _Arguments(view)
    min_max = [o.name for o in view.outputs if o.kind in (OutputKind.MIN, OutputKind.MAX)]
    any_deletes = any(marked[o.master.name].deletes for o in view.occurrences)
    # (over outer joins the old slices' rows are negative whatever the logs hold)
    extremes = bool(min_max) and (any_deletes or bool(view.null_supplying))
    # with HAVING, groups the view does not hold are recomputed (their state is not stored)
    recompute = extremes or view.having is not None
    target = branch_target(view_relation, branch)
    keys = view.group_key_columns
    slices: list[Cached] = []  # the affected anchor keys of a change sliced by them (outer_aggregate.py)
    inline: list[bool] = []

    def anchor_keys(alias: str, query: str) -> str:
        if inline:
            return query
        slices.append(Cached(cached_view(branch, f"slices_{alias}"), query))
        return f"select * from {ident(slices[-1].name)}"

    terms = _delta_terms(view, marked, arguments, anchor_keys)
    delta_rows = _delta_rows(terms)
    delta = _delta_of_rows(view, delta_rows, arguments, min_max)
    # (the statistics run before the cached views are made: they compute the anchor keys inline)
    inline.append(True)
    rows_in_full = _delta_rows(_delta_terms(view, marked, arguments, anchor_keys)) if slices else delta_rows
    delta_in_full = _delta_of_rows(view, rows_in_full, arguments, min_max) if slices else delta
    # computed once (the writes name it up to six times), then read from the session's cache;
    # with reserves, the delta reads its rows once more per reserve: over several masters they
    # are cached first (one statement more), a single master's are its log's images
    rows_cached = ()
    if view.reserves and len(view.occurrences) > 1:
        rows_cached = (Cached(cached_view(branch, "terms"), "\nunion all\n".join(terms)),)
        delta_rows = ident(rows_cached[0].name)
        delta = _delta_of_rows(view, delta_rows, arguments, min_max)
    cached = Cached(cached_view(branch, "delta"), _cached_delta(view, view_types, delta, delta_rows, view_relation))
    from_cache = groups = f"select * from {ident(cached.name)}"
    ctes = [f"`_mv_delta` as (\n{from_cache}\n)"]
    rows = "select `_mv_d`.*"
    joins = ""
    if recompute:
        ctes += _recompute_ctes(view, marked, min_max if extremes else [])
        recomputed = [f"`_mv_r`.{ident(RECOMPUTED_PREFIX + c)}" for c in view.stored_columns if c not in keys]
        rows += f", {', '.join(recomputed)}, coalesce(`_mv_r`.{ident(RECOMPUTED)}, false) as {ident(RECOMPUTED)}"
        joins = f"\nleft join `_mv_recompute` as `_mv_r` on {_group_match('`_mv_d`', '`_mv_r`', keys)}"
    ctes.append(f"`_mv_source` as (\n{rows}\nfrom `_mv_delta` as `_mv_d`{joins}\n)")
    values = _new_values(view, view_types, recompute, f"`_mv_s`.{STORED}", "`_mv_s`", reserves_in_source=True)
    new_count = values[ROW_COUNT_COLUMN]
    stored = view.stored_columns
    from_source = "from `_mv_source` as `_mv_s`"
    of_delta_groups = broadcast_exists(groups, '`_mv_k`', _group_match('`_mv_k`', '`_mv_v`', keys))
    delete = delete_write(target, of_delta_groups, "`_mv_v`")
    new_rows = (
        f"select {', '.join(f'{values[c]} as {ident(c)}' for c in stored)}\n{from_source}"
        # a group whose rows all went is not inserted again; a global aggregate keeps its one row
        + (f"\nwhere {new_count} > 0" if keys else "")
    )
    if view.having is not None:  # and a group that does not pass is not stored
        new_rows = f"select * from (\n{new_rows}\n) as `_mv_h`\nwhere {render_expression(view.having)}"
    inserted = f"with {', '.join(ctes)}\n{new_rows}"
    insert = f"insert into {target} ({idents(stored)})\n{inserted}"
    sliced = {c.name.rsplit("_slices_", 1)[1] for c in slices}
    run = tuple(
        f"{'SLICES' if a in sliced else 'ROWS' if a in view.null_supplying else 'DELTA'} {a}" for a in changed
    )
    if extremes and view.reserves:
        run += ("MIN/MAX from the reserves, recompute of groups whose reserve ran out",)
    elif extremes:
        run += ("MIN/MAX recompute of groups whose extreme was removed",)
    if view.having is not None:
        run += ("HAVING: recompute of groups the view does not hold",)
    skipped = tuple(f"DELTA {o.alias}" for o in view.occurrences if o.alias not in changed)
    if min_max and not extremes:
        skipped += ("MIN/MAX recompute (insert-only)",)
    # (the statistics are read before the writes, and the cached delta: the delta in full)
    stats_ctes = [f"`_mv_delta` as (\n{_cached_delta(view, view_types, delta_in_full, rows_in_full, view_relation)}\n)", *ctes[1:]]
    existed = f"`_mv_s`.{STORED}.{ident(ROW_COUNT_COLUMN)} is not null"
    recomputed = f"count_if(`_mv_s`.{ident(RECOMPUTED)})" if recompute else "0"
    if view.having is None:
        stats = (
            f"with {', '.join(stats_ctes)}\n"
            f"select count_if(not {existed} and {new_count} > 0), count_if({existed} and {new_count} <> 0), "
            f"count_if({existed} and {new_count} = 0), {recomputed}\n{from_source}"
        )
    else:  # a group is in the view after the refresh when it has rows and passes
        passes = f"(`_mv_h`.{ident(ROW_COUNT_COLUMN)} > 0 and coalesce({render_expression(view.having)}, false))"
        flag = f"`_mv_s`.{ident(RECOMPUTED)}" if recompute else "false"
        stats = (
            f"with {', '.join(stats_ctes)}\n"
            f"select count_if(not `_mv_existed` and {passes}), count_if(`_mv_existed` and {passes}), "
            f"count_if(`_mv_existed` and not {passes}), count_if(`_mv_recomputed_group`)\nfrom (\n"
            f"select {', '.join(f'{values[c]} as {ident(c)}' for c in stored)}, {existed} as `_mv_existed`, "
            f"{flag} as `_mv_recomputed_group`\n{from_source}\n) as `_mv_h`"
        )
    labels = ("groups inserted", "groups updated", "groups deleted", "groups recomputed")
    return refresh_writes(
        branch, [delete, Write("insert", insert)], run, skipped, stats, labels, (*slices, *rows_cached, cached),
        touched=of_delta_groups, deleted=of_delta_groups, inserted=inserted,
    )
