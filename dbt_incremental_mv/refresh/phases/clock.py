"""The clock of a refresh (analysis/clock.py): the time its views' clock functions read as, and
whether rows crossed a view's time boundary since the time its rows reflect.

A view whose filters of one table read the clock (``where o.due_date >= current_date()``)
stays equal to its query at the new time while no row's filter gives another answer at the new
time than at the old one: neither a row of the master as the refresh reads it (the unchanged rows
the view keeps) nor a marked image of a changed row (the images a view class evaluates the filter
on). Rows that crossed are applied as changes by the view classes that can
(view_classes.applies_crossed_rows: every class: join, outer join, aggregate, ranked, windowed, per
partition, UNION ALL); a view whose class could not would be recomputed (decide.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from dbt_incremental_mv import environment
from dbt_incremental_mv.analysis import MasterTable, ViewDefinition, analyze_view, render_expression
from dbt_incremental_mv.analysis.clock import Clock, MovingFilter, clock_move
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.state.bookkeeping import ViewState
from dbt_incremental_mv.sql_text import ident, integer, relation

SESSION_TIME = "select cast(current_timestamp() as string)"


def refresh_clock(ctx: RefreshContext) -> Clock:
    """This refresh's time: DBT_INCREMENTAL_MV_NOW when set, else the Spark session's clock (in
    its time zone, as its ``current_timestamp()`` reads)."""
    fixed = environment.NOW.value()
    if fixed is not None:
        return Clock.of(fixed)
    return Clock.of(str(ctx.query(SESSION_TIME)[0][0])[:26])


def moved_since(
    sql: str,
    masters: Mapping[str, MasterTable],
    definition: ViewDefinition,
    clock: Clock,
    state: ViewState | None,
) -> tuple[str | None, tuple[MovingFilter, ...]]:
    """Why the view cannot be fast refreshed at ``clock`` from the time its ``state`` reflects
    (None: it can), and the filters of one table whose rows may have crossed the time boundary
    since (``definition``: the query at ``clock``)."""
    if state is None or state.clock is None:
        return "the view has no record of the time its rows reflect (it reads the clock)", ()
    if state.clock == clock.timestamp:
        return None, ()
    move = clock_move(analyze_view(sql, masters, Clock(state.clock)), definition)
    if move.elsewhere is not None:
        return (
            f"the view reads the clock in {move.elsewhere}, and its time moved (from {state.clock} to "
            f"{clock.timestamp})",
            (),
        )
    return None, move.filters


_COMPARISONS = (exp.EQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


def crossing(filters: Sequence[MovingFilter], types: Mapping[str, str] | None = None) -> exp.Expr:
    """Rows whose filters give another answer at the new time than at the old one. A filter that
    compares a value of the row with the time (``o.received_at <= current_timestamp()``) can only
    change its answer for values between its two times: that range, Spark pushes it to the scan
    (Iceberg skips the files whose values all lie outside it), then the exact test. ``types``: the
    Spark type of each column (lower case), so that a timestamp column's date (``cast(o.placed_at
    as date) >= current_date() - 30``) is pruned by its range of times."""
    changed: list[exp.Expr] = []
    for moving in filters:
        flipped: exp.Expr = exp.NEQ(
            this=exp.Coalesce(this=exp.paren(moving.before.copy()), expressions=[exp.false()]),
            expression=exp.Coalesce(this=exp.paren(moving.after.copy()), expressions=[exp.false()]),
        )
        span = _span(moving, types or {})
        changed.append(exp.and_(span, flipped) if span is not None else flipped)
    return exp.or_(*changed) if len(changed) > 1 else changed[0]


def _span(moving: MovingFilter, types: Mapping[str, str]) -> exp.Expr | None:
    """``value BETWEEN least(t0, t1) AND greatest(t0, t1)`` for a comparison of a row's value with
    the time (``t0``/``t1``: its two times), with the times of those dates when the value is a
    timestamp column's date; None for any other filter."""
    before, after = moving.before, moving.after
    if not isinstance(after, _COMPARISONS) or type(before) is not type(after):
        return None
    if after.this == before.this and after.expression != before.expression:
        value, old, new = after.this, before.expression, after.expression
    elif after.expression == before.expression and after.this != before.this:
        value, old, new = after.expression, before.this, after.this
    else:
        return None
    if value.find(exp.Column) is None or old.find(exp.Column) is not None:
        return None  # not a row's value compared with the time
    low, high = (
        exp.Least(this=old.copy(), expressions=[new.copy()]),
        exp.Greatest(this=old.copy(), expressions=[new.copy()]),
    )
    span: exp.Expr = exp.Between(this=value.copy(), low=low, high=high)
    column = value.this if isinstance(value, (exp.Cast, exp.TryCast)) and value.to.is_type("date") else None
    if isinstance(column, exp.Column) and types.get(column.name.lower(), "").startswith("timestamp"):
        # a timestamp's date is within [low, high] when the timestamp is within [low, high + 1 day)
        kind = exp.DataType.build(types[column.name.lower()], dialect="spark")
        day_after = exp.DateAdd(this=high.copy(), expression=exp.Literal.number(1), unit=exp.var("DAY"))
        span = exp.and_(
            span,
            exp.GTE(this=column.copy(), expression=exp.cast(low.copy(), kind)),
            exp.LT(this=column.copy(), expression=exp.cast(day_after, kind)),
        )
    return span


@dataclass(frozen=True)
class Crossing:
    """Rows crossed the view's time boundary: why (for the log line), and by alias the query of its
    master's rows that crossed, at the snapshot the refresh reads, under the alias (a join view
    applies them as changes: join_view.with_crossed_rows)."""

    reason: str
    rows: Mapping[str, str]


def crossed_since(
    ctx: RefreshContext,
    definition: ViewDefinition | None,
    filters: Sequence[MovingFilter],
    logs: Mapping[str, LogSpec],
    state: ViewState | None = None,
    marked: Mapping[str, MarkedLog] | None = None,
) -> Crossing | None:
    """Which rows crossed the view's time boundary (``filters``, the view's moving filters) since
    the time its rows reflect: the masters read at the snapshots ``state`` reflects (``logs``: the
    view's, by master), or at those the ``marked`` logs are read at, with their images; None: none
    did, or the view reads no clock."""
    if not filters or definition is None:
        return None
    if marked is not None:
        snapshots: dict[str, int | None] = {m: log.master_snapshot for m, log in marked.items()}
    else:
        assert state is not None
        snapshots = {
            m: position.master_snapshot
            for m, spec in logs.items()
            if (position := state.logs.get(spec.log_relation)) is not None
        }
    return crossed_rows(ctx, definition, filters, snapshots, marked)


def crossed_rows(
    ctx: RefreshContext,
    definition: ViewDefinition,
    filters: Sequence[MovingFilter],
    snapshots: Mapping[str, int | None],
    marked: Mapping[str, MarkedLog] | None = None,
) -> Crossing | None:
    """Which rows crossed the time boundary of ``filters`` (of ``definition``'s occurrences), read
    at ``snapshots`` (by master) and, when given, among the ``marked`` images (by master) that
    carry the filters' columns, in one query per occurrence; None: none did."""
    by_alias: dict[str, list[MovingFilter]] = {}
    for moving in filters:
        by_alias.setdefault(moving.alias, []).append(moving)
    crossed: dict[str, str] = {}
    shown: list[str] = []
    for alias, own in sorted(by_alias.items()):
        master = definition.occurrence(alias).master
        condition = render_expression(crossing(own, {c.lower(): t for c, t in master.columns}))
        snapshot = snapshots.get(master.name)
        read_at = (
            f"{relation(master.name)} version as of {integer(snapshot)}"
            if snapshot is not None and snapshot >= 0
            else relation(master.name)
        )
        sources = [read_at]
        log = (marked or {}).get(master.name)
        read = sorted({c.name for f in own for c in f.after.find_all(exp.Column)})
        logged = {c.lower() for c in log.logged} if log is not None else set()
        if log is not None and log.has_changes and all(c.lower() in logged for c in read):
            sources.append(f"(\n{log.images(read)}\n)")
        reads = [f"select 1 from {source} as {ident(alias)}\nwhere {condition}" for source in sources]
        if ctx.query("\nunion all\n".join(reads) + "\nlimit 1"):
            crossed[alias] = f"select * from {read_at} as {ident(alias)}\nwhere {condition}"
            shown.append(f"{master.name}: " + " and ".join(render_expression(f.after) for f in own))
    if not crossed:
        return None
    return Crossing(f"rows crossed the view's time boundary ({'; '.join(shown)})", crossed)
