"""What a view-class module returns: the writes that apply the marked changes to the view.

A refresh is one atomic commit on the view's ``main`` whatever number of statements it takes:

- one write (an INSERT or a DELETE): staged with the refresh's state (``spark.wap.id``) and
  published as a compare-and-swap (publish.py);
- several writes: every write but the last goes to a *write branch* made at the snapshot the
  refresh read the view at; the last is staged on that branch with the state; publishing moves
  ``main`` to it (and drops the branch) in one compare-and-swap. This is what keeps each write
  free of a shuffle of the view: a DELETE of the affected rows is a scan of the view with the
  changed keys broadcast, and an INSERT reads at most the view rows of those keys, through the
  same broadcast filter. No MERGE writes a view: one that inserts (NOT MATCHED) is a right outer
  join of the view with the delta, which shuffles and sorts (or broadcasts) the whole view, and
  Spark 3.5 takes no join hint in a MERGE, so even a MATCHED-only one shuffles the view whenever
  the delta's size is over-estimated.

What several writes (and several parts of one write) read in common, e.g. an aggregate's delta, is
computed once into a *cached temporary view* of the session (``CACHE TABLE``) that they read, and
dropped after the last write: Spark inlines a CTE at every reference (an aggregate's INSERT named
its delta five times, each a union of joins of the logs with the masters: 65 table scans).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.analysis.clock import MovingFilter
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.sql_text import broadcast, ident, relation

# the write branch's name when the caller does not choose one (unit tests, EXPLAIN)
WRITE_BRANCH = "mv_write"
WRITE_BRANCH_PREFIX = "mv_write_"


@dataclass(frozen=True)
class CrossedRows:
    """The master rows a view's filters by the time give another answer for at this refresh's time
    than at the time its rows reflect (refresh/phases/clock.py): by alias, a query of its master's
    rows that crossed, at the snapshot the refresh reads, under the alias; and the view's filters
    that moved (analysis/clock.py: each a WHERE conjunct of one occurrence at both times)."""

    rows: Mapping[str, str]
    filters: tuple[MovingFilter, ...] = ()


@dataclass(frozen=True)
class LeanForm:
    """A write without a part that ``needed`` (a query of one count, over the refresh's cached
    views only) finds nothing for, run instead of it when that count is 0. An aggregate's INSERT
    recomputes the groups its HAVING or a global MIN/MAX flags (often; where flags are rare, the
    INSERT without the recompute runs first, with a Fallback) from the masters: a join
    of them Spark plans and scans even when no group is flagged (AQE drops a join with an empty
    side only once the stages below it ran), the masters read whole for nothing (TPC-H scale
    factor 1, an aggregate over a 4-way join: 41 MB, 3.2 s of a 3.5 s INSERT). Spark cannot skip
    it at run time, so the executor counts first (execute.chosen_sql)."""

    sql: str
    needed: str
    omits: str  # what the lean form leaves out, in words (explain says it)


# The message a write raises (Spark's raise_error) when a row it is about to write needs what its
# statement does not compute: its Fallback runs instead (execute.run_sql_step). A distinct text, so
# that no other failure is taken for it.
WRITE_STOPPED = "dbt-incremental-mv: a group needs its masters; the refresh runs its fallback"


def stop_when(condition: str, value: str) -> str:
    """``value``, or the statement stopped with WRITE_STOPPED where ``condition`` holds (a CASE:
    Spark evaluates the error only for the rows meeting it)."""
    return f"case when {condition} then raise_error('{WRITE_STOPPED}') else {value} end"


def stopped(error: BaseException) -> bool:
    """Whether ``error`` is a write's stop (stop_when), as Spark reports it through any connection."""
    return WRITE_STOPPED in str(error)


@dataclass(frozen=True)
class Fallback:
    """What runs instead of a write that stopped (stop_when): a statement that also computes what
    the write left out. A small aggregate view is rewritten whole in one statement from its
    delta (aggregate_view._rewrite), unless a changed group's sum or average needs its masters
    (exactness guards: a sum at the edge of its decimal type); checking the guards first would
    take a statement of its own on every refresh for what almost never happens, so the rewrite
    stops on such a group and the fallback (the rewrite with the recompute of the guarded groups
    from the masters) runs. Nothing of the stopped statement was written: the fallback is staged
    in its place."""

    sql: str
    in_words: str  # the fallback statement in words (explain, and the log line: "<in_words> ran instead")


class WriteKind(StrEnum):
    """What a write does to the view (its step is named by it)."""

    DELETE = "delete"  # a row-level DELETE: position deletes (merge-on-read)
    INSERT = "insert"  # an INSERT of new rows: new data files
    OVERWRITE = "overwrite"  # an INSERT OVERWRITE of the whole view (a small aggregate rewritten)
    RECORD = "record"  # an INSERT of no row, staged to record the refresh's state (nothing marked)


@dataclass(frozen=True)
class Write:
    """One write, its lean form if it has one (LeanForm), and what runs if it stops (Fallback)."""

    kind: WriteKind
    sql: str
    lean: LeanForm | None = None
    fallback: Fallback | None = None

    def __post_init__(self) -> None:  # (given as the value too)
        object.__setattr__(self, "kind", WriteKind(self.kind))


@dataclass(frozen=True)
class Cached:
    """A query the writes read more than once, computed once into a cached temporary view.
    ``lazy``: cached by the first statement that reads it (``CACHE LAZY TABLE``, no job of its
    own): rows that only the next cached view reads, twice or more."""

    name: str  # the temporary view (unique per run: it carries the write branch's name)
    sql: str
    lazy: bool = False

    @property
    def statement(self) -> str:
        """The statement that caches it."""
        return f"cache {'lazy ' if self.lazy else ''}table {ident(self.name)} as\n{self.sql}"


@dataclass(frozen=True)
class RefreshStatement:
    writes: tuple[Write, ...]  # in order; the last one is staged with the refresh's state
    steps_run: tuple[str, ...]  # e.g. "DEL orders", "INS customers"
    steps_skipped: tuple[str, ...]
    # a query counting what the writes will change (config refresh_stats): one row of named counts
    stats_sql: str | None = None
    stats_labels: tuple[str, ...] = ()  # what each column of the stats row counts
    branch: str | None = None  # the write branch of a refresh of several writes (None: one write)
    cached: tuple[Cached, ...] = ()  # computed before the writes, dropped after them
    # a predicate over the view's rows (alias ``_mv_v``) that every row the writes delete or
    # insert meets, at the snapshot it is in: what a view keeping its own log reads (own_log.py)
    touched: str | None = None
    # the DELETE's own condition (alias ``_mv_v``): exactly the rows it deletes (None: no DELETE)
    deleted: str | None = None
    # the INSERT's query (the view's stored columns, in order; it reads the view as it was, never
    # the write branch), None without an INSERT: what a UNION ALL view combines (union_view.py)
    inserted: str | None = None
    # the rows the DELETEs delete (the view's stored columns, named as stored), computed from the
    # masters as the view reflected them, when the view class can (join_view.py): what a view
    # keeping its own log logs as before images instead of reading them back (None: read back)
    deleted_rows: str | None = None

    @property
    def inserts_last(self) -> bool:
        """Whether the last write (the staged one) is an INSERT: its commit's new files hold
        exactly the rows the refresh inserted."""
        return self.writes[-1].kind is WriteKind.INSERT

    @property
    def sql(self) -> str:
        """Every write, separated by ``;`` (for reading and tests; each runs on its own)."""
        return ";\n".join(w.sql for w in self.writes)


# Conjoined to every DELETE of a view: a condition Spark can check against Iceberg's file
# statistics alone (literals, no subquery) would be run as a metadata-only delete, which Iceberg
# commits straight to the table, not staged with ``spark.wap.id``: the write would escape the
# refresh's atomic commit, and a delete of nothing would stage nothing to publish. A subquery
# (of one row, never read from a table) keeps it a row-level delete, still pruned by the literals.
# Of an inline table, not of no table: Spark 4 folds `exists (select 1)` to true (one-row
# relation subqueries are inlined), and the delete went metadata-only again.
ROW_LEVEL = "exists (select 1 from values (1))"


def delete_write(target: str, condition: str, alias: str | None = None) -> Write:
    """The DELETE of the rows of ``target`` (as ``alias``) meeting ``condition``, row-level and
    staged (see ROW_LEVEL)."""
    named = f" as {alias}" if alias else ""
    return Write(WriteKind.DELETE, f"delete from {target}{named}\nwhere ({condition})\nand {ROW_LEVEL}")


def rebalanced(query: str) -> str:
    """``query``'s rows in as many partitions as their bytes need (Spark's REBALANCE, adaptive
    execution coalescing them to its advisory partition size): for an INSERT whose rows come
    from a cached view or from streamed scans. An INSERT writes a data file per partition holding
    a row. A cached view keeps the partitions its shuffle made when it was cached
    (spark.sql.shuffle.partitions: adaptive execution is off while caching, publish.py): a MIN/MAX
    aggregate's refresh of 124 changed groups wrote 8 files of ~15 rows, and its view (~6 MB) was
    due for compaction at every refresh (1.4-2.0 s each, the shop at 1M orders). A join's rows
    come from a scan task of a master each (the changes broadcast to them): 3-6 files per
    refresh of ~100 changed orders. One exchange of the rows written."""
    return f"select /*+ REBALANCE */ * from (\n{query}\n) as `_mv_rebalanced`"


def branch_target(view_relation: str, branch: str) -> str:
    """The view's write branch as a table identifier (``db.view.branch_<name>``)."""
    return f"{relation(view_relation)}.{ident('branch_' + branch)}"


def cached_view(branch: str, what: str) -> str:
    """The name of the cached temporary view of ``what`` for the run writing on ``branch``."""
    return f"{branch}_{what}"


def refresh_writes(
    branch: str,
    writes: list[Write],
    steps_run: tuple[str, ...],
    steps_skipped: tuple[str, ...],
    stats_sql: str | None = None,
    stats_labels: tuple[str, ...] = (),
    cached: tuple[Cached, ...] = (),
    touched: str | None = None,
    deleted: str | None = None,
    inserted: str | None = None,
    deleted_rows: str | None = None,
) -> RefreshStatement:
    """A RefreshStatement of ``writes`` (their SQL already aimed at the branch when there are several)."""
    return RefreshStatement(
        tuple(writes),
        steps_run,
        steps_skipped,
        stats_sql,
        stats_labels,
        branch if len(writes) > 1 else None,
        cached,
        touched,
        deleted,
        inserted,
        deleted_rows,
    )


@dataclass(frozen=True)
class KeyRestriction:
    """Rows whose ``columns`` (master or view column names, holding ``log``'s key in key order)
    are among the keys ``log`` marked (``images``: ``all``, or those with an after image).

    Literal keys make a condition Spark pushes to the scan. Otherwise the condition holds an IN
    of a subquery (the log's keys), which Spark 3.5 pushes nothing of once it sits inside a
    disjunction: not even the conjuncts beside it (their ranges). So restrictions with a
    subquery are OR-ed only behind the OR of their prefilters (``pruned_any_of``), or restrict
    a query of their own, where their ranges are pushed."""

    log: MarkedLog
    columns: tuple[str, ...]
    images: str = "all"

    @property
    def literal(self) -> bool:
        return self.log.known_keys(self.images) is not None

    def condition(self, qualifier: str = "", *, ranged: bool = True) -> str:
        """The condition over the columns (``qualifier``: a table alias they are qualified by;
        ``ranged=False``: without the ranges, where they are a conjunct already)."""
        return self.log.key_condition([f"{qualifier}{ident(c)}" for c in self.columns], self.images, ranged=ranged)

    def prefilter(self) -> str | None:
        """What Spark can push of the condition to a scan: the literals or the ranges of the
        first column (no subquery); None when nothing is known of the keys."""
        return self.log.key_prefilter([ident(c) for c in self.columns])

    def excluded_from(self, source: str) -> str:
        """``source``'s rows NOT meeting the condition (a row with a NULL in the columns included):
        a filter for literal keys, an anti join with the keys otherwise (no subquery expression)."""
        if self.literal:
            return f"(select * from {source} where not coalesce({self.condition()}, false))"
        on = " and ".join(f"`_mv_x`.{ident(c)} = `_mv_k`.{ident(k)}" for c, k in zip(self.columns, self.log.spec.key))
        keys = broadcast(self.log.changed_keys(self.images))
        return f"(select `_mv_x`.* from {source} as `_mv_x` left anti join ({keys}) as `_mv_k` on {on})"


def split_by_literal(restrictions: Sequence[KeyRestriction]) -> list[list[KeyRestriction]]:
    """The restrictions as groups to OR within one statement: the literal ones together, each
    one with a subquery alone (see KeyRestriction)."""
    literal = [r for r in restrictions if r.literal]
    return ([literal] if literal else []) + [[r] for r in restrictions if not r.literal]


def any_of(restrictions: Sequence[KeyRestriction]) -> str:
    """Rows meeting any of ``restrictions``: the OR of their conditions."""
    return "\n   or ".join(r.condition() for r in restrictions)


def pruned_any_of(restrictions: Sequence[KeyRestriction]) -> str:
    """Rows meeting any of ``restrictions``, behind what Spark pushes to the scan for them: the
    OR of their prefilters (literals, ranges) when each has one, a conjunct of its own without a
    subquery (Spark 3.5 pushes nothing of an OR holding one, see KeyRestriction). One scan then
    prunes to the union of their ranges, where a scan per restriction reads each range once and
    costs a statement each. Behind them each restriction's ranges are not repeated: they would
    only be evaluated again, and make a stage's generated method larger than HotSpot compiles
    (8,000 bytes of bytecode: it then runs interpreted; TPC-H scale factor 1, an indexed state's
    DELETE of two facts' keys: 10.1 s with them, 1.3-1.9 s without)."""
    if len(restrictions) < 2 or all(r.literal for r in restrictions):
        return any_of(restrictions)  # one restriction's ranges, or literals alone: pushed as they are
    prefilters = [r.prefilter() for r in restrictions]
    if any(p is None for p in prefilters):
        return any_of(restrictions)
    exact = "\n   or ".join(r.condition(ranged=False) for r in restrictions)
    return "(" + "\n   or ".join(p for p in prefilters if p is not None) + f")\nand ({exact})"


def broadcast_exists(query: str, alias: str, condition: str) -> str:
    """``EXISTS`` a row of ``query`` (as ``alias``) meeting ``condition``, broadcast (see broadcast)."""
    return f"exists (select /*+ BROADCAST */ 1 from (\n{query}\n) as {alias} where {condition})"


def inserted_rows_from_log(view: ViewDefinition, log: MarkedLog, alias: str) -> str | None:
    """What a view reads of an occurrence's new rows when its log carries every column the view
    reads of it: the log's after images of the marked keys (MarkedLog.inserted_rows), not the
    master within their ranges (a filter view of scattered changes read its master whole for
    them). None: the images are not netted by those columns (the log lacks one)."""
    netted = {c.casefold() for c in log.netted_by or ()}
    if not netted or any(c.casefold() not in netted for c in view.referenced_columns[alias]):
        return None
    return log.inserted_rows({c.casefold(): t for c, t in view.occurrence(alias).master.columns})
