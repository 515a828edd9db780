"""The join structure of a view, normalized: a left-deep chain of steps, each with its ON
conjuncts, plus the WHERE conjuncts left over.

Inner-join conditions and WHERE conjuncts are one pool of filters: a filter can be evaluated at
any point after the occurrences it reads are joined, as long as no outer join null-extends those
occurrences afterwards. So every pooled conjunct that reads two or more occurrences becomes a
condition of the step joining the last of them (which is then always an inner step), and the
others stay in WHERE; ``a JOIN b ON a.x = b.y`` and ``a, b WHERE a.x = b.y`` give the same
structure. Outer-join ON conditions never move.

Rules that keep outer joins correct (and maintainable the Oracle way, by outer slices):

* an outer join's ON is a conjunction of equalities between its two sides, plus filters that
  read only its null-supplying side (a CTE filter of a null-supplying occurrence lands there
  too: filtering the null-supplying side in ON is the same as filtering it first);
* WHERE may not read a null-supplying occurrence, and an inner join may not read one an earlier
  outer join null-extends: both would drop the null-extended rows and turn the outer join into
  an inner join, which is not what the user wrote the outer join for.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.model import EquiPair, JoinKind, JoinStep
from dbt_incremental_mv.analysis.render import conjunction
from dbt_incremental_mv.analysis.resolved import RawJoin, ResolvedQuery


@dataclass(frozen=True)
class JoinTree:
    joins: tuple[JoinStep, ...]
    where_conjuncts: tuple[exp.Expr, ...]
    null_supplying: frozenset[str]


def references(expression: exp.Expr) -> frozenset[str]:
    """The occurrence aliases an (already resolved) expression reads."""
    return frozenset(column.table for column in expression.find_all(exp.Column))


def equi_pair(conjunct: exp.Expr, earlier: frozenset[str], alias: str) -> EquiPair | None:
    """``conjunct`` as an equality between earlier occurrences and ``alias`` (either way round)."""
    if not isinstance(conjunct, (exp.EQ, exp.NullSafeEQ)):
        return None
    null_safe = isinstance(conjunct, exp.NullSafeEQ)
    left, right = conjunct.this, conjunct.expression
    left_refs, right_refs = references(left), references(right)
    if left_refs and left_refs <= earlier and right_refs == {alias}:
        return EquiPair(left, right, null_safe)
    if right_refs and right_refs <= earlier and left_refs == {alias}:
        return EquiPair(right, left, null_safe)
    return None


class _Chain:
    """Positions of the occurrences and who each step null-extends."""

    def __init__(self, query: ResolvedQuery) -> None:
        self.aliases = tuple(o.alias for o in query.occurrences)
        self.position = {alias: index for index, alias in enumerate(self.aliases)}
        self.kinds = (None,) + tuple(j.kind for j in query.joins)  # kinds[i]: how occurrence i is joined
        nullable: set[str] = set()
        self.nullable_before: list[frozenset[str]] = [frozenset()]
        for index, join in enumerate(query.joins, start=1):
            self.nullable_before.append(frozenset(nullable))
            if join.kind is JoinKind.LEFT:
                nullable.add(join.alias)
            elif join.kind is JoinKind.RIGHT:
                nullable.update(self.aliases[:index])
        self.nullable = frozenset(nullable)

    def earlier(self, step: int) -> frozenset[str]:
        return frozenset(self.aliases[:step])

    def step_null_extending(self, index: int) -> int:
        """The first step that null-extends occurrence ``index`` (its LEFT JOIN, or the first
        RIGHT JOIN after it)."""
        for step in range(max(index, 1), len(self.aliases)):
            kind = self.kinds[step]
            if (step == index and kind is JoinKind.LEFT) or (step > index and kind is JoinKind.RIGHT):
                return step
        raise AssertionError(f"occurrence {self.aliases[index]} is not null-supplying")


def normalize_joins(query: ResolvedQuery) -> JoinTree:
    chain = _Chain(query)
    at_step: dict[int, list[exp.Expr]] = {step: [] for step in range(1, len(chain.aliases))}
    pool: list[exp.Expr] = []

    for index, occurrence in enumerate(query.occurrences):
        if occurrence.alias in chain.nullable:
            at_step[chain.step_null_extending(index)].extend(occurrence.filters)
        else:
            pool.extend(occurrence.filters)

    outer_conditions: dict[int, list[exp.Expr]] = {}
    for step, join in enumerate(query.joins, start=1):
        if join.kind is JoinKind.INNER:
            for conjunct in join.conjuncts:
                _refuse_null_rejecting_inner_condition(conjunct, chain.nullable_before[step], join)
                # A later RIGHT JOIN null-extends what it reads: it must stay where it was written.
                (at_step[step] if references(conjunct) & chain.nullable else pool).append(conjunct)
        else:
            outer_conditions[step] = list(_validated_outer_condition(join, step, chain))

    for conjunct in query.where:
        _refuse_null_rejecting_where(conjunct, chain)
        pool.append(conjunct)

    where: list[exp.Expr] = []
    for conjunct in _unique(pool):
        read = references(conjunct)
        if len(read) < 2:
            where.append(conjunct)
            continue
        step = max(chain.position[alias] for alias in read)
        assert chain.kinds[step] is JoinKind.INNER, "pooled conditions only ever land on inner steps"
        at_step[step].append(conjunct)

    steps = tuple(
        _step(join, step, outer_conditions.get(step, []) + at_step[step], chain)
        for step, join in enumerate(query.joins, start=1)
    )
    return JoinTree(steps, tuple(where), chain.nullable)


def _step(join: RawJoin, step: int, conjuncts: list[exp.Expr], chain: _Chain) -> JoinStep:
    """The step with its condition in canonical form: equalities first, each written earlier
    side = this occurrence's side, then the other conjuncts in the order they were gathered."""
    earlier = chain.earlier(step)
    pairs: list[EquiPair] = []
    residual: list[exp.Expr] = []
    for conjunct in _unique(conjuncts):
        pair = equi_pair(conjunct, earlier, join.alias)
        if pair is None:
            residual.append(conjunct)
        elif pair not in pairs:
            pairs.append(pair)
    canonical = [p.condition for p in pairs] + residual
    condition = conjunction(canonical) if canonical else None
    return JoinStep(join.alias, join.kind, tuple(pairs), condition, tuple(residual))


def _validated_outer_condition(join: RawJoin, step: int, chain: _Chain) -> list[exp.Expr]:
    """The ON conjuncts of an outer join step: at least one equality between its two sides; the
    others filter the null-supplying side, or read both sides (a range to a validity interval,
    an OR: the view's slices are then recomputed, never applied row by row: see
    ``filters_only_its_side``)."""
    earlier = chain.earlier(step)
    null_side = frozenset({join.alias}) if join.kind is JoinKind.LEFT else earlier
    kind = f"{join.kind.upper()} JOIN {join.alias}"
    has_equality = False
    for conjunct in join.conjuncts:
        if equi_pair(conjunct, earlier, join.alias) is not None:
            has_equality = True
            continue
        read = references(conjunct)
        if join.kind is JoinKind.RIGHT and read & chain.nullable_before[step]:
            raise _outer_condition_error(conjunct, read, null_side, kind)
        if read & null_side:
            continue  # a filter on the null-supplying side, or a condition on both sides
        raise _outer_condition_error(conjunct, read, null_side, kind)
    if not has_equality:
        written = join.written.args.get("on")
        raise UnsupportedViewError(
            f"{kind} ON {describe(written)}" if written is not None else kind,
            "an outer join needs at least one equality between its two sides in ON (beside any other "
            "condition): the rows of one side that a change of the other touches are found by it",
            f"Join on key columns, e.g. ON {sorted(earlier)[0]}.id = {join.alias}.id",
        )
    return list(join.conjuncts)


def filters_only_its_side(step: JoinStep) -> bool:
    """Whether the ON conjuncts of an outer join step besides its equalities read only its
    null-supplying side (a LEFT JOIN's own table, what comes before a RIGHT JOIN): then each row
    matches what its join values name, and a change can be applied row by row. (Always, for an
    inner join.)"""
    if step.kind is JoinKind.LEFT:
        return all(references(r) <= {step.alias} for r in step.residual)
    if step.kind is JoinKind.RIGHT:
        return all(step.alias not in references(r) for r in step.residual)
    return True


def _outer_condition_error(
    conjunct: exp.Expr, read: frozenset[str], null_side: frozenset[str], kind: str
) -> UnsupportedViewError:
    if not read & null_side:
        reason = (
            f"this ON condition of {kind} reads only the preserved side: it does not filter rows, "
            "it only decides which rows find a match"
        )
        hint = "Move it to WHERE if it should filter, or into a CTE over the preserved table"
    else:
        reason = f"only equalities between the two sides of {kind} are supported (non-equi outer join condition)"
        hint = "Join on equal columns, and filter the joined table in a CTE or in the ON clause with its own columns"
    return UnsupportedViewError(describe(conjunct), reason, hint)


def _refuse_null_rejecting_inner_condition(conjunct: exp.Expr, nullable: frozenset[str], join: RawJoin) -> None:
    offending = sorted(references(conjunct) & nullable)
    if offending:
        raise UnsupportedViewError(
            describe(conjunct),
            f"this inner join condition reads {', '.join(offending)}, which an earlier outer join null-extends: "
            "it drops the null-extended rows and silently turns that outer join into an inner join",
            f"Make the join to {join.alias} a LEFT JOIN as well, or make the earlier outer join an inner join",
        )


def _refuse_null_rejecting_where(conjunct: exp.Expr, chain: _Chain) -> None:
    offending = sorted(references(conjunct) & chain.nullable)
    if offending:
        raise UnsupportedViewError(
            describe(conjunct),
            f"the WHERE clause filters {', '.join(offending)}, the null-supplying side of an outer join: "
            "it drops the null-extended rows",
            "Move the condition into the outer join's ON clause or into a CTE/subquery over that table; "
            "use an inner join if unmatched rows should not appear",
        )


def _unique(expressions: list[exp.Expr]) -> list[exp.Expr]:
    unique: list[exp.Expr] = []
    for expression in expressions:
        if expression not in unique:
            unique.append(expression)
    return unique
