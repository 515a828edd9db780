"""Fast refresh of aggregate views (ViewClass.AGGREGATE): GROUP BY or global aggregates with
COUNT(*), COUNT(x), SUM(x), AVG(x), MIN(x), MAX(x) over one master or inner joins of several.

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
3. **Apply** in one MERGE: a group whose row count reaches 0 is deleted; an existing group is
   updated (SUM is NULL when its hidden non-NULL count is 0, AVG = hidden sum / hidden count in
   the stored type); a new group with rows is inserted. A global aggregate (no GROUP BY) always
   keeps its one row.
4. **MIN/MAX.** The new extreme is ``greatest(stored, candidates)`` (``least`` for MIN) unless a
   negative row may have removed the stored extreme: its value reaches the stored one (or the
   group had none). Only those groups are recomputed from the masters as of the marked snapshot,
   and only when some log has before images: insert-only refreshes never recompute. Oracle
   recomputes every group the log mentions; here deleting a non-extreme row recomputes nothing.
   (A positive row that is not really new always comes with an equal negative one, which flags
   the group whenever that positive could have won, so candidates never overstate.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp

from dbt_incremental_mv.analysis import OutputKind, ViewDefinition
from dbt_incremental_mv.analysis.hidden import ROW_COUNT_COLUMN
from dbt_incremental_mv.analysis.model import HiddenPurpose
from dbt_incremental_mv.logs.contract import DELETE, INSERT
from dbt_incremental_mv.refresh.marked import MarkedLog
from dbt_incremental_mv.refresh.statement import RefreshStatement
from dbt_incremental_mv.sql_text import ident, idents, relation, string

SIGN = "_mv_sign"
ACTION = "_mv_action"
RECOMPUTED = "_mv_recomputed"


def blocker(view: ViewDefinition, logged: Mapping[str, Sequence[str]]) -> str | None:
    """Aggregate deltas are read from the logs' images: every column the view reads must be logged."""
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
            if hidden.purpose is not HiddenPurpose.ROW_COUNT:
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


def _signed_images(log: MarkedLog, columns: list[str], invert: bool = False) -> str:
    positive, negative = (DELETE, INSERT) if invert else (INSERT, DELETE)
    sign = f"case {ident('_mv_op')} when {string(positive)} then 1 when {string(negative)} then -1 end"
    return f"select {idents(columns)}, {sign} as {ident(SIGN)} from (\n{log.images(columns)}\n)"


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
    return f"(\n{current}\nunion all\n{_signed_images(log, columns, invert=True)}\n)", True


def _delta_terms(view: ViewDefinition, marked: Mapping[str, MarkedLog], arguments: _Arguments) -> list[str]:
    """One SELECT per changed occurrence: its signed images joined with the others."""
    changed = [o.alias for o in view.occurrences if marked[o.master.name].has_changes]
    columns = {o.alias: sorted(view.referenced_columns[o.alias], key=str.casefold) or list(marked[o.master.name].spec.key) for o in view.occurrences}
    terms = []
    for position, alias in enumerate(view.aliases):
        if alias not in changed:
            continue
        sources: dict[str, str] = {}
        signed: list[str] = []
        for other_position, other in enumerate(view.aliases):
            log = marked[view.occurrence(other).master.name]
            if other == alias:
                sources[other] = f"(\n{_signed_images(log, columns[other])}\n)"
                signed.append(other)
            elif other_position < position:
                sources[other] = log.master_as_of()  # already changed: new state
            else:
                source, has_sign = _old_state(log, columns[other])
                sources[other] = source
                if has_sign:
                    signed.append(other)
        select = view.select_expression(sources, include_hidden=False)
        sign: exp.Expression = exp.column(SIGN, table=signed[0], quoted=True)
        for other in signed[1:]:
            sign = exp.Mul(this=sign, expression=exp.column(SIGN, table=other, quoted=True))
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
        terms.append(ViewDefinition.render_expression(select))
    return terms


def _delta_name(column: str, tag: str) -> str:
    return f"_mv_d{tag}_{column}"


def _delta_query(view: ViewDefinition, terms: list[str], arguments: _Arguments, min_max: list[str]) -> str:
    """Per group: the signed net change of the row count and of every aggregate."""
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
    union = "\nunion all\n".join(terms)
    group = f"\ngroup by {idents(view.group_key_columns)}" if view.group_key_columns else ""
    return f"select {', '.join(parts)}\nfrom (\n{union}\n){group}"


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


def _flag(view: ViewDefinition, column: str) -> str:
    """Whether a negative row may have removed the stored extreme of ``column``."""
    stored = f"`_mv_v`.{ident(column)}"
    removed = f"`_mv_d`.{ident(_delta_name(column, 'n'))}"
    reaches = ">=" if view.output(column).kind is OutputKind.MAX else "<="
    return f"({removed} is not null and ({stored} is null or {removed} {reaches} {stored}))"


def _cast(expression: str, column: str, view_types: Mapping[str, str]) -> str:
    spark_type = next((t for c, t in view_types.items() if c.casefold() == column.casefold()), None)
    return f"cast({expression} as {spark_type})" if spark_type else expression


def _new_values(view: ViewDefinition, view_types: Mapping[str, str], recompute: bool) -> dict[str, str]:
    """Each stored column's value after the refresh, from the delta ``_mv_d``, the stored row
    ``_mv_v`` and, for recomputed groups, the recomputed row ``_mv_r``."""
    d, v = "`_mv_d`", "`_mv_v`"
    # (a global aggregate's delta is one row even when no changed row passes the filters: NULLs)
    count = f"(coalesce({v}.{ident(ROW_COUNT_COLUMN)}, 0) + coalesce({d}.{ident(_delta_name(ROW_COUNT_COLUMN, ''))}, 0))"
    values: dict[str, str] = {name: f"{d}.{ident(name)}" for name in view.group_key_columns}
    values[ROW_COUNT_COLUMN] = count
    for column in _counted_columns(view):
        values[column] = f"(coalesce({v}.{ident(column)}, 0) + coalesce({d}.{ident(_delta_name(column, ''))}, 0))"
    for column in _summed_columns(view):
        counted = _nonnull_count_of(view, column)
        values[column] = (
            f"case when {values[counted]} = 0 then null "
            f"else coalesce({v}.{ident(column)}, 0) + coalesce({d}.{ident(_delta_name(column, ''))}, 0) end"
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
        elif output.kind in (OutputKind.MIN, OutputKind.MAX):
            function = "greatest" if output.kind is OutputKind.MAX else "least"
            values[output.name] = f"{function}({v}.{ident(output.name)}, {d}.{ident(_delta_name(output.name, 'p'))})"
    result = {}
    for column in view.stored_columns:
        value = values[column]
        if recompute and column not in view.group_key_columns:
            value = f"case when `_mv_r`.{ident(RECOMPUTED)} then `_mv_r`.{ident(column)} else {value} end"
        result[column] = _cast(value, column, view_types)
    return result


def _group_match(left: str, right: str, columns: Sequence[str]) -> str:
    if not columns:
        return "true"
    return " and ".join(f"{left}.{ident(c)} <=> {right}.{ident(c)}" for c in columns)


def refresh_statement(
    view: ViewDefinition,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    view_types: Mapping[str, str] | None = None,
) -> RefreshStatement | None:
    """The one MERGE that applies the marked changes, or None when nothing is marked."""
    changed = [o.alias for o in view.occurrences if marked[o.master.name].has_changes]
    if not changed:
        return None
    view_types = view_types or {}
    arguments = _Arguments(view)
    min_max = [o.name for o in view.outputs if o.kind in (OutputKind.MIN, OutputKind.MAX)]
    any_deletes = any(marked[o.master.name].deletes for o in view.occurrences)
    recompute = bool(min_max) and any_deletes
    target = relation(view_relation)
    keys = view.group_key_columns
    delta = _delta_query(view, _delta_terms(view, marked, arguments), arguments, min_max)
    ctes = [f"`_mv_delta` as (\n{delta}\n)"]
    joins = [f"left join {target} as `_mv_v` on {_group_match('`_mv_d`', '`_mv_v`', keys)}"]
    if recompute:
        flags = " or ".join(_flag(view, c) for c in min_max)
        ctes.append(
            f"`_mv_flagged` as (\nselect {', '.join(f'`_mv_d`.{ident(c)}' for c in keys) or '1 as `_mv_one`'} "
            f"from `_mv_delta` as `_mv_d`\n{joins[0]}\nwhere {flags}\n)"
        )
        new_state = view.render_select({o.alias: marked[o.master.name].master_as_of() for o in view.occurrences})
        ctes.append(
            f"`_mv_recompute` as (\nselect `_mv_q`.*, true as {ident(RECOMPUTED)} from (\n{new_state}\n) as `_mv_q`\n"
            f"left semi join `_mv_flagged` as `_mv_f` on {_group_match('`_mv_q`', '`_mv_f`', keys)}\n)"
        )
        joins.append(f"left join `_mv_recompute` as `_mv_r` on {_group_match('`_mv_d`', '`_mv_r`', keys)}")
    values = _new_values(view, view_types, recompute)
    new_count = values[ROW_COUNT_COLUMN]
    existed = f"`_mv_v`.{ident(ROW_COUNT_COLUMN)} is not null"
    if keys:
        action = f"case when {new_count} = 0 then 'D' when {existed} then 'U' else 'I' end"
        keep = f"where {existed} or {new_count} > 0"  # a group born and gone within the refresh: nothing to do
    else:
        action = f"case when {existed} then 'U' else 'I' end"  # the one global row is never deleted
        keep = ""
    recomputed = f"coalesce(`_mv_r`.{ident(RECOMPUTED)}, false)" if recompute else "false"
    source = (
        f"with {', '.join(ctes)}\n"
        f"select {', '.join(f'{value} as {ident(c)}' for c, value in values.items())}, {action} as {ident(ACTION)}, "
        f"{recomputed} as {ident(RECOMPUTED)}\n"
        f"from `_mv_delta` as `_mv_d`\n" + "\n".join(joins) + (f"\n{keep}" if keep else "")
    )
    stored = view.stored_columns
    updated = [c for c in stored if c not in keys]
    sql = (
        f"merge into {target} as `_mv_t`\nusing (\n{source}\n) as `_mv_s`\n"
        f"on {_group_match('`_mv_t`', '`_mv_s`', keys)}\n"
        f"when matched and `_mv_s`.{ident(ACTION)} = 'D' then delete\n"
        f"when matched then update set {', '.join(f'{ident(c)} = `_mv_s`.{ident(c)}' for c in updated)}\n"
        f"when not matched and `_mv_s`.{ident(ACTION)} = 'I' then insert ({idents(stored)}) "
        f"values ({', '.join(f'`_mv_s`.{ident(c)}' for c in stored)})"
    )
    run = tuple(f"DELTA {a}" for a in changed)
    if recompute:
        run += ("MIN/MAX recompute of groups whose extreme was removed",)
    skipped = tuple(f"DELTA {o.alias}" for o in view.occurrences if o.alias not in changed)
    if min_max and not recompute:
        skipped += ("MIN/MAX recompute (insert-only)",)
    stats = (
        f"select count_if({ident(ACTION)} = 'I'), count_if({ident(ACTION)} = 'U'), count_if({ident(ACTION)} = 'D'), "
        f"count_if({ident(RECOMPUTED)}) from (\n{source}\n)"
    )
    labels = ("groups inserted", "groups updated", "groups deleted", "groups recomputed")
    return RefreshStatement(sql, run, skipped, stats, labels)
