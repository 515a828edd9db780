"""Which rows of a master can take part in a view at all: its filters of that master's rows alone.

A change of a master row that fails them before and after changes nothing in the view: a
``where c.segment = 'BUILDING'`` view is not touched when a customer of another segment changes,
and a ``c join o`` view then need not look for that customer's orders. The refresh's mark step
drops the images that fail them (refresh/phases/mark.py, logs/sql.py ``KeyProbe.relevant``)
before it nets and counts them, as DBSP applies a filter to a delta before it joins it
(``Δσ(R) = σ(ΔR)``); every read of the marked images applies the same predicate.

A master's predicate is the OR, over its occurrences, of the AND of each occurrence's filters;
an occurrence without one makes it TRUE (None: nothing dropped). An occurrence's filters:

- not null-extended: the WHERE conjuncts (inner join conditions are WHERE conjuncts once
  normalized) that read its columns alone;
- null-extended by a LEFT JOIN: the conjuncts of that join's ON that read its columns alone
  (a row failing them matches nothing, as if absent). Its WHERE conjuncts are not filters of its
  rows (a null-extended row may pass them where the row itself fails).

Only conjuncts that no value can make fail: a filter is evaluated on every image, also on a row's
passing state (inserted and updated again before the refresh) that the defining query never sees,
so under ANSI a cast, an arithmetic overflow or a string compared as a number could fail a refresh
the query would not. Hence comparisons (``=``, ``<>``, ``<``, ``IN``, ``BETWEEN``, ``LIKE``, ``IS
NULL``, a boolean column), ``NOT``, ``AND``, ``OR`` of the occurrence's columns and literals (a
literal cast to a type among them) whose operands are of one kind (strings, numbers, booleans,
dates and times), in JOIN, OUTER_JOIN, AGGREGATE, RANKED and WINDOWED views and UNION ALL views of those (a
ranked or windowed view's WHERE filters the rows before its window: a row failing it is in no
partition; its filters of the ranked rows are not among them). A PER_PARTITION view (a stack of
queries) reads each table item as an occurrence of its own: its filters are the conjuncts of the
SELECT that reads it that read its rows alone (PartitionQuery.row_filters: WHERE, the item not
null-extended there, or the ON of its inner or LEFT join); a row failing one is in none of that
SELECT's rows, before its groups, windows and DISTINCT. A column is read as the log holds it: a
type the master's was widened from (an int now a bigint, a narrower decimal) holds the same value,
so a filter gives the same answer on it."""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

from dbt_incremental_mv.analysis.model import JoinKind, MasterOccurrence, PartitionQuery, ViewClass, ViewDefinition
from dbt_incremental_mv.analysis.render import render_expression
from dbt_incremental_mv.analysis.resolved import split_conjuncts

FILTERED_CLASSES = frozenset(
    {ViewClass.JOIN, ViewClass.OUTER_JOIN, ViewClass.AGGREGATE, ViewClass.RANKED, ViewClass.WINDOWED}
)


def relevant_rows(view: ViewDefinition, master: str) -> str | None:
    """Spark SQL over ``master``'s columns (unqualified, as a change log holds them) that its rows
    meet when they can take part in ``view``; None when any row can."""
    found: list[exp.Expr] = []
    for occurrence, filters in occurrence_filters(view):
        if occurrence.master.name != master:
            continue
        if filters is None or not filters:
            return None
        found.append(exp.and_(*(_unqualified(f) for f in filters)) if len(filters) > 1 else _unqualified(filters[0]))
    if not found:
        return None
    predicate = found[0] if len(found) == 1 else exp.or_(*(exp.paren(f, copy=False) for f in found))
    return render_expression(predicate)


def occurrence_filters(view: ViewDefinition) -> Iterator[tuple[MasterOccurrence, list[exp.Expr] | None]]:
    """Each occurrence of the view (its branches' for UNION ALL) with its filters (None: the view's
    class drops none)."""
    if view.view_class is ViewClass.UNION_ALL:
        for branch in view.branches:
            yield from occurrence_filters(branch)
        return
    if view.partition_query is not None:
        conjuncts = _row_filters(view.partition_query)
        for occurrence in view.occurrences:
            yield occurrence, [c for c in conjuncts.get(occurrence.alias, []) if _safe(c, _types(occurrence))]
        return
    if view.view_class not in FILTERED_CLASSES:
        for occurrence in view.occurrences:
            yield occurrence, None
        return
    for occurrence in view.occurrences:
        alias = occurrence.alias
        if alias in view.null_supplying:
            own = [
                conjunct
                for step in view.joins
                if step.alias == alias and step.kind is JoinKind.LEFT
                for conjunct in step.residual
            ]
        else:
            own = list(view.where_conjuncts)
        yield occurrence, [c for c in own if _filters(c, occurrence)]


def _row_filters(query: PartitionQuery) -> dict[str, list[exp.Expr]]:
    """The conjuncts ``query.row_filters`` place (the SELECT in ``find_all`` order, its WHERE or
    the ON of one of its joins, the conjunct's position), by the occurrence each filters."""
    selects = list(query.query.find_all(exp.Select))
    found: dict[str, list[exp.Expr]] = {}
    for row_filter in query.row_filters:
        select = selects[row_filter.select]
        if row_filter.join is None:
            where = select.args.get("where")
            condition = where.this if where is not None else None
        else:
            condition = (select.args.get("joins") or [])[row_filter.join].args.get("on")
        found.setdefault(row_filter.alias, []).append(split_conjuncts(condition)[row_filter.conjunct])
    return found


def _filters(conjunct: exp.Expr, occurrence: MasterOccurrence) -> bool:
    """Whether ``conjunct`` is a filter of ``occurrence``'s rows alone that a change log's image
    can be tested by: it reads that occurrence's columns only (``_safe``)."""
    columns = list(conjunct.find_all(exp.Column))
    return bool(columns) and all(c.table == occurrence.alias for c in columns) and _safe(conjunct, _types(occurrence))


COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ)
STRING, NUMBER, BOOLEAN, TIME, NULL = "string", "number", "boolean", "time", "null"
NUMBER_TYPES = ("tinyint", "smallint", "int", "integer", "bigint", "long", "short", "byte", "float", "double", "real")


def _types(occurrence: MasterOccurrence) -> dict[str, str]:
    """The master's column types, by case-folded name."""
    return {name.casefold(): spark_type for name, spark_type in occurrence.master.columns}


def _safe(conjunct: exp.Expr, types: dict[str, str]) -> bool:
    """Whether ``conjunct`` gives an answer, the same every time, on any row of the master's column
    ``types``: boolean connectives of comparisons between its columns and literals of one kind (see
    the module's doc), no function, cast of a column, arithmetic, subquery or clock."""
    node = conjunct.unnest()
    if isinstance(node, (exp.And, exp.Or)):
        return _safe(node.this, types) and _safe(node.expression, types)
    if isinstance(node, exp.Not):
        return _safe(node.this, types)
    if isinstance(node, exp.Column):  # a boolean column
        return _kind(node, types) == BOOLEAN
    if isinstance(node, exp.Is):  # IS [NOT] NULL
        return isinstance(node.expression, exp.Null) and isinstance(node.this.unnest(), exp.Column)
    if isinstance(node, COMPARISONS):
        operands = [node.this, node.expression]
    elif isinstance(node, exp.In) and not node.args.get("query") and not node.args.get("unnest"):
        operands = [node.this, *node.expressions]
    elif isinstance(node, exp.Between):
        operands = [node.this, node.args.get("low"), node.args.get("high")]
    elif isinstance(node, (exp.Like, exp.ILike)) and not node.args.get("escape"):
        operands = [node.this, node.expression]
    else:
        return False
    kinds = [_kind(o, types) for o in operands]
    if any(k is None for k in kinds) or not any(isinstance(o.unnest(), exp.Column) for o in operands if o is not None):
        return False
    known = {k for k in kinds if k != NULL}
    if isinstance(node, (exp.Like, exp.ILike)):
        return known == {STRING}
    return len(known) <= 1


def _kind(operand: exp.Expr | None, types: dict[str, str]) -> str | None:
    """What kind of value ``operand`` is (a column of the master, a literal, a literal cast to a
    type), or None when it is anything else."""
    if operand is None:
        return None
    node = operand.unnest()
    if isinstance(node, exp.Column):
        return _type_kind(types.get(node.name.casefold()))
    if isinstance(node, exp.Null):
        return NULL
    if isinstance(node, exp.Boolean):
        return BOOLEAN
    if isinstance(node, exp.Literal):
        return STRING if node.is_string else NUMBER
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and node.this.is_number:
        return NUMBER
    if isinstance(node, exp.Cast) and isinstance(node.this.unnest(), exp.Literal):
        return _type_kind(node.to.sql(dialect="spark").lower())
    return None


def _type_kind(spark_type: str | None) -> str | None:
    """The kind of values a Spark type holds, or None (unknown, nested, binary...)."""
    if spark_type is None:
        return None
    name = spark_type.strip().lower()
    if name in ("string", "text") or name.startswith(("varchar", "char")):
        return STRING
    if name in NUMBER_TYPES or name.startswith(("decimal", "numeric")):
        return NUMBER
    if name == "boolean":
        return BOOLEAN
    if name == "date" or name.startswith("timestamp"):
        return TIME
    return None


def _unqualified(conjunct: exp.Expr) -> exp.Expr:
    """``conjunct`` over the master's columns by name alone (as its change log names them)."""
    return conjunct.copy().transform(
        lambda node: exp.column(node.name, quoted=True) if isinstance(node, exp.Column) else node
    )
