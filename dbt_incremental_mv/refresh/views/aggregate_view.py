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
from dataclasses import replace
from functools import partial

from sqlglot import exp

from dbt_incremental_mv.analysis import OutputKind, ViewDefinition
from dbt_incremental_mv.analysis.clock import at_times
from dbt_incremental_mv.analysis.hidden import ROW_COUNT_COLUMN
from dbt_incremental_mv.analysis.model import HiddenPurpose
from dbt_incremental_mv.analysis.render import render_expression, select_expression
from dbt_incremental_mv.logs.contract import DELETE
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.views import outer_aggregate
from dbt_incremental_mv.refresh.views.aggregate_columns import (
    RECOMPUTED,
    RECOMPUTED_PREFIX,
    SIGN,
    STORED,
    Arguments,
    counted_columns,
    delta_name,
    group_match,
    nonnull_count_of,
    summed_columns,
)
from dbt_incremental_mv.refresh.views.exact_decimals import average_guard, average_of, sum_guards, sum_of, wide_sum
from dbt_incremental_mv.refresh.views.min_max import (
    FLAG,
    flag_condition,
    flagged_cte,
    new_reserve,
    new_reserve_name,
    recompute_cte,
    reserve_deltas,
    reserve_of,
    reserve_ran_out,
    with_new_reserves,
)
from dbt_incremental_mv.refresh.views.semijoin import marked_ranges, reduce_sources
from dbt_incremental_mv.refresh.views.statement import (
    WRITE_BRANCH,
    Cached,
    CrossedRows,
    Fallback,
    LeanForm,
    RefreshStatement,
    Write,
    WriteKind,
    branch_target,
    broadcast_exists,
    cached_view,
    delete_write,
    rebalanced,
    refresh_writes,
    stop_when,
)
from dbt_incremental_mv.sql_text import broadcast, ident, idents, relation


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
    view: ViewDefinition,
    marked: Mapping[str, MarkedLog],
    arguments: Arguments,
    keys: outer_aggregate.Keys,
) -> list[str]:
    """The delta, a telescoping sum over the changed occurrences: each one's change with the
    occurrences before it in their new state and those after it in their old state. An occurrence
    no outer join null-extends (every one of an inner-join view) makes one SELECT: its signed
    images joined with the others, the query being linear in it. The change of a null-supplying
    one is not linear: outer_aggregate.py makes its terms, with the others as real rows.
    ``keys(alias, query)``: what reads the affected anchor keys ``query`` returns (a cached view)."""
    changed = [o.alias for o in view.occurrences if marked[o.master.name].has_changes]
    columns = {
        o.alias: sorted(view.referenced_columns[o.alias], key=str.casefold) or list(marked[o.master.name].spec.key)
        for o in view.occurrences
    }
    # the sum holds in any order: over outer joins the null-supplying changes go first, so that
    # the others' terms read them in their new state (no old state of a fact is rebuilt)
    order = (
        sorted(view.aliases, key=lambda a: a not in view.null_supplying) if view.null_supplying else list(view.aliases)
    )
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

        def project(select: exp.Select, sign: exp.Expr, signed: list[str] = signed) -> str:
            for other in signed:
                sign = exp.Mul(this=sign, expression=exp.column(SIGN, table=other, quoted=True))
            return _term(view, arguments, select, sign)

        if outer_change:
            terms += outer_aggregate.null_supplying_terms(view, alias, marked, sources, project, keys)
            continue
        if not view.null_supplying:
            sources = reduce_sources(view, sources, {alias: marked_ranges(marked[view.occurrence(alias).master.name])})
        else:  # what is joined on its key, read for its changed keys only (outer_aggregate.py)
            sources = outer_aggregate.restrict_to_changed_keys(
                view, alias, marked[view.occurrence(alias).master.name], sources
            )
        select = select_expression(view, sources, include_hidden=False)
        terms.append(project(select, exp.column(SIGN, table=signed[0], quoted=True), signed[1:]))
    return terms


def _terms(
    view: ViewDefinition,
    marked: Mapping[str, MarkedLog],
    arguments: Arguments,
    keys: outer_aggregate.Keys,
    crossed: CrossedRows | None,
) -> list[str]:
    """The delta terms of the marked changes (_delta_terms) and, when rows ``crossed`` the view's
    time boundary, theirs: the view holds the query at the time its rows reflect, so the changes
    are taken at that time, then, occurrence by occurrence (each one's filters at the new time once
    its rows are counted), the rows that crossed come in at the new time (those its filters now
    keep, +1) and go at the old (those they kept, -1), with the other masters in their new state.
    The query is linear in each occurrence no outer join null-extends, and a row that did not cross
    reads alike at both times; for a null-supplying one, the slices holding its crossed rows at the
    new time less at the old (outer_aggregate.crossed_slice_terms)."""
    if crossed is None:
        return _delta_terms(view, marked, arguments, keys)
    aliases = sorted(crossed.rows)
    terms = _delta_terms(at_times(view, crossed.filters, aliases), marked, arguments, keys)
    for position, alias in enumerate(aliases):
        states = {o.alias: marked[o.master.name].master_as_of() for o in view.occurrences}
        later = aliases[position + 1 :]
        at_new = at_times(view, crossed.filters, later)  # (its filters at the new time: the rows that came)
        at_old = at_times(view, crossed.filters, [alias, *later])  # (at the old time: the rows that went)
        if alias in view.null_supplying:  # not linear in it: the slices holding its crossed rows
            terms += outer_aggregate.crossed_slice_terms(
                at_new, at_old, alias, crossed.rows[alias], states, partial(_term, view, arguments), keys
            )
            continue
        sources = {**states, alias: f"(\n{crossed.rows[alias]}\n)"}
        for definition, sign in ((at_new, 1), (at_old, -1)):
            select = select_expression(definition, dict(sources), include_hidden=False)
            terms.append(_term(definition, arguments, select, exp.Literal.number(sign)))
    return terms


def with_crossed_rows(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    statement: RefreshStatement | None,
    crossing: CrossedRows,
    view_types: Mapping[str, str],
    branch: str = WRITE_BRANCH,
) -> RefreshStatement:
    """The writes applying the marked changes and the rows that crossed the view's time boundary
    (``crossing``) in one delta (_terms), in place of ``statement`` (the changes' alone)."""
    made = refresh_statement(view, view_relation, marked, view_types, branch, crossed=crossing)
    assert made is not None  # (rows crossed)
    return made


def _term(view: ViewDefinition, arguments: Arguments, select: exp.Select, sign: exp.Expr) -> str:
    """A delta term from a select of the defining query: its rows' group keys, aggregated
    expressions and ``sign``, not grouped."""
    projections = [
        exp.Alias(this=view.output(name).expression.copy(), alias=exp.to_identifier(name, quoted=True))
        for name in view.group_key_columns
    ]
    projections += [
        exp.Alias(this=e.copy(), alias=exp.to_identifier(Arguments.name(i), quoted=True))
        for i, e in enumerate(arguments.expressions)
    ]
    projections.append(exp.Alias(this=sign, alias=exp.to_identifier(SIGN, quoted=True)))
    select.set("expressions", projections)
    select.set("group", None)
    return render_expression(select)


def _delta_rows(terms: list[str]) -> str:
    """The delta ``terms`` as one relation (a subquery)."""
    return "(\n" + "\nunion all\n".join(terms) + "\n)"


def _delta_query(view: ViewDefinition, terms: list[str], arguments: Arguments, min_max: list[str]) -> str:
    """Per group: the signed net change of the row count and of every aggregate (the delta
    ``terms`` read once; see _delta_of_rows)."""
    return _delta_of_rows(view, _delta_rows(terms), arguments, min_max)


def _delta_of_rows(
    view: ViewDefinition,
    rows: str,
    arguments: Arguments,
    min_max: list[str],
    overflowed: Sequence[str] = (),
) -> str:
    """Per group: the signed net change of the row count and of every aggregate, from the delta
    rows ``rows`` (a relation: a subquery or a cached view), and each reserve's change (its
    argument's values netted: reserve_deltas), which reads them once more. Of a sum that can
    overflow (``overflowed``: exact_decimals.wide_sum), also how many values the delta holds: its
    sum is NULL beside some when it overflowed itself (exact_decimals.sum_guards)."""
    s = ident(SIGN)
    parts = [ident(c) for c in view.group_key_columns] + [f"sum({s}) as {ident(delta_name(ROW_COUNT_COLUMN, ''))}"]
    for column in counted_columns(view):
        x = ident(Arguments.name(arguments.by_column[column]))
        parts.append(f"sum(case when {x} is not null then {s} else 0 end) as {ident(delta_name(column, ''))}")
    for column in summed_columns(view):
        x = ident(Arguments.name(arguments.by_column[column]))
        parts.append(f"sum(case when {s} > 0 then {x} else -{x} end) as {ident(delta_name(column, ''))}")
        if column in overflowed:
            parts.append(f"count({x}) as {ident(delta_name(column, 'v'))}")
    for column in min_max:
        x = ident(Arguments.name(arguments.by_column[column]))
        function = "max" if view.output(column).kind is OutputKind.MAX else "min"
        parts.append(f"{function}(case when {s} > 0 then {x} end) as {ident(delta_name(column, 'p'))}")
        parts.append(f"{function}(case when {s} < 0 then {x} end) as {ident(delta_name(column, 'n'))}")
    group = f"\ngroup by {idents(view.group_key_columns)}" if view.group_key_columns else ""
    delta = f"select {', '.join(parts)}\nfrom {rows}{group}"
    reserves = reserve_deltas(view, rows, arguments)
    if not reserves:
        return delta
    keys = view.group_key_columns
    joined = ", ".join(f"`_mv_r{i}`.{ident(column)}" for i, (columns, _) in enumerate(reserves) for column in columns)
    joins = "".join(
        f"\nleft join (\n{query}\n) as `_mv_r{i}` on {group_match('`_mv_g`', f'`_mv_r{i}`', keys)}"
        for i, (_, query) in enumerate(reserves)
    )
    return f"select `_mv_g`.*, {joined} from (\n{delta}\n) as `_mv_g`{joins}"


def recomputed_outputs(view: ViewDefinition) -> list[str]:
    """The outputs no delta maintains (OutputKind.RECOMPUTED: COUNT(DISTINCT x), PERCENTILE, ...):
    with one, every group the changes touch is recomputed from the masters (min_max.flagged_cte)."""
    return [o.name for o in view.outputs if o.kind is OutputKind.RECOMPUTED]


def exactness_guards(
    view: ViewDefinition,
    view_types: Mapping[str, str],
    stored: str = f"`_mv_d`.{STORED}",
    source: str = "`_mv_d`",
    totals: str | None = "`_mv_d`",
) -> list[str]:
    """Conditions on a row of the delta (``source``: its group's delta; ``stored``: its stored row;
    ``totals``: the row holding its new totals as columns, None: computed here) under which its
    group is recomputed from the masters, because the refresh's arithmetic cannot give Spark's
    value (exact_decimals.py): a wide decimal sum that overflowed or does not fit the narrow
    types, a decimal average that no rung computes exactly. Empty for most views. By default, of
    a row of the cached delta (``_mv_d``, its stored row ``_mv_d``.``_mv_t``, with_totals')."""
    guards = []
    for column in summed_columns(view):
        guards += sum_guards(
            f"{stored}.{ident(column)}",
            f"{stored}.{ident(nonnull_count_of(view, column))}",
            f"{source}.{ident(delta_name(column, ''))}",
            f"{source}.{ident(delta_name(column, 'v'))}",
            stored_type(view_types, column),
        )
    values = _new_values(view, view_types, False, stored, source, reserves_in_source=totals is not None, totals=totals)
    for output in view.outputs:
        if output.kind is OutputKind.AVG:
            support = view.support_columns(output.name)
            total = next(h.name for h in support if h.purpose is HiddenPurpose.SUM)
            counted = next(h.name for h in support if h.purpose is HiddenPurpose.NONNULL_COUNT)
            guard = average_guard(
                values[total], values[counted], stored_type(view_types, total), stored_type(view_types, output.name)
            )
            if guard is not None:
                guards.append(guard)
    return guards


def wide_sums(view: ViewDefinition, view_types: Mapping[str, str]) -> list[str]:
    """The stored sums whose delta also counts its values (exact_decimals.sum_guards reads it)."""
    return [column for column in summed_columns(view) if wide_sum(stored_type(view_types, column)) is not None]


def stored_type(view_types: Mapping[str, str], column: str) -> str | None:
    """The stored table's type of ``column`` (matched case-insensitively), or None."""
    return next((t for c, t in view_types.items() if c.casefold() == column.casefold()), None)


def _cast(expression: str, column: str, view_types: Mapping[str, str]) -> str:
    spark_type = stored_type(view_types, column)
    return f"cast({expression} as {spark_type})" if spark_type else expression


TOTAL_PREFIX = "_mv_n_"  # a group's new count or sum, as a column of the row with_totals makes


def _totals(view: ViewDefinition, view_types: Mapping[str, str], stored: str, source: str) -> dict[str, str]:
    """The group's new row count and its counts and sums of values (the stored value plus the
    delta: see _new_values), which its averages and expressions read, several times each."""

    def old(column: str) -> str:
        return f"{stored}.{ident(column)}"

    def delta(column: str) -> str:
        return f"{source}.{ident(delta_name(column, ''))}"

    # (a global aggregate's delta is one row even when no changed row passes the filters: NULLs)
    totals = {ROW_COUNT_COLUMN: f"(coalesce({old(ROW_COUNT_COLUMN)}, 0) + coalesce({delta(ROW_COUNT_COLUMN)}, 0))"}
    for column in counted_columns(view):
        totals[column] = f"(coalesce({old(column)}, 0) + coalesce({delta(column)}, 0))"
    for column in summed_columns(view):
        totals[column] = (
            f"case when {totals[nonnull_count_of(view, column)]} = 0 then null "
            f"else {sum_of(old(column), delta(column), stored_type(view_types, column))} end"
        )
    return totals


def with_totals(view: ViewDefinition, view_types: Mapping[str, str], query: str) -> str:
    """The rows of the cached delta ``query`` (``_mv_d``: a group's delta and its stored row),
    each with its group's new counts and sums as columns (``_mv_n_<column>``): the averages, the
    exactness guards and the expressions over aggregates read them by name, instead of repeating
    their arithmetic (an average of a decimal reads its sum and count up to 20 times), which Spark
    would analyze and compile in every copy."""
    totals = _totals(view, view_types, f"`_mv_d`.{STORED}", "`_mv_d`")
    named = ", ".join(f"{value} as {ident(TOTAL_PREFIX + column)}" for column, value in totals.items())
    return f"select `_mv_d`.*, {named} from (\n{query}\n) as `_mv_d`"


def _new_values(
    view: ViewDefinition,
    view_types: Mapping[str, str],
    recompute: bool,
    stored: str,
    source: str,
    reserves_in_source: bool = False,
    totals: str | None = None,
) -> dict[str, str]:
    """Each stored column's value after the refresh, from the row ``source`` (the group's delta
    and, for recomputed groups, its recomputed values) and the stored row ``stored`` (all NULL
    for a new group); ``reserves_in_source``: the new reserves are columns of ``source``
    (with_new_reserves), not computed here; ``totals``: a row holding the new counts and sums as
    columns (with_totals), which the values over them read by name."""
    values: dict[str, str] = {name: f"{source}.{ident(name)}" for name in view.group_key_columns}
    new_totals = _totals(view, view_types, stored, source)
    values.update({c: f"{totals}.{ident(TOTAL_PREFIX + c)}" for c in new_totals} if totals is not None else new_totals)
    count = values[ROW_COUNT_COLUMN]

    def old(column: str) -> str:
        return f"{stored}.{ident(column)}"

    def delta(column: str, tag: str = "") -> str:
        return f"{source}.{ident(delta_name(column, tag))}"

    for output in view.outputs:
        if output.kind is OutputKind.COUNT_STAR:
            values[output.name] = count
        elif output.kind is OutputKind.AVG:
            support = view.support_columns(output.name)
            total = next(h.name for h in support if h.purpose is HiddenPurpose.SUM)
            counted = next(h.name for h in support if h.purpose is HiddenPurpose.NONNULL_COUNT)
            # as Spark's AVG computes it (exact_decimals.py: a decimal's rounded once to its type)
            values[output.name] = average_of(
                values[total], values[counted], stored_type(view_types, total), stored_type(view_types, output.name)
            )
        elif output.kind is OutputKind.RECOMPUTED:  # every group of the delta is recomputed: kept elsewhere
            values[output.name] = old(output.name)
        elif output.kind is OutputKind.PLAIN and output.name not in values:  # a constant (no GROUP BY)
            values[output.name] = render_expression(output.expression)
        elif (
            output.kind in (OutputKind.MIN, OutputKind.MAX)
            and (reserve_column := reserve_of(view, output.name)) is not None
        ):
            reserve = (
                f"{source}.{ident(new_reserve_name(output.name))}"
                if reserves_in_source
                else new_reserve(view, output.name, view_types, stored, source)
            )
            values[output.name] = f"try_element_at({reserve}, 1).`v`"
            values[reserve_column.name] = reserve
        elif output.kind in (OutputKind.MIN, OutputKind.MAX):
            function = "greatest" if output.kind is OutputKind.MAX else "least"
            values[output.name] = f"{function}({old(output.name)}, {delta(output.name, 'p')})"
    for output in view.outputs:
        if output.kind is OutputKind.DERIVED:  # from the new values it reads, in their stored types
            assert output.stored is not None  # the analysis gives every DERIVED output its expression
            value = _over_values(output.stored, values, view_types)
            # not evaluated for a group that goes (with ANSI on, 1 / COUNT(x) of its zero would fail)
            values[output.name] = f"case when {count} > 0 then {value} end" if view.group_by else value
    result = {}
    for column in view.stored_columns:
        value = values[column]
        if recompute and column not in view.group_key_columns:
            value = f"case when {source}.{ident(RECOMPUTED)} then {source}.{ident(RECOMPUTED_PREFIX + column)} else {value} end"
        result[column] = _cast(value, column, view_types)
    return result


def _over_values(expression: exp.Expr, values: Mapping[str, str], view_types: Mapping[str, str]) -> str:
    """``expression``, over stored column names, with each column replaced by its new value cast
    to its stored type (as the defining query's expression reads the aggregate's own type)."""
    placeholders: dict[str, str] = {}

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table:
            token = f"_mv_value{len(placeholders)}"
            placeholders[token] = _cast(values[node.name], node.name, view_types)
            return exp.column(token, quoted=True)
        return node

    text = render_expression(expression.copy().transform(swap))
    for token, value in placeholders.items():
        text = text.replace(f"`{token}`", f"({value})")
    return text


RESERVES_STEP = "MIN/MAX from the reserves, recompute of groups whose reserve ran out"
INSERT_ONLY_STEP = "MIN/MAX recompute (insert-only)"  # skipped: no value can have gone


def _change_steps(view: ViewDefinition, changed: list[str], sliced: set[str]) -> tuple[str, ...]:
    """Each changed occurrence's step, as the log line names it: ``SLICES`` when its slices are
    recomputed (``sliced``: outer_aggregate.py), ``ROWS`` when it is null-supplying, else ``DELTA``."""
    return tuple(f"{'SLICES' if a in sliced else 'ROWS' if a in view.null_supplying else 'DELTA'} {a}" for a in changed)


def _rewrite(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    view_types: Mapping[str, str],
    branch: str,
    changed: list[str],
) -> RefreshStatement | None:
    """A small view rewritten whole, in ONE statement: its stored rows full-outer-joined with the
    delta (computed inline, read once), the delta's groups with their new values, the others as
    they are. A copy-on-write overwrite of a few rows costs less than caching the delta, deleting
    its groups and inserting them (three Spark statements). A changed group the delta cannot give
    stops the statement, and its fallback runs instead: the same rewrite with the recompute of
    those groups from the masters (_rewrite_recomputing; statement.Fallback). Such a group is one
    whose sum or average is at the edge of its type (exactness_guards), or whose MIN/MAX reserve
    ran out while it still has values (min_max.reserve_ran_out: only after deletes, and rare).
    Not for views that recompute groups as a rule (HAVING, a MIN/MAX without a reserve that lost
    values, aggregates no delta maintains): None."""
    min_max = [o.name for o in view.outputs if o.kind in (OutputKind.MIN, OutputKind.MAX)]
    any_deletes = any(marked[o.master.name].deletes for o in view.occurrences)
    extremes = min_max if any_deletes or view.null_supplying else []  # may have lost their extreme
    if view.having is not None or any(reserve_of(view, c) is None for c in extremes) or recomputed_outputs(view):
        return None
    arguments = Arguments(view)

    sliced: set[str] = set()  # the changes applied by recomputing their slices (outer_aggregate.py)

    def anchor_keys(alias: str, query: str) -> str:  # the slices' anchor keys: inline, read once
        sliced.add(alias)
        return query

    rows_of_delta = _delta_rows(_delta_terms(view, marked, arguments, anchor_keys))
    delta = _delta_of_rows(view, rows_of_delta, arguments, min_max, wide_sums(view, view_types))
    keys = view.group_key_columns
    values = _new_values(view, view_types, False, "`_mv_t`", "`_mv_s`")
    # an unchanged group keeps its stored values exactly; a new group's keys come from the delta
    # (CASE evaluates the new values, the reserves' merges among them, for changed groups only)
    stored = view.stored_columns
    in_delta = "coalesce(`_mv_s`.`_mv_in_delta`, false)"
    kept = [
        f"case when {in_delta} then {values[c]} else `_mv_t`.{ident(c)} end as {ident(c)}"
        if c not in keys
        else f"coalesce(`_mv_s`.{ident(c)}, `_mv_t`.{ident(c)}) as {ident(c)}"
        for c in stored
    ]
    new_count = values[ROW_COUNT_COLUMN]
    guards = exactness_guards(view, view_types, stored="`_mv_t`", source="`_mv_s`", totals=None)
    for c in extremes:
        reserve = reserve_of(view, c)
        assert reserve is not None  # (checked above)
        guards.append(reserve_ran_out(view, c, "`_mv_t`", "`_mv_s`", values[reserve.name]))
    guarded = f", coalesce({in_delta} and ({' or '.join(guards)}), false) as `_mv_guarded`" if guards else ""
    joined = (
        f"select {', '.join(kept)}, {in_delta} as `_mv_changed`, {new_count} as `_mv_new_count`{guarded}\n"
        f"from (select *, true as `_mv_in_delta` from (\n{delta}\n)) as `_mv_s`\n"
        f"full outer join {relation(view_relation)} as `_mv_t` on {group_match('`_mv_s`', '`_mv_t`', keys)}"
    )
    # a group whose rows all went is not written again; a global aggregate keeps its one row
    where = "\nwhere not `_mv_changed` or `_mv_new_count` > 0" if keys else ""
    # (a guarded group stops the statement where it is written: the first column's value)
    written = [
        stop_when("`_mv_guarded`", ident(c)) + f" as {ident(c)}" if guards and i == 0 else ident(c)
        for i, c in enumerate(stored)
    ]
    rows = f"select {', '.join(written)} from (\n{joined}\n){where}"
    target = relation(view_relation)
    fallback = (
        Fallback(
            _rewrite_recomputing(view, view_relation, marked, view_types, rows_of_delta, delta, extremes),
            "the rewrite with the recompute of those groups",
        )
        if guards
        else None
    )
    write = Write(WriteKind.OVERWRITE, f"insert overwrite {target} ({idents(stored)})\n{rows}", fallback=fallback)
    run = _change_steps(view, changed, sliced) + ((RESERVES_STEP,) if extremes else ()) + ("rewrite of the view",)
    skipped = tuple(f"DELTA {o.alias}" for o in view.occurrences if o.alias not in changed)
    if min_max and not extremes:
        skipped += (INSERT_ONLY_STEP,)
    touched = broadcast_exists(delta, "`_mv_k`", group_match("`_mv_k`", "`_mv_v`", keys))
    return refresh_writes(branch, [write], run, skipped, touched=touched)


def _rewrite_recomputing(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    view_types: Mapping[str, str],
    rows_of_delta: str,
    delta: str,
    extremes: Sequence[str] = (),
) -> str:
    """The fallback of a rewrite (_rewrite) that stopped: the view rewritten whole, its delta's
    groups as the INSERT of a refresh in several statements writes them (the groups the guards
    flag recomputed from the masters: _new_rows), the other groups as they are. The delta is
    inline here (Spark computes it at each reference): this runs only when a guard held."""
    keys = view.group_key_columns
    flag = flag_condition(view, list(extremes), exactness_guards(view, view_types))
    cached = _cached_delta(view, view_types, delta, rows_of_delta, view_relation, flag)
    ctes, _, new_rows = _new_rows(view, view_types, marked, cached, recompute=True, every_group=False)
    stored = view.stored_columns
    target = relation(view_relation)
    unchanged = (  # (a global aggregate's delta always holds its one row: none)
        f"\nunion all\nselect {', '.join(f'`_mv_v`.{ident(c)}' for c in stored)} from {target} as `_mv_v`\n"
        f"left anti join (select {idents(keys)} from `_mv_delta`) as `_mv_k` on {group_match('`_mv_k`', '`_mv_v`', keys)}"
        if keys
        else ""
    )
    return f"insert overwrite {target} ({idents(stored)})\nwith {', '.join(ctes)}\n{new_rows}{unchanged}"


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
        f"left semi join ({broadcast(groups)}) as `_mv_k` on {group_match('`_mv_k`', '`_mv_v`', keys)}"
    )
    return (
        f"select `_mv_d`.*, struct(`_mv_v`.*) as {STORED} from (\n{delta}\n) as `_mv_d`\n"
        f"left join (\n{stored}\n) as `_mv_v` on {group_match('`_mv_d`', '`_mv_v`', keys)}"
    )


def _cached_delta(
    view: ViewDefinition,
    view_types: Mapping[str, str],
    delta: str,
    rows: str,
    view_relation: str,
    flag: str | None,
) -> str:
    """What the refresh caches of ``delta`` (of the delta rows ``rows``): each group with its
    stored row (_with_stored_rows), its new MIN/MAX reserves (with_new_reserves), its new totals
    (with_totals) and, when some groups may be recomputed, whether it is (``flag``: FLAG).
    Computed once here, every statement reading the cache reads them as columns."""
    totals = with_totals(
        view, view_types, with_new_reserves(view, view_types, _with_stored_rows(view, delta, rows, view_relation))
    )
    return totals if flag is None else f"select `_mv_d`.*, {flag} as {FLAG} from (\n{totals}\n) as `_mv_d`"


def _new_rows(
    view: ViewDefinition,
    view_types: Mapping[str, str],
    marked: Mapping[str, MarkedLog],
    delta: str,
    recompute: bool,
    every_group: bool,
    stop: bool = False,
) -> tuple[list[str], dict[str, str], str]:
    """The new rows of the groups of ``delta`` (a query of the cached delta's rows: _cached_delta),
    with the recompute of the groups it flags from the masters or without it (``every_group``:
    every group of the delta recomputed; ``stop``: without it, a flagged group written stops the
    statement, statement.stop_when): the CTEs they read (``_mv_delta`` first), each stored
    column's new value, and the SELECT over them. A group whose rows all went is not written
    again; a global aggregate keeps its one row; with HAVING, a group that does not pass is not."""
    keys = view.group_key_columns
    ctes = [f"`_mv_delta` as (\n{delta}\n)"]
    rows = "select `_mv_d`.*"
    joins = ""
    if recompute:
        ctes += [flagged_cte(view, every_group=every_group), recompute_cte(view, marked)]
        recomputed = [f"`_mv_r`.{ident(RECOMPUTED_PREFIX + c)}" for c in view.stored_columns if c not in keys]
        rows += f", {', '.join(recomputed)}, coalesce(`_mv_r`.{ident(RECOMPUTED)}, false) as {ident(RECOMPUTED)}"
        joins = f"\nleft join `_mv_recompute` as `_mv_r` on {group_match('`_mv_d`', '`_mv_r`', keys)}"
    ctes.append(f"`_mv_source` as (\n{rows}\nfrom `_mv_delta` as `_mv_d`{joins}\n)")
    values = _new_values(
        view, view_types, recompute, f"`_mv_s`.{STORED}", "`_mv_s`", reserves_in_source=True, totals="`_mv_s`"
    )
    written = {
        c: stop_when(f"`_mv_s`.{FLAG}", values[c]) if stop and i == 0 else values[c]
        for i, c in enumerate(view.stored_columns)
    }
    new_rows = (
        f"select {', '.join(f'{written[c]} as {ident(c)}' for c in view.stored_columns)}\nfrom `_mv_source` as `_mv_s`"
        + (f"\nwhere {values[ROW_COUNT_COLUMN]} > 0" if keys else "")
    )
    if view.having is not None:
        new_rows = f"select * from (\n{new_rows}\n) as `_mv_h`\nwhere {render_expression(view.having)}"
    return ctes, values, new_rows


def refresh_statement(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    view_types: Mapping[str, str] | None = None,
    branch: str = WRITE_BRANCH,
    view_rows: int | None = None,
    crossed: CrossedRows | None = None,
    *,
    view_snapshot: int | None = None,  # (not used: the groups' rows are read as the refresh's writes see them)
) -> RefreshStatement | None:
    """The writes that apply the marked changes (and the rows that ``crossed`` the view's time
    boundary: with_crossed_rows), or None when there are none: a DELETE of the delta's groups on
    the write branch, then an INSERT of their new rows staged on it; or, for a small view
    (``view_rows``: its rows when small enough to be rewritten, config rewrite_rows), one statement
    rewriting it whole (see _rewrite)."""
    changed = [o.alias for o in view.occurrences if marked[o.master.name].has_changes]
    if not changed and crossed is None:
        return None
    if view_rows is not None and crossed is None:
        rewritten = _rewrite(view, view_relation, marked, view_types or {}, branch, changed)
        if rewritten is not None:
            return rewritten
    view_types = view_types or {}
    arguments = Arguments(view)
    min_max = [o.name for o in view.outputs if o.kind in (OutputKind.MIN, OutputKind.MAX)]
    # (rows that crossed out of the time boundary go as deleted rows do)
    any_deletes = crossed is not None or any(marked[o.master.name].deletes for o in view.occurrences)
    # (over outer joins the old slices' rows are negative whatever the logs hold)
    extremes = bool(min_max) and (any_deletes or bool(view.null_supplying))
    # with HAVING, groups the view does not hold are recomputed (their state is not stored); so are
    # groups whose sum or average the refresh's arithmetic cannot give exactly (exactness_guards)
    guards = exactness_guards(view, view_types)
    touched = bool(recomputed_outputs(view))  # every group of the delta is recomputed
    recompute = extremes or view.having is not None or bool(guards) or touched
    target = branch_target(view_relation, branch)
    keys = view.group_key_columns
    slices: list[Cached] = []  # the affected anchor keys of a change sliced by them (outer_aggregate.py)
    sliced: set[str] = set()  # ... and those changes
    inline: list[bool] = []

    def anchor_keys(alias: str, query: str) -> str:
        sliced.add(alias)
        if inline:
            return query
        slices.append(Cached(cached_view(branch, f"slices_{alias}"), query))
        return f"select * from {ident(slices[-1].name)}"

    terms = _terms(view, marked, arguments, anchor_keys, crossed)
    delta_rows = _delta_rows(terms)
    sums = wide_sums(view, view_types)
    delta = _delta_of_rows(view, delta_rows, arguments, min_max, sums)
    # (the statistics run before the cached views are made: they compute the anchor keys inline)
    inline.append(True)
    rows_in_full = _delta_rows(_terms(view, marked, arguments, anchor_keys, crossed)) if slices else delta_rows
    delta_in_full = _delta_of_rows(view, rows_in_full, arguments, min_max, sums) if slices else delta
    # computed once (the writes name it up to six times), then read from the session's cache.
    # The cached delta reads its rows twice (the groups, and their keys that find the stored rows:
    # _with_stored_rows), with reserves once more per reserve: over several masters, whose rows
    # are joins reading the masters, they are cached by that statement first (lazily: no job of
    # their own); a single master's are its log's images. Read twice, an aggregate over a 4-way
    # join read `lineitem` whole twice for its changed customers (TPC-H scale factor 1: 173 of
    # the statement's 207 MB)
    rows_cached: tuple[Cached, ...] = ()
    if len(view.occurrences) > 1:
        rows_cached = (Cached(cached_view(branch, "terms"), "\nunion all\n".join(terms), lazy=True),)
        delta_rows = ident(rows_cached[0].name)
        delta = _delta_of_rows(view, delta_rows, arguments, min_max, sums)
    # whether a group is recomputed, computed into the cache when not every group is
    flag = flag_condition(view, min_max if extremes else [], guards) if recompute and not touched else None
    cached = Cached(
        cached_view(branch, "delta"), _cached_delta(view, view_types, delta, delta_rows, view_relation, flag)
    )
    groups = f"select * from {ident(cached.name)}"
    from_source = "from `_mv_source` as `_mv_s`"
    ctes, values, new_rows = _new_rows(view, view_types, marked, groups, recompute, every_group=touched)
    inserted = f"with {', '.join(ctes)}\n{new_rows}"
    new_count = values[ROW_COUNT_COLUMN]
    stored = view.stored_columns
    of_delta_groups = broadcast_exists(groups, "`_mv_k`", group_match("`_mv_k`", "`_mv_v`", keys))
    delete = delete_write(target, of_delta_groups, "`_mv_v`")
    # (from the cached delta: rebalanced, so that its files follow the bytes written)
    insert = Write(WriteKind.INSERT, f"insert into {target} ({idents(stored)})\n{rebalanced(inserted)}")
    if flag is not None:  # without the recompute when no group is flagged
        # flagged rarely (a reserve that ran out, a sum at the edge of its type): the INSERT without
        # the recompute, stopped by a flagged group, and with it as its fallback (statement.Fallback);
        # often (HAVING's groups the view does not hold, a global MIN/MAX's removed extreme): the
        # flagged groups counted first (statement.LeanForm)
        rarely = view.having is None and all(reserve_of(view, c) is not None for c in (min_max if extremes else []))
        lean_ctes, _, lean_rows = _new_rows(view, view_types, marked, groups, False, touched, stop=rarely)
        lean_inserted = f"with {', '.join(lean_ctes)}\n{lean_rows}"
        lean_sql = f"insert into {target} ({idents(stored)})\n{rebalanced(lean_inserted)}"
        if rarely:
            insert = Write(
                WriteKind.INSERT,
                lean_sql,
                fallback=Fallback(insert.sql, "the INSERT with the recompute of those groups"),
            )
        else:
            insert = replace(
                insert,
                lean=LeanForm(
                    lean_sql,
                    needed=f"select count_if({FLAG}) from {ident(cached.name)}",
                    omits="its recompute of flagged groups",
                ),
            )
    run = _change_steps(view, changed, sliced)
    run += tuple(f"TIME {alias}" for alias in sorted(crossed.rows)) if crossed is not None else ()
    if touched:
        run += ("recompute of every changed group (an aggregate no delta maintains)",)
    elif extremes and view.reserves:
        run += (RESERVES_STEP,)
    elif extremes:
        run += ("MIN/MAX recompute of groups whose extreme was removed",)
    if view.having is not None and not touched:
        run += ("HAVING: recompute of groups the view does not hold",)
    skipped = tuple(f"DELTA {o.alias}" for o in view.occurrences if o.alias not in changed)
    if min_max and not extremes:
        skipped += (INSERT_ONLY_STEP,)
    # (the statistics are read before the writes, and the cached delta: the delta in full)
    stats_ctes = [
        f"`_mv_delta` as (\n{_cached_delta(view, view_types, delta_in_full, rows_in_full, view_relation, flag)}\n)",
        *ctes[1:],
    ]
    existed = f"`_mv_s`.{STORED}.{ident(ROW_COUNT_COLUMN)} is not null"
    recomputed_count = f"count_if(`_mv_s`.{ident(RECOMPUTED)})" if recompute else "0"
    if view.having is None:
        stats = (
            f"with {', '.join(stats_ctes)}\n"
            f"select count_if(not {existed} and {new_count} > 0), count_if({existed} and {new_count} <> 0), "
            f"count_if({existed} and {new_count} = 0), {recomputed_count}\n{from_source}"
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
        branch,
        [delete, insert],
        run,
        skipped,
        stats,
        labels,
        (*slices, *rows_cached, cached),
        touched=of_delta_groups,
        deleted=of_delta_groups,
        inserted=inserted,
    )
