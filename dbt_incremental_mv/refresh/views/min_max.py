"""MIN/MAX outputs of an aggregate view (refresh/views/aggregate_view.py, point 4): when the new
extreme is safe from the delta alone, the reserves (each group's most extreme values with their
counts) merged with the delta's, and the groups recomputed from the masters: MIN/MAX groups whose
extreme may have gone, and for a view with HAVING the delta's groups the view does not hold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlglot

from dbt_incremental_mv.analysis import OutputKind, ViewDefinition
from dbt_incremental_mv.analysis.hidden import RESERVE, ROW_COUNT_COLUMN
from dbt_incremental_mv.analysis.model import HiddenColumn
from dbt_incremental_mv.analysis.render import render_expression, select_expression
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.views.aggregate_columns import (
    RECOMPUTED,
    RECOMPUTED_PREFIX,
    SIGN,
    STORED,
    Arguments,
    delta_name,
    nonnull_count_of,
)
from dbt_incremental_mv.sql_text import ident, idents


def safe_extreme(view: ViewDefinition, column: str, delta: str, stored: str) -> str:
    """The new extreme of ``column`` is ``greatest(stored, candidates)`` (``least`` for MIN): no
    negative row, or every one beyond the stored extreme, or a positive row beyond every negative
    one. That positive is really new (a positive that is not comes with an equal negative), and
    whatever remains of the old rows is within the stored extreme, which it reaches or passes:
    a MAX whose row was updated upwards is not recomputed."""
    removed = f"{delta}.{ident(delta_name(column, 'n'))}"
    added = f"{delta}.{ident(delta_name(column, 'p'))}"
    beyond = "<" if view.output(column).kind is OutputKind.MAX else ">"
    return (
        f"({removed} is null or ({stored}.{ident(column)} is not null and {removed} {beyond} {stored}.{ident(column)})"
        f" or {removed} {beyond} {added})"
    )


def new_reserve_name(output: str) -> str:
    return f"_mv_nr_{output}"


def with_new_reserves(view: ViewDefinition, view_types: Mapping[str, str], rows: str) -> str:
    """The delta's groups with their stored rows (``rows``: _with_stored_rows) and each MIN/MAX
    reserve's new value (``_mv_nr_<output>``): merged once per group where the delta is cached,
    not in each of the several places the writes read it (Spark evaluates the higher-order
    functions of a merge row by row, interpreted)."""
    if not view.reserves:
        return rows
    merged = ", ".join(
        f"{new_reserve(view, reserve.outputs[0], view_types, f'`_mv_c`.{STORED}', '`_mv_c`')} "
        f"as {ident(new_reserve_name(reserve.outputs[0]))}"
        for reserve in view.reserves
    )
    return f"select `_mv_c`.*, {merged} from (\n{rows}\n) as `_mv_c`"


def recompute_cte(view: ViewDefinition, marked: Mapping[str, MarkedLog]) -> str:
    """The CTE ``_mv_recompute``: the groups flagged by ``_mv_flagged`` (flagged_cte), recomputed
    from the masters as of the marked snapshot, from those groups' rows only (a semi join below
    the aggregation; a global aggregate, which has its one row even over no rows, is filtered
    after it)."""
    keys = view.group_key_columns
    flagged_keys = _flagged_keys(view)
    group = [view.output(name).expression for name in keys]
    sources = {o.alias: marked[o.master.name].master_as_of() for o in view.occurrences}
    if keys:  # the flagged groups' rows only: a semi join below the aggregation
        correlated = " and ".join(
            f"`_mv_f`.{ident(flagged)} <=> ({render_expression(expression)})"
            for flagged, expression in zip(flagged_keys, group)
        )
        flagged_rows = sqlglot.parse_one(
            f"exists (select 1 from `_mv_flagged` as `_mv_f` where {correlated})", read="spark"
        )
        restricted = select_expression(view, sources, row_filter=flagged_rows)
        flagged_only = ""
    else:  # a global aggregate has its one row even over no rows: filter after it
        restricted = select_expression(view, sources)
        flagged_only = "\nwhere exists (select 1 from `_mv_flagged`)"
    recomputed = ", ".join(
        f"`_mv_q`.{ident(c)}" if c in keys else f"`_mv_q`.{ident(c)} as {ident(RECOMPUTED_PREFIX + c)}"
        for c in view.stored_columns
    )
    return (
        f"`_mv_recompute` as (\nselect {recomputed}, true as {ident(RECOMPUTED)} from (\n"
        f"{render_expression(restricted)}\n) as `_mv_q`{flagged_only}\n)"
    )


def _flagged_keys(view: ViewDefinition) -> list[str]:
    """The flagged groups' keys, by position: a key named like an occurrence alias (an output `c1`
    over `customers c1`) would capture the correlated reference `c1.region_id` inside the EXISTS."""
    return [f"_mv_g{i}" for i in range(len(view.group_key_columns))]


FLAG = "`_mv_flag`"  # the cached delta's column: whether its group is recomputed (flag_condition)


def flagged_cte(view: ViewDefinition, every_group: bool = False) -> str:
    """The CTE ``_mv_flagged``: the keys of the delta's groups (``_mv_delta``) recomputed from the
    masters (recompute_cte): those the cached delta flags (FLAG: flag_condition), or with
    ``every_group`` every group of the delta (a view with an aggregate no delta maintains:
    aggregate_view.recomputed_outputs). The delta holds one row per group: no DISTINCT."""
    keys = view.group_key_columns
    projection = (
        ", ".join(f"`_mv_d`.{ident(c)} as {ident(g)}" for c, g in zip(keys, _flagged_keys(view))) or "1 as `_mv_one`"
    )
    where = "" if every_group else f"\nwhere `_mv_d`.{FLAG}"
    return f"`_mv_flagged` as (\nselect {projection} from `_mv_delta` as `_mv_d`{where}\n)"


def flag_condition(view: ViewDefinition, min_max: list[str], guards: Sequence[str] = ()) -> str:
    """Whether a row of the delta (``_mv_d``: its group's delta, stored row and new totals) is
    recomputed from the masters, never NULL; computed once into the cached delta (FLAG), so that
    the count of flagged groups and the INSERT read a column, not conditions Spark analyses in
    each (the exact-decimal ones are long). Flagged: groups whose stored extreme a negative row
    may have removed (``min_max``), for a view with HAVING every group of the delta the view does
    not hold (it did not pass, or did not exist: its state is not stored), and those meeting one
    of ``guards`` (aggregate_view.exactness_guards). Of an output with a reserve, the groups whose
    reserve ran out while they still have values (see new_reserve); of one without (a global
    aggregate), the groups with negative rows, less those stored with every extreme safe (a group
    not in the view has no stored extreme and is recomputed)."""
    conditions: list[str] = []
    reserved = [c for c in min_max if reserve_of(view, c) is not None]
    plain = [c for c in min_max if c not in reserved]
    stored = f"`_mv_d`.{STORED}"  # the group's stored row (NULL fields when the view has none)
    held = f"{stored}.{ident(ROW_COUNT_COLUMN)} is not null"
    conditions += [reserve_ran_out(view, c, stored, "`_mv_d`") for c in reserved]
    if plain:
        negative = " or ".join(f"`_mv_d`.{ident(delta_name(c, 'n'))} is not null" for c in plain)
        safe = " and ".join(safe_extreme(view, c, "`_mv_d`", stored) for c in plain)
        conditions.append(f"(({negative}) and not coalesce({held} and {safe}, false))")
    if view.having is not None:  # the delta's groups the view does not hold
        conditions.append(f"(not {held})")
    conditions += [f"({g})" for g in guards]  # a sum or average the refresh's arithmetic cannot give exactly
    return f"coalesce({' or '.join(conditions)}, false)" if conditions else "false"


def reserve_ran_out(view: ViewDefinition, output: str, stored: str, row: str, reserve: str | None = None) -> str:
    """Whether the new reserve of MIN/MAX ``output`` (``reserve``, else a column of ``row``:
    with_new_reserves) ran out while its group still has values (its stored row ``stored``, its
    delta ``row``): the group is recomputed."""
    new = reserve or f"{row}.{ident(new_reserve_name(output))}"
    return f"(size({new}) = 0 and {count_after(view, output, stored, row)} > 0)"


def reserve_of(view: ViewDefinition, output: str) -> HiddenColumn | None:
    """The reserve of a MIN/MAX output (analysis/hidden.py), or None (a global aggregate's)."""
    return next((h for h in view.reserves if output in h.outputs), None)


def reserve_delta_name(output: str) -> str:
    return f"_mv_dr_{output}"


def reserve_deltas(view: ViewDefinition, terms: str, arguments: Arguments) -> list[tuple[tuple[str, ...], str]]:
    """Per argument of reserves: (their delta columns, a query of them per group): the delta's
    values of the argument netted (value, signed count), and per reserve the RESERVE most extreme
    of its positive ones and of its negative ones (no others can reach the reserve: see
    new_reserve). Reserves of one argument (a MIN and a MAX of the same column) share the netting:
    one read of the rows, one aggregation, one shuffle for both rankings."""
    keys = idents(view.group_key_columns)
    by_argument: dict[str, list[str]] = {}
    for reserve in view.reserves:
        name = reserve.outputs[0]
        by_argument.setdefault(Arguments.name(arguments.by_column[name]), []).append(name)
    found = []
    for argument, names in by_argument.items():
        x = ident(argument)
        ranks = [
            (f"`_mv_rk{i}`", "desc" if view.output(name).kind is OutputKind.MAX else "asc")
            for i, name in enumerate(names)
        ]
        ranked = ", ".join(
            f"row_number() over (partition by {keys}, `_mv_n` > 0 order by `_mv_v` {order}) as {rank}"
            for rank, order in ranks
        )
        lists = ", ".join(
            f"collect_list(case when {rank} <= {RESERVE} then named_struct('v', `_mv_v`, 'n', `_mv_n`) end) "
            f"as {ident(reserve_delta_name(name))}"
            for (rank, _), name in zip(ranks, names)
        )
        found.append(
            (
                tuple(reserve_delta_name(name) for name in names),
                (
                    f"select {keys}, {lists} from (\n"
                    f"select *, {ranked} from (\n"
                    f"select {keys}, {x} as `_mv_v`, sum({ident(SIGN)}) as `_mv_n` from {terms}\n"
                    f"where {x} is not null group by {keys}, {x} having sum({ident(SIGN)}) <> 0\n)\n"
                    f") where {' or '.join(f'{rank} <= {RESERVE}' for rank, _ in ranks)} group by {keys}"
                ),
            )
        )
    return found


def new_reserve(view: ViewDefinition, output: str, view_types: Mapping[str, str], stored: str, delta: str) -> str:
    """The new reserve of MIN/MAX ``output`` (stored row ``stored``, delta row ``delta``).

    A reserve holds the group's most extreme distinct values with their counts: exactly every
    value from the extreme down to its last one (its floor). So a change at or beyond the floor
    is merged in (counts added, values gone dropped), and one short of it cannot be placed and
    is left out (which values lie between is not known), unless the reserve is complete (its
    counts add up to the group's COUNT(x): it holds every value). The RESERVE most extreme of
    the result are kept. The new extreme is its first value; a group whose reserve runs out
    while it still has values is recomputed."""
    hidden = reserve_of(view, output)
    assert hidden is not None
    stored_type = next((t for c, t in view_types.items() if c.casefold() == hidden.name.casefold()), None)
    typed = f"cast({{}} as {stored_type})" if stored_type else "{}"
    maximum = view.output(output).kind is OutputKind.MAX
    empty = typed.format("array()")
    old = f"coalesce({stored}.{ident(hidden.name)}, {empty})"
    change = f"coalesce({typed.format(f'{delta}.{ident(reserve_delta_name(output))}')}, {empty})"
    count = nonnull_count_of(view, output)
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


def count_after(view: ViewDefinition, output: str, stored: str, delta: str) -> str:
    """The group's COUNT(x) after the refresh, for MIN/MAX ``output``."""
    count = nonnull_count_of(view, output)
    return f"(coalesce({stored}.{ident(count)}, 0) + coalesce({delta}.{ident(delta_name(count, ''))}, 0))"
