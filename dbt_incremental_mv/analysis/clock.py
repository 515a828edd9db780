"""Views that read the clock: ``current_date()``, ``current_timestamp()``, ``now()``,
``localtimestamp()`` ("the orders due from today on", "events received up to now").

A refresh fixes the time once (a ``Clock``) and reads the query with the clock functions
written as that time's literals: the query becomes deterministic, and is analysed, built and
refreshed like any other. The view state records the clock its rows reflect. At the next refresh
the clock has moved: the query at the old time and the query at the new one are analysed both,
and what differs between the two definitions is what the clock decides (``clock_move``):

- nothing (a ``current_date()`` view refreshed again the same day): the view is refreshed as any;
- filters of one table's rows (``where o.due_date >= current_date()``, or in an outer join's ON
  ``left join o on o.customer_id = c.customer_id and o.due_date >= current_date()``; a HAVING
  comparing a group's MAX or MIN of one table's values with the time is the filter of those values,
  whose crossed rows' groups are re-evaluated): the rows whose filter
  gives another answer at the new time have crossed the time boundary. A refresh counts them
  (refresh/phases/clock.py); while there are none, the unchanged rows of the view are those of the
  query at the new time, and the fast refresh applies the changes at the new time; rows that
  crossed are changes too (a join deletes and inserts their rows, an outer join recomputes the
  slices holding them; an aggregate takes the logged changes at the old time, ``at_times``, then
  the crossed rows in at the new time and out at the old);
- anything else (a clock value selected, in a join condition, after an aggregate): the view is
  recomputed whenever the time it reads moved.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from sqlglot import exp
from sqlglot.errors import SqlglotError

from dbt_incremental_mv.analysis.errors import UnsupportedViewError
from dbt_incremental_mv.analysis.model import JoinStep, OutputKind, PartitionQuery, ViewDefinition
from dbt_incremental_mv.analysis.parse import parse_statement
from dbt_incremental_mv.analysis.resolved import split_conjuncts

E = TypeVar("E", bound=exp.Expr)
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?$")


class ClockError(ValueError):
    """A clock setting that is not a time."""


@dataclass(frozen=True, order=True)
class Clock:
    """The time one refresh reads the clock functions as, in the session's time zone:
    ``YYYY-MM-DD HH:MM:SS[.ffffff]``."""

    timestamp: str

    @classmethod
    def of(cls, text: str) -> Clock:
        """The clock of a time written ``YYYY-MM-DD[ HH:MM[:SS[.ffffff]]]`` (``T`` between date and
        time is accepted); raises ClockError for anything else."""
        value = text.strip().replace("T", " ", 1)
        if not _TIMESTAMP.match(value):
            raise ClockError(f"{text!r} is not a time: write it as YYYY-MM-DD HH:MM:SS (the session's time zone)")
        if len(value) == 10:
            value += " 00:00:00"
        elif len(value) == 16:
            value += ":00"
        return cls(value)

    @property
    def date(self) -> str:
        return self.timestamp[:10]

    def as_written(self, error: UnsupportedViewError) -> UnsupportedViewError:
        """``error`` (of the query at this time) quoting the clock functions as the user wrote
        them, not as this time's literals."""
        spelled = {self._literal(name).sql(dialect="spark"): written for name, written in _WRITTEN.items()}

        def written(text: str) -> str:
            for literal, function in spelled.items():
                text = text.replace(literal, function)
            return text

        return UnsupportedViewError(written(error.construct), written(error.reason), written(error.hint))

    def literal(self, function: exp.Expr) -> exp.Expr:
        """The literal a clock function reads as at this time."""
        name = _name(function)
        assert name is not None, "a clock function"
        return self._literal(name)

    def _literal(self, name: str) -> exp.Expr:
        """The literal of the clock function ``name`` (``current_date``, ...) at this time."""
        if name == "current_date":
            return exp.cast(exp.Literal.string(self.date), exp.DataType.build("date"))
        kind = "timestamp_ntz" if name == "localtimestamp" else "timestamp"
        return exp.cast(exp.Literal.string(self.timestamp), exp.DataType.build(kind, dialect="spark"))


_CLOCK_TYPES = {
    "CurrentDate": "current_date",
    "CurrentTimestamp": "current_timestamp",
    "Localtimestamp": "localtimestamp",
}
_CLOCK_NAMES = {"now": "current_timestamp", "current_date": "current_date", "current_timestamp": "current_timestamp"}
_WRITTEN = {
    "current_date": "CURRENT_DATE()",
    "current_timestamp": "CURRENT_TIMESTAMP()",
    "localtimestamp": "LOCALTIMESTAMP()",
}
"""How a refusal quotes each clock function (Clock.as_written)."""


def _name(node: exp.Expr) -> str | None:
    """``current_date``, ``current_timestamp`` or ``localtimestamp`` for a clock function."""
    found = _CLOCK_TYPES.get(type(node).__name__)
    if found is None and isinstance(node, exp.Anonymous) and not node.expressions:
        found = _CLOCK_NAMES.get(node.name.lower())
    return found


def is_clock(node: exp.Expr) -> bool:
    """A call of a clock function a refresh fixes (``current_date()``, ``current_timestamp()``,
    ``now()``, ``localtimestamp()``)."""
    return _name(node) is not None


def sql_reads_clock(sql: str) -> bool:
    """Whether a model's SQL calls a clock function (False when it does not parse: the analysis
    says why)."""
    try:
        return any(is_clock(node) for node in parse_statement(sql).find_all(exp.Func))
    except (SqlglotError, UnsupportedViewError):
        return False


def at_time(statement: E, clock: Clock) -> E:
    """The statement with each clock function written as its literal at ``clock`` (a copy)."""
    fixed = statement.copy().transform(lambda node: clock.literal(node) if is_clock(node) else node)
    assert isinstance(fixed, type(statement))  # a clock function is never the whole statement
    return fixed


@dataclass(frozen=True)
class MovingFilter:
    """A filter of one occurrence's rows that the clock decides: ``before`` at the time the view
    reflects, ``after`` at this refresh's."""

    alias: str
    before: exp.Expr
    after: exp.Expr


@dataclass(frozen=True)
class ClockMove:
    """What changes in a view's definition when the clock moves (see the module's docstring)."""

    filters: tuple[MovingFilter, ...] = ()
    elsewhere: str | None = None  # where else the clock decides (None: nowhere else)


def clock_move(before: ViewDefinition, after: ViewDefinition) -> ClockMove:
    """What differs between the definitions of one query at two times (``before``: the time the
    view reflects): the filters of one occurrence, or what else."""
    if before.partition_query is not None and after.partition_query is not None:
        return _partition_move(before.partition_query, after.partition_query)
    if before.branches and len(before.branches) == len(after.branches):
        return _union_move(before, after)
    if len(before.where_conjuncts) != len(after.where_conjuncts):
        return ClockMove(elsewhere="the query's conditions")
    filters: list[MovingFilter] = []
    for old, new in zip(before.where_conjuncts, after.where_conjuncts, strict=True):
        if old.sql(dialect="spark") == new.sql(dialect="spark"):
            continue
        moving = _one_table_filter(old, new)
        if moving is None:
            return ClockMove(elsewhere=f"the condition {new.sql(dialect='spark')}, which is not a filter of one table")
        filters.append(moving)
    joins = _outer_join_move(before.joins, after.joins)
    if joins is not None:  # filters of one table in an outer join's ON: the joins alike but for them
        filters += joins
        before = replace(before, joins=after.joins)
    having = _having_move(before, after)
    if having is not None:  # the latest or earliest value of a group compared with the time
        filters += having
        before = replace(before, having=after.having)
    places = [label for field, label in _PLACES if repr(getattr(before, field)) != repr(getattr(after, field))]
    if not places and repr(replace(before, where_conjuncts=())) != repr(replace(after, where_conjuncts=())):
        places = ["the query"]
    if places:
        return ClockMove(tuple(filters), elsewhere=", ".join(dict.fromkeys(places)))
    return ClockMove(tuple(filters))


def _one_table_filter(old: exp.Expr, new: exp.Expr) -> MovingFilter | None:
    """The conjunct at two times as a filter of one occurrence's rows (None: it reads several, or
    aggregates, windows or a subquery)."""
    alias = _one_table(new)
    return MovingFilter(alias, old, new) if alias is not None else None


def _one_table(expression: exp.Expr) -> str | None:
    """The alias of the one occurrence whose columns ``expression`` reads (None: it reads several or
    none, or aggregates, windows or a subquery)."""
    aliases = {column.table for column in expression.find_all(exp.Column)}
    if len(aliases) != 1 or expression.find(exp.Subquery, exp.AggFunc, exp.Window) is not None:
        return None
    return aliases.pop()


def _outer_join_move(before: Sequence[JoinStep], after: Sequence[JoinStep]) -> list[MovingFilter] | None:
    """The filters of one occurrence in outer joins' ON conditions that differ between the joins at
    two times (``left join o on o.customer_id = c.customer_id and o.ordered_at >= current_date()``),
    when nothing else in them does (None: something else differs, or nothing does). Whether such a
    row is in the view is its filter's answer, as for a WHERE conjunct; a join view can apply the
    rows that crossed it by the slices holding them (outer_join_view.with_crossed_rows)."""
    if len(before) != len(after):
        return None
    found: list[MovingFilter] = []
    for old, new in zip(before, after, strict=True):
        if repr(old) == repr(new):
            continue
        if not new.is_outer or (old.alias, old.kind, repr(old.equi_pairs)) != (
            new.alias,
            new.kind,
            repr(new.equi_pairs),
        ):
            return None
        if len(old.residual) != len(new.residual):
            return None
        for old_conjunct, new_conjunct in zip(old.residual, new.residual, strict=True):
            if old_conjunct.sql(dialect="spark") == new_conjunct.sql(dialect="spark"):
                continue
            moving = _one_table_filter(old_conjunct, new_conjunct)
            if moving is None:
                return None
            found.append(moving)
    return found or None


def _having_move(before: ViewDefinition, after: ViewDefinition) -> list[MovingFilter] | None:
    """The HAVING conjuncts that differ between two times, each a MAX or MIN of one table's
    values compared with the time (``having max(o.seen_at) >= current_date() - 7``), as filters of
    those values: a group's answer changes only if one of its rows' values lies between the two
    times, and such a row's filter changes its answer. The view class re-evaluates the groups of
    the rows that crossed (None: another conjunct differs, or none does)."""
    if before.having is None or after.having is None or repr(before.having) == repr(after.having):
        return None
    old_conjuncts, new_conjuncts = split_conjuncts(before.having), split_conjuncts(after.having)
    if len(old_conjuncts) != len(new_conjuncts):
        return None
    found: list[MovingFilter] = []
    for old, new in zip(old_conjuncts, new_conjuncts, strict=True):
        if old.sql(dialect="spark") == new.sql(dialect="spark"):
            continue
        moving = _extreme_against_time(after, old, new)
        if moving is None:
            return None
        found.append(moving)
    return found


def _extreme_against_time(view: ViewDefinition, old: exp.Expr, new: exp.Expr) -> MovingFilter | None:
    """``<MAX or MIN output> <comparison> <time>`` at two times as the filter of the aggregated
    values (``o.seen_at >= <time>``), or None."""
    if not isinstance(new, _COMPARISONS) or type(old) is not type(new):
        return None
    for side, other in (("this", "expression"), ("expression", "this")):
        column, old_time, new_time = new.args[side], old.args[other], new.args[other]
        if not isinstance(column, exp.Column) or repr(old.args[side]) != repr(column):
            continue
        if old_time.find(exp.Column) is not None or new_time.find(exp.Column) is not None:
            return None
        output = next((o for o in view.outputs if o.name == column.name), None)
        if output is None or output.kind not in (OutputKind.MAX, OutputKind.MIN) or output.argument is None:
            return None
        alias = _one_table(output.argument)
        if alias is None:
            return None
        before, after = old.copy(), new.copy()
        before.set(side, output.argument.copy())
        after.set(side, output.argument.copy())
        return MovingFilter(alias, before, after)
    return None


_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


def _union_move(before: ViewDefinition, after: ViewDefinition) -> ClockMove:
    """clock_move of a UNION ALL view: its branches' (each branch's occurrences have aliases of
    their own in the union: a filter names the branch it is in)."""
    filters: list[MovingFilter] = []
    for number, (old, new) in enumerate(zip(before.branches, after.branches, strict=True), start=1):
        move = clock_move(old, new)
        filters += move.filters
        if move.elsewhere is not None:
            return ClockMove(tuple(filters), elsewhere=f"UNION ALL branch {number} ({move.elsewhere})")
    if repr(replace(before, branches=())) != repr(replace(after, branches=())):
        return ClockMove(tuple(filters), elsewhere="the query")
    return ClockMove(tuple(filters))


def at_times(after: ViewDefinition, filters: Sequence[MovingFilter], before: Collection[str]) -> ViewDefinition:
    """``after``, the definition at this refresh's time, with the moving ``filters`` (clock_move's:
    its WHERE conjuncts and outer joins' ON filters that differ) of the occurrences ``before`` as
    they read at the time the view reflects: every alias of the filters in ``before``, the
    definition at that time."""
    swapped = {f.after.sql(dialect="spark"): f.before for f in filters if f.alias in before}

    def swap(conjunct: exp.Expr) -> exp.Expr:
        return swapped.get(conjunct.sql(dialect="spark"), conjunct)

    def swap_within(condition: exp.Expr | None) -> exp.Expr | None:  # (an outer join's ON: its residual's)
        if condition is None:
            return None
        return condition.copy().transform(lambda node: node if (found := swap(node)) is node else found.copy())

    conjuncts = tuple(swap(c) for c in after.where_conjuncts)
    joins = tuple(
        replace(j, residual=tuple(swap(c) for c in j.residual), condition=swap_within(j.condition)) if j.is_outer else j
        for j in after.joins
    )
    return replace(after, where_conjuncts=conjuncts, joins=joins)


def _partition_move(before: PartitionQuery, after: PartitionQuery) -> ClockMove:
    """clock_move of a PER_PARTITION view: the WHERE conjuncts of its query that differ, each a
    filter of one table's rows (PartitionQuery.row_filters) or the clock read elsewhere."""
    filters: list[MovingFilter] = []
    old_query, new_query = before.query.copy(), after.query.copy()
    owners = {(f.select, f.join, f.conjunct): f.alias for f in after.row_filters}
    old_selects, new_selects = list(old_query.find_all(exp.Select)), list(new_query.find_all(exp.Select))
    if len(old_selects) != len(new_selects):
        return ClockMove(elsewhere="the query")
    for number, (old_select, new_select) in enumerate(zip(old_selects, new_selects)):
        for join, old_condition, new_condition in _conditions(old_select, new_select):
            pairs = list(zip(split_conjuncts(old_condition), split_conjuncts(new_condition)))
            for position, (old, new) in enumerate(pairs):
                alias = owners.get((number, join, position))
                if alias is None or old.sql(dialect="spark") == new.sql(dialect="spark"):
                    continue
                filters.append(MovingFilter(alias, _qualified(old, alias), _qualified(new, alias)))
                for conjunct in (old, new):
                    conjunct.replace(exp.true())
    if old_query.sql(dialect="spark") != new_query.sql(dialect="spark"):
        return ClockMove(tuple(filters), elsewhere="the query")
    return ClockMove(tuple(filters))


def _conditions(old: exp.Select, new: exp.Select) -> list[tuple[int | None, exp.Expr | None, exp.Expr | None]]:
    """The conditions of one SELECT of a query at two times, paired: its WHERE (join None) and
    each JOIN's ON (its position), as RowFilter places them."""
    old_where, new_where = old.args.get("where"), new.args.get("where")
    found: list[tuple[int | None, exp.Expr | None, exp.Expr | None]] = [
        (None, old_where.this if old_where is not None else None, new_where.this if new_where is not None else None)
    ]
    old_joins, new_joins = old.args.get("joins") or [], new.args.get("joins") or []
    if len(old_joins) == len(new_joins):
        found += [(at, o.args.get("on"), n.args.get("on")) for at, (o, n) in enumerate(zip(old_joins, new_joins))]
    return found


def _qualified(conjunct: exp.Expr, alias: str) -> exp.Expr:
    """A filter of the occurrence ``alias``'s rows, every column qualified by it."""
    copy = conjunct.copy()
    for column in copy.find_all(exp.Column):
        column.set("table", exp.to_identifier(alias, quoted=True))
    return copy


_PLACES = (
    ("outputs", "a selected value"),
    ("hidden_columns", "a selected value"),
    ("joins", "a join condition"),
    ("group_by", "GROUP BY"),
    ("having", "HAVING"),
    ("ranking", "a window"),
    ("windowing", "a window"),
    ("branches", "a UNION ALL branch"),
)
"""Where else in a definition the clock may be read, as the user would name the place."""
