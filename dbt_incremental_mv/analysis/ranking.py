"""Views that keep the top rows of each window partition: "latest row per key" deduplication,
written as a ranking window filtered by the query over it::

    select ... from (
      select ..., row_number() over (partition by customer_id order by updated_at desc) as rn
      from orders where ...
    ) where rn = 1 [and <filters on the ranked rows>]

(the ranked rows a CTE or a derived table; ``RANK``/``DENSE_RANK`` too; ``rn <= 3``, ``rn < 3``
keep the top rows; ``QUALIFY <window> = 1`` is the same query). The window is taken out of the
query (``split_ranking``): what is left is a query over one master that the rest of the analysis
resolves as any other, with the window's parts carried through it as extra columns (reserved
names), so that they come out resolved to ``alias.column`` like the outputs
(``resolved_ranking``). A refresh recomputes the partitions its changes touch
(refresh/views/ranked_view.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.hidden import holders
from dbt_incremental_mv.analysis.model import (
    HiddenColumn,
    HiddenPurpose,
    MasterOccurrence,
    OutputColumn,
    RankFunction,
    Ranking,
)
from dbt_incremental_mv.analysis.resolved import ResolvedQuery, column_node, split_conjuncts, unparenthesized

FUNCTIONS: dict[type[exp.Expr], RankFunction] = {
    exp.RowNumber: RankFunction.ROW_NUMBER,
    exp.Rank: RankFunction.RANK,
    exp.DenseRank: RankFunction.DENSE_RANK,
}
# the reserved names the window's parts travel under through name resolution
RANK_MARKER = "_mv_rank_marker"  # stands for the window where the query selects it
PARTITION = "_mv_part_"
ORDER = "_mv_order_"
POST = "_mv_post_"
QUALIFIED = "_mv_qualify_rank"  # the window a QUALIFY filters on, selected
RANKED = "ranked"  # the alias of the ranked rows where the query gives them none (QUALIFY, an unnamed subquery)
HINT = "Keep the top rows of each partition as `select ... from (select ..., row_number() over (partition by <key> order by <columns>) as rn from <table>) where rn = 1`, or build the view in a model of its own"


@dataclass(frozen=True)
class RankingShape:
    """What split_ranking took out of the query: the window's function and its ORDER BY's
    directions (its expressions travel as ``_mv_order_<i>``), how many partition expressions and
    filters on the ranked rows travel, and the rows kept per partition."""

    function: RankFunction
    directions: tuple[tuple[bool | None, bool | None], ...]  # per ORDER BY item: (DESC, NULLS FIRST), None: unsaid
    partitions: int
    posts: int
    keep: int
    written: str  # the window as the user wrote it (for messages)


def _marker() -> exp.Expr:
    return exp.Cast(this=exp.Literal.string(RANK_MARKER), to=exp.DataType.build("int"))


def _is_marker(node: exp.Expr) -> bool:
    return isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.this == RANK_MARKER


def _from_qualify(statement: exp.Select) -> exp.Select:
    """``SELECT ... QUALIFY <condition>`` as the ranked rows filtered by the query over them."""
    condition = statement.args["qualify"].this
    inner = statement.copy()
    inner.set("qualify", None)
    windows = list(condition.find_all(exp.Window))
    outer_condition = condition.copy()
    if len(windows) == 1:  # the window written in the QUALIFY: selected under a reserved name
        inner.append("expressions", exp.Alias(this=windows[0].copy(), alias=exp.to_identifier(QUALIFIED)))
        outer_condition = outer_condition.transform(lambda n: exp.column(QUALIFIED) if isinstance(n, exp.Window) else n)
    outer = exp.select("*").from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(RANKED))))
    outer.set("where", exp.Where(this=outer_condition))
    return outer


def _bound(conjunct: exp.Expr, rank: str) -> int | None:
    """How many ranks ``rank <= n`` (``rank = 1``, ``rank < n``, ``n >= rank`` ...) keeps; None
    when ``conjunct`` is no such bound."""
    node = unparenthesized(conjunct)
    flipped: dict[type[exp.Expr], type[exp.Expr]] = {
        exp.GTE: exp.LTE,
        exp.GT: exp.LT,
        exp.EQ: exp.EQ,
        exp.LTE: exp.GTE,
        exp.LT: exp.GT,
    }
    if type(node) not in flipped:
        return None
    left, right, kind = node.this, node.expression, type(node)
    if isinstance(left, exp.Literal):
        left, right, kind = right, left, flipped[kind]
    if not (isinstance(left, exp.Column) and left.name.casefold() == rank.casefold()):
        return None
    if not (isinstance(right, exp.Literal) and not right.is_string and right.this.isdigit()):
        return None
    value = int(right.this)
    if kind is exp.EQ and value == 1:
        return 1
    if kind is exp.LTE and value >= 1:
        return value
    if kind is exp.LT and value >= 2:
        return value - 1
    return None


def _ranked_source(outer: exp.Select) -> exp.Select | None:
    """The SELECT the outer query reads alone: its derived table, or the CTE it names."""
    source = outer.args.get("from_")
    if source is None or outer.args.get("joins"):
        return None
    item = source.this
    if isinstance(item, exp.Subquery) and isinstance(item.this, exp.Select):
        return item.this
    if isinstance(item, exp.Table) and not item.db:
        for cte in (outer.args.get("with_") or exp.With()).expressions:
            if cte.alias_or_name.casefold() == item.name.casefold() and isinstance(cte.this, exp.Select):
                return cte.this
    return None


def split_ranking(statement: exp.Query) -> tuple[exp.Query, RankingShape | None]:
    """The query without its ranking window, and what was taken out (None: the query has no
    ranking filter of this shape; its windows, if any, are refused as before)."""
    if isinstance(statement, exp.Select) and statement.args.get("qualify") is not None:
        rewritten, shape = _split(_from_qualify(statement))
        return (rewritten, shape) if shape is not None else (statement, None)
    return _split(statement)


def _split(statement: exp.Query) -> tuple[exp.Query, RankingShape | None]:
    windows = list(statement.find_all(exp.Window))
    if len(windows) != 1 or not isinstance(statement, exp.Select):
        return statement, None
    window = windows[0]
    function = FUNCTIONS.get(type(window.this))
    alias = window.parent
    inner = _ranked_source(statement)
    if (
        function is None
        or not isinstance(alias, exp.Alias)
        or inner is None
        or alias.parent is not inner
        or window.args.get("spec") is not None
    ):
        return statement, None
    written = describe(window)
    rank = alias.alias
    conjuncts = split_conjuncts(statement.args["where"].this) if statement.args.get("where") else []
    bounds = [(c, _bound(c, rank)) for c in conjuncts]
    kept = [(c, b) for c, b in bounds if b is not None]
    others = [c for c, b in bounds if b is None]
    reads_rank = [c for c in others if any(col.name.casefold() == rank.casefold() for col in c.find_all(exp.Column))]
    if len(kept) != 1 or reads_rank or not window.args.get("partition_by"):
        # no top rows kept by one bound (the rank a column, or filtered otherwise): the rows
        # carry a window (analysis/windowing.py), or an unpartitioned one is refused as such
        return statement, None
    if not window.args.get("order"):
        raise UnsupportedViewError(written, "a ranking window needs ORDER BY to be refreshed by partition", HINT)
    rewritten = statement.copy()
    source = rewritten.args["from_"].this
    if isinstance(source, exp.Subquery) and not source.alias:  # Spark reads one unnamed: name it
        source.set("alias", exp.TableAlias(this=exp.to_identifier(RANKED)))
    inner = _ranked_source(rewritten)
    assert inner is not None  # the copy has the same shape
    copied = next(w for w in rewritten.find_all(exp.Window))
    parts = [p.copy() for p in copied.args["partition_by"]]
    orders = [o.copy() for o in copied.args["order"].expressions]
    copied.replace(_marker())
    for index, part in enumerate(parts, start=1):
        inner.append("expressions", exp.Alias(this=part, alias=exp.to_identifier(f"{PARTITION}{index}")))
    for index, ordered in enumerate(orders, start=1):
        inner.append("expressions", exp.Alias(this=ordered.this.copy(), alias=exp.to_identifier(f"{ORDER}{index}")))
    carried = [f"{PARTITION}{i}" for i in range(1, len(parts) + 1)] + [f"{ORDER}{i}" for i in range(1, len(orders) + 1)]
    for name in carried:
        rewritten.append("expressions", exp.column(name))
    for index, conjunct in enumerate(others, start=1):
        rewritten.append(
            "expressions", exp.Alias(this=exp.Paren(this=conjunct.copy()), alias=exp.to_identifier(f"{POST}{index}"))
        )
    rewritten.set("where", None)
    directions = tuple((o.args.get("desc"), o.args.get("nulls_first")) for o in orders)
    return rewritten, RankingShape(function, directions, len(parts), len(others), kept[0][1] or 1, written)


def is_carried(name: str) -> bool:
    """Whether a projection is one split_ranking added (not a column of the view)."""
    folded = name.casefold()
    return any(folded.startswith(prefix) for prefix in (PARTITION, ORDER, POST)) or folded == QUALIFIED


def resolved_ranking(query: ResolvedQuery, shape: RankingShape) -> tuple[ResolvedQuery, Ranking]:
    """The resolved query without the carried projections, and the Ranking of its parts over
    ``alias.column`` (the tie-break and the stored partition columns are added by
    ``completed_ranking`` once the outputs are known)."""
    found: dict[str, exp.Expr] = {}
    for projection in query.projections:
        if is_carried(projection.name) and projection.name.casefold() not in found:
            found[projection.name.casefold()] = projection.expression
    parts = tuple(found[f"{PARTITION}{i}"] for i in range(1, shape.partitions + 1))
    orders = tuple(
        exp.Ordered(this=found[f"{ORDER}{i}"].copy(), desc=desc, nulls_first=nulls_first)
        for i, (desc, nulls_first) in enumerate(shape.directions, start=1)
    )
    posts = tuple(unparenthesized(found[f"{POST}{i}"]) for i in range(1, shape.posts + 1))
    kept = tuple(p for p in query.projections if not is_carried(p.name))
    return replace(query, projections=kept), Ranking(shape.function, parts, orders, shape.keep, post_conjuncts=posts)


def completed_ranking(
    ranking: Ranking,
    occurrence: MasterOccurrence,
    outputs: tuple[OutputColumn, ...],
    existing: tuple[HiddenColumn, ...] = (),
) -> tuple[Ranking, tuple[OutputColumn, ...], tuple[HiddenColumn, ...]]:
    """The ranking with its tie-break (a ROW_NUMBER's ORDER BY completed by the master's key, so
    that ties are ranked alike by every build and refresh) and the stored columns of its
    partition and ORDER BY expressions; the outputs with the window where the query selects its
    rank; the hidden columns holding those expressions that neither a visible column nor an
    ``existing`` hidden one (the master's key) holds."""
    tie_break: tuple[exp.Expr, ...] = ()
    if ranking.function is RankFunction.ROW_NUMBER:
        ordered = [o.this for o in ranking.order_by]
        keys = [column_node(occurrence.alias, occurrence.master.find_column(k) or k) for k in occurrence.master.key]
        tie_break = tuple(k for k in keys if k not in ordered)
    completed = replace(ranking, tie_break=tie_break)
    window = completed.window
    outputs = tuple(
        replace(o, expression=o.expression.copy().transform(lambda n: window.copy() if _is_marker(n) else n))
        if any(_is_marker(n) for n in o.expression.walk())
        else o
        for o in outputs
    )
    stored = list(existing)
    partitions = holders(completed.partition_by, outputs, stored, "_mv_p", HiddenPurpose.PARTITION)
    orders = holders(tuple(o.this for o in completed.order_by), outputs, stored, "_mv_o", HiddenPurpose.RANK_ORDER)
    hidden = stored[len(existing) :]
    return replace(completed, partition_columns=partitions, order_columns=orders), outputs, tuple(hidden)
