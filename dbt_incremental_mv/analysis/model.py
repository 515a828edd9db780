"""What view analysis produces: frozen descriptions of a maintainable view.

Expressions are sqlglot nodes whose columns are all qualified as ``<alias>.<column>`` (``alias``
an occurrence alias, ``column`` the master column as the caller spelled it). They belong to the
definition: treat them as read-only and ``.copy()`` one before changing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import Enum, StrEnum

from sqlglot import exp

from dbt_incremental_mv.analysis.parse import DIALECT


def _shown(value: object) -> str:
    """A field value for repr: expressions as their SQL (sqlglot's own repr is a whole tree)."""
    if isinstance(value, exp.Expression):
        return repr(value.sql(dialect=DIALECT))
    if isinstance(value, tuple):
        inner = ", ".join(_shown(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k!r}: {_shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, frozenset):
        return "{" + ", ".join(repr(v) for v in sorted(value, key=str)) + "}" if value else "frozenset()"
    return repr(value)


class _ReadableRepr:
    """``Name(field=value, ...)`` with expressions shown as SQL text."""

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={_shown(getattr(self, f.name))}" for f in fields(self))  # type: ignore[arg-type]  # on dataclasses only
        return f"{type(self).__name__}({shown})"


@dataclass(frozen=True)
class MasterTable:
    """A table the view may read, as the caller knows it from the catalog.

    ``name`` is the normalized ``schema.table`` (lowercase); ``columns`` are (name, Spark type)
    in table order, which is the order ``select *`` expands to; ``key`` is the declared unique
    key (empty when unknown: such a table cannot feed a fast-refreshed view).
    """

    name: str
    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...] = ()

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    def find_column(self, name: str) -> str | None:
        """The column as the table spells it, matched case-insensitively as Spark does."""
        wanted = name.casefold()
        for column, _ in self.columns:
            if column.casefold() == wanted:
                return column
        return None


@dataclass(frozen=True)
class MasterOccurrence:
    """One reference to a master table in the view's FROM clause, under a unique alias."""

    alias: str
    master: MasterTable


class JoinKind(StrEnum):
    INNER = "inner"
    LEFT = "left"
    RIGHT = "right"


@dataclass(frozen=True, repr=False)
class EquiPair(_ReadableRepr):
    """An equality linking a join step's occurrence to the occurrences joined before it.

    ``left`` reads only earlier occurrences, ``right`` only the step's own occurrence, whatever
    order the user wrote them in. ``null_safe`` is True for ``<=>`` (IS NOT DISTINCT FROM).
    """

    left: exp.Expr
    right: exp.Expr
    null_safe: bool = False

    @property
    def condition(self) -> exp.Expr:
        operator = exp.NullSafeEQ if self.null_safe else exp.EQ
        return operator(this=self.left.copy(), expression=self.right.copy())


@dataclass(frozen=True, repr=False)
class JoinStep(_ReadableRepr):
    """``<previous steps> <kind> JOIN <alias> ON <condition>`` in a left-deep join.

    ``condition`` is the AND of every conjunct evaluated at this step (None: a cross join);
    ``equi_pairs`` are the equalities among them that link ``alias`` to earlier occurrences and
    ``residual`` the other conjuncts. For an outer join the residual conjuncts read its
    null-supplying side (the step's occurrence for LEFT, everything before it for RIGHT): filters
    of it, or conditions on both sides (``a.day between b.valid_from and b.valid_to``); for an
    inner join they are whatever else must hold at this point of the join.
    """

    alias: str
    kind: JoinKind
    equi_pairs: tuple[EquiPair, ...]
    condition: exp.Expr | None
    residual: tuple[exp.Expr, ...] = ()

    @property
    def is_outer(self) -> bool:
        return self.kind is not JoinKind.INNER


class ViewClass(Enum):
    """How a view is maintained: by occurrence keys (JOIN, OUTER_JOIN), by groups (AGGREGATE),
    branch by branch (UNION_ALL: each branch one of the others, its rows marked by ``_mv_branch``),
    or by window partitions (RANKED: the top rows of each partition, ``Ranking``; WINDOWED: rows
    with window functions over a common partition, ``Windowing``; PER_PARTITION: any stack of
    queries over one master whose windows, groupings and DISTINCTs share a partition,
    ``PartitionQuery``)."""

    JOIN = "join"
    OUTER_JOIN = "outer_join"
    AGGREGATE = "aggregate"
    UNION_ALL = "union_all"
    RANKED = "ranked"
    WINDOWED = "windowed"
    PER_PARTITION = "per_partition"


class RankFunction(StrEnum):
    """The ranking window functions a RANKED view filters on."""

    ROW_NUMBER = "row_number"
    RANK = "rank"
    DENSE_RANK = "dense_rank"


@dataclass(frozen=True, repr=False)
class Ranking(_ReadableRepr):
    """The rows of a RANKED view: those the defining query's rows rank within ``keep`` of their
    window partition (``function() OVER (PARTITION BY partition_by ORDER BY order_by) <= keep``:
    ``= 1`` is the latest row per key), then meeting ``post_conjuncts`` (the outer query's
    filters, applied to the ranked rows). ``tie_break``: the master key columns appended to a
    ROW_NUMBER's ORDER BY so that tied rows are ranked the same way by every build and refresh
    (empty when the order is total or the function ranks ties alike). ``partition_columns``:
    the stored columns holding each partition expression (a refresh deletes partitions by them);
    ``order_columns``: those holding each ORDER BY expression (new rows are ranked among the
    view's own rows by them)."""

    function: RankFunction
    partition_by: tuple[exp.Expr, ...]
    order_by: tuple[exp.Ordered, ...]
    keep: int
    tie_break: tuple[exp.Expr, ...] = ()
    post_conjuncts: tuple[exp.Expr, ...] = ()
    partition_columns: tuple[str, ...] = ()
    order_columns: tuple[str, ...] = ()

    @property
    def window(self) -> exp.Window:
        """The ranking window, tie-break included (a fresh tree)."""
        order = [o.copy() for o in self.order_by] + [
            exp.Ordered(this=t.copy(), nulls_first=True) for t in self.tie_break
        ]
        return exp.Window(
            this=exp.Anonymous(this=self.function.value, expressions=[]),
            partition_by=[p.copy() for p in self.partition_by],
            order=exp.Order(expressions=order),
            over="OVER",
        )


class OutputKind(StrEnum):
    PLAIN = "plain"
    COUNT_STAR = "count_star"
    COUNT = "count"
    SUM = "sum"
    AVG = "avg"
    MIN = "min"
    MAX = "max"
    RECOMPUTED = "recomputed"
    """An aggregate no delta maintains (``COUNT(DISTINCT x)``, ``PERCENTILE(x, 0.9)``,
    ``STDDEV(x)``, ...: functions.RECOMPUTED_AGGREGATES): each group a change touches is recomputed
    from the masters' rows of it."""
    DERIVED = "derived"
    """An expression over the group's aggregates and keys (``ROUND(SUM(x), 2)``,
    ``SUM(a) / COUNT(*)``): each aggregate it reads is maintained as an output of its own (hidden
    when not selected), and the column is recomputed from the stored values (``stored``)."""


@dataclass(frozen=True, repr=False)
class Windowing(_ReadableRepr):
    """The rows of a WINDOWED view: one row per row of one master (filtered by the query's
    ``where_conjuncts`` before the windows), its outputs reading window functions that all
    partition by ``partition_by`` (among their own PARTITION BY expressions), then meeting
    ``post_conjuncts`` (the filters of the queries over the windowed one, which may read the
    windows). A row's windows depend only on the rows of its partition, so a refresh recomputes
    the partitions its changes touch. ``partition_columns``: the stored columns holding each
    partition expression (a refresh deletes partitions by them). ``tie_break``: the master key
    columns appended to the ORDER BY of the windows whose values depend on the order of tied rows
    (empty when none needed them), so that every build and refresh computes the same values."""

    partition_by: tuple[exp.Expr, ...]
    post_conjuncts: tuple[exp.Expr, ...] = ()
    partition_columns: tuple[str, ...] = ()
    tie_break: tuple[exp.Expr, ...] = ()


@dataclass(frozen=True)
class Lookup:
    """A table of a PER_PARTITION view that has no partition column: joined (or matched by a semi
    join: ``IN``, ``EXISTS``) by its ``column`` equal to ``through_value``, an expression over the
    columns of the occurrence ``through`` (``through.column`` mostly), which has one or is a lookup
    itself (a chain of dimensions). Its rows are read whole; a change to one recomputes the
    partitions of ``through``'s rows it matches (a dimension's row changes the rows of the facts
    that reference it)."""

    column: str
    through: str
    through_value: exp.Expr
    # matched by ``NOT IN``: a change also recomputes the partitions of the rows whose value is NULL
    # (TRUE only when the subquery has no row), and all of them when a changed row's column is NULL
    null_sensitive: bool = False


@dataclass(frozen=True)
class RowFilter:
    """A conjunct of a PER_PARTITION view's query that reads the columns of one table's rows alone
    (that table read directly): the ``conjunct``-th of the WHERE (``join`` None; the table not
    null-extended there) or of the ON of the ``join``-th JOIN (an inner or LEFT join of that table)
    of the ``select``-th SELECT of the query (in ``find_all`` order), filtering the occurrence
    ``alias``. Where the clock is read in such filters alone, the rows that cross its time boundary
    are changes of that table (analysis/clock.py)."""

    select: int
    conjunct: int
    alias: str
    join: int | None = None


@dataclass(frozen=True, repr=False)
class PartitionQuery(_ReadableRepr):
    """The rows of a PER_PARTITION view (analysis/partitionwise.py): ``query``, the defining query
    as written (each CTE reference a derived table of its own, a LEFT JOIN whose null-extended rows
    it discards written as the inner join it is), every master it reads standing as
    the table ``_mv_master`` under its occurrence's alias, the ties of its order-dependent windows
    broken (``tie_broken``), selecting the hidden partition columns last. Every window, GROUP BY,
    DISTINCT and set operation in it partitions by the same attributes, each a column of every
    occurrence (``partitions``: by alias, ``alias.column`` per attribute; ``partition_by``: the
    first such occurrence's) but the ``lookups``, so a view row depends only on the masters' rows of
    its partition and the lookups' rows they join;
    ``partition_columns``: the stored columns holding each attribute (a refresh deletes and
    recomputes partitions by them)."""

    query: exp.Select
    partition_by: tuple[exp.Expr, ...]
    partition_columns: tuple[str, ...]
    tie_broken: bool = False
    partitions: Mapping[str, tuple[exp.Expr, ...]] = field(default_factory=dict, hash=False)
    lookups: Mapping[str, Lookup] = field(default_factory=dict, hash=False)  # by alias: tables without one
    row_filters: tuple[RowFilter, ...] = ()


@dataclass(frozen=True, repr=False)
class OutputColumn(_ReadableRepr):
    """A visible column of the view: ``expression AS name``.

    For an aggregate, ``expression`` is the whole call (``SUM(o.amount)``) and ``argument`` what
    it aggregates (``o.amount``; None for COUNT(*)). A DERIVED column's ``stored`` is its
    expression over the stored column names (``round(`_mv_a1_revenue`, 2)``). A ``hidden`` output
    is an aggregate that only DERIVED columns read: stored (named ``_mv_...``), not selected.
    """

    name: str
    expression: exp.Expr
    kind: OutputKind = OutputKind.PLAIN
    argument: exp.Expr | None = None
    stored: exp.Expr | None = None
    hidden: bool = False

    @property
    def is_aggregate(self) -> bool:
        return self.kind is not OutputKind.PLAIN


class HiddenPurpose(StrEnum):
    ROW_KEY = "row_key"
    """A key column of one occurrence: identifies the master row a view row came from."""
    ROW_COUNT = "row_count"
    """COUNT(*) of a group: the group disappears when it reaches zero."""
    NONNULL_COUNT = "nonnull_count"
    """COUNT(x) for SUM(x)/AVG(x): tells an all-NULL group (NULL result) from a zero sum."""
    SUM = "sum"
    """SUM(x) for AVG(x): the average is recomputed exactly as sum / count."""
    BRANCH = "branch"
    """The UNION ALL branch a row comes from (1, 2, ...): part of every branch's row identity."""
    VALUE = "value"
    """A column of a UNION ALL's aggregate branch as the branch computes it, in the branch's own
    Spark type (``_mv_b{n}_{column}``): the union widens the visible column (a decimal AVG to
    double, say), so the branch is maintained on its own columns and its visible ones are their
    cast to the union's types (analysis/union.py)."""
    PARTITION = "partition"
    """A RANKED or WINDOWED view's window partition expression, when no visible column holds it: a refresh
    deletes and recomputes the partitions its changes touch."""
    RANK_ORDER = "rank_order"
    """A RANKED view's window ORDER BY expression, when no visible column holds it: new rows are
    ranked among the view's rows of their partition by it."""
    RESERVE = "reserve"
    """For MIN(x)/MAX(x): the group's RESERVE most extreme distinct values of x with their counts,
    ``array<struct<v, n>>`` from the extreme (``expression`` is x): a delete of the extreme is
    answered from it; the group is recomputed only when it runs out."""


@dataclass(frozen=True, repr=False)
class HiddenColumn(_ReadableRepr):
    """A column the plugin adds to the stored table so the view can be maintained.

    ``occurrence`` and ``source_column`` say which key column a ROW_KEY column copies;
    ``outputs`` lists the aggregate outputs an aggregate helper column serves.
    """

    name: str
    expression: exp.Expr
    purpose: HiddenPurpose
    occurrence: str | None = None
    source_column: str | None = None
    outputs: tuple[str, ...] = ()


@dataclass(frozen=True, repr=False)
class ViewDefinition(_ReadableRepr):
    """A view that can be fast refreshed, normalized.

    The defining query is ``occurrences[0]`` then ``joins`` (a left-deep chain, one step per
    further occurrence), filtered by ``where_conjuncts``, grouped by ``group_by`` when
    ``is_aggregate``, selecting ``outputs`` then ``hidden_columns``. ``null_supplying`` holds the
    aliases an outer join can null-extend; ``group_key_columns`` the output names holding the
    GROUP BY expressions (in GROUP BY order), by which groups are matched null-safely;
    ``referenced_columns`` the master columns each occurrence reads (schema-change checks).
    """

    occurrences: tuple[MasterOccurrence, ...]
    joins: tuple[JoinStep, ...]
    where_conjuncts: tuple[exp.Expr, ...]
    outputs: tuple[OutputColumn, ...]
    group_by: tuple[exp.Expr, ...]
    is_aggregate: bool
    view_class: ViewClass
    hidden_columns: tuple[HiddenColumn, ...]
    null_supplying: frozenset[str]
    group_key_columns: tuple[str, ...]
    referenced_columns: Mapping[str, frozenset[str]] = field(hash=False)
    # HAVING over the stored column names (analysis/having.py), or None
    having: exp.Expr | None = None
    # UNION_ALL: the branches, each a view of another class selecting the same visible columns
    # plus ``_mv_branch`` (analysis/union.py); the union's occurrences are theirs (aliases unique
    # across branches) and its hidden columns ``_mv_branch`` then theirs (shared by name)
    branches: tuple[ViewDefinition, ...] = ()
    # RANKED: the window filter (analysis/ranking.py); its outputs are over the ranked rows
    ranking: Ranking | None = None
    # WINDOWED: the common partition of its windows and the filters after them (analysis/windowing.py)
    windowing: Windowing | None = None
    # PER_PARTITION: the query as written, recomputed by partition (analysis/partitionwise.py)
    partition_query: PartitionQuery | None = None

    @property
    def stored_columns(self) -> tuple[str, ...]:
        """Every column of the stored table, in stored order: outputs (the visible ones, then the
        aggregates only DERIVED columns read), then hidden columns."""
        return tuple(o.name for o in self.outputs) + tuple(h.name for h in self.hidden_columns)

    @property
    def visible_outputs(self) -> tuple[OutputColumn, ...]:
        """The columns the defining query selects, in its order."""
        return tuple(o for o in self.outputs if not o.hidden)

    @property
    def aliases(self) -> tuple[str, ...]:
        return tuple(o.alias for o in self.occurrences)

    def occurrence(self, alias: str) -> MasterOccurrence:
        for occurrence in self.occurrences:
            if occurrence.alias == alias:
                return occurrence
        raise KeyError(alias)

    def output(self, name: str) -> OutputColumn:
        for output in self.outputs:
            if output.name == name:
                return output
        raise KeyError(name)

    def key_columns(self, alias: str) -> tuple[HiddenColumn, ...]:
        """The hidden columns that store ``alias``'s key (empty for aggregate views)."""
        return tuple(h for h in self.hidden_columns if h.purpose is HiddenPurpose.ROW_KEY and h.occurrence == alias)

    def key_columns_by_source(self, alias: str) -> dict[str, str]:
        """The names of ``alias``'s hidden key columns by the key column each copies (lower case)."""
        found = {}
        for hidden in self.key_columns(alias):
            assert hidden.source_column is not None  # a ROW_KEY column names the key column it copies
            found[hidden.source_column.lower()] = hidden.name
        return found

    @property
    def reserves(self) -> tuple[HiddenColumn, ...]:
        """The hidden MIN/MAX reserves (HiddenPurpose.RESERVE), in stored order."""
        return tuple(h for h in self.hidden_columns if h.purpose is HiddenPurpose.RESERVE)

    def support_columns(self, output_name: str) -> tuple[HiddenColumn, ...]:
        """The hidden aggregate columns that ``output_name`` (a SUM or AVG output) relies on."""
        return tuple(h for h in self.hidden_columns if output_name in h.outputs)
