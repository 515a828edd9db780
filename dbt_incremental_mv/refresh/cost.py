"""Cost: how long a fast and a complete refresh of a view would take now, estimated from metadata
only, and which one ``refresh_method='force'`` runs.

Oracle's FORCE is a rule (fast whenever possible); Databricks and Snowflake recompute when the
change is large. Here the estimate is made once the mark step has fixed what a fast refresh would
apply (its changes counted, its statements rendered) and before anything is written to the view:

- a fast refresh costs its statements (a fixed price each, and a price per stage of its plan: a
  join, an aggregation, a window, a DISTINCT, a union, each a shuffle), the bytes its statements
  read (every table reference in them, at the snapshot it names, less the data files a range
  filter lets Iceberg skip: the scan is planned from manifests, no data read), and its changes
  (each marked row image is joined, shuffled and written); and, when the commit it makes leaves the
  view due for compaction (refresh/phases/compact.py), that compaction: its statements and the view's
  data files it rewrites (a complete refresh writes the view anew, with no delete file to compact);
- a complete refresh costs one statement, the bytes of every master occurrence its defining
  query reads (priced more for each join and aggregation they go through, and again for each
  window that ranks them: the MIN/MAX reserves), and the view it writes again: its hidden
  columns with it, sorted by its layout (layout.py), which costs more than the plain query's
  write (at TPC-H scale factor 10 the 3-way join is rebuilt in 51 s where its query alone runs
  in 29 s).

The prices (seconds per statement and per stage of its plan, per GB read, shuffled, sorted,
written and rebuilt, per million changes, per capture) are measured by the benchmark
(``benchmarks/JOURNAL.md``, "Cost-based force") and shipped as data,
``dbt_incremental_mv/calibration.json``, not written into the code.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Protocol

import sqlglot
from sqlglot import exp

from dbt_incremental_mv import environment
from dbt_incremental_mv.analysis.model import ViewDefinition
from dbt_incremental_mv.layout import COMPACT_SMALL_FILE_BYTES, CompactionKind, ViewFiles
from dbt_incremental_mv.refresh.marked_log import MarkedLog
from dbt_incremental_mv.refresh.phases.decide import RefreshAction
from dbt_incremental_mv.refresh.views.statement import RefreshStatement, WriteKind

GB = 1024**3
Bound = int | str | datetime.date

CALIBRATION_FILE = "calibration.json"


@dataclass(frozen=True)
class Calibration:
    """The prices of the cost model (``calibration.json``)."""

    seconds_per_statement: float  # a Spark statement's fixed price (planning, a job, a commit)
    seconds_per_gb_read: float  # a complete refresh's price per GB of masters read (decoded, joined, aggregated)
    seconds_per_gb_scanned: float  # a fast refresh's per GB its statements read (filtered, few columns)
    seconds_per_gb_written: float  # writing a GB of the view
    seconds_per_million_changes: float  # a fast refresh's price per marked row image
    seconds_per_gb_captured: float  # a capture's price per GB of the data files the master commits changed
    seconds_per_capture: float  # ... and per log captured (staging the changed files, the log's commit)
    fast_fixed_seconds: float  # what every fast refresh pays besides its statements (publish, bookkeeping)
    complete_fixed_seconds: float  # ... and every complete refresh
    # (prices added later: a calibration file without them prices as before, 0)
    seconds_per_stage: float = 0.0  # a fast refresh's per stage of a statement's plan (statement_stages)
    seconds_per_gb_shuffled: float = 0.0  # a complete refresh's per GB of masters read, per join or aggregation
    seconds_per_gb_sorted: float = 0.0  # ... and per window ranking them (a MIN/MAX reserve)
    # a complete refresh's per GB of the view it writes again, its hidden columns with it, sorted
    # (layout.py); None: seconds_per_gb_written
    seconds_per_gb_rebuilt: float | None = None
    # a compaction's per GB of the view's data files it rewrites (read, deletes applied, sorted,
    # written); None: seconds_per_gb_rebuilt
    seconds_per_gb_compacted: float | None = None
    measured: str = ""  # where the prices come from

    @classmethod
    def from_json(cls, text: str) -> Calibration:
        document = json.loads(text)
        prices = document["prices"]
        return cls(
            seconds_per_statement=float(prices["seconds_per_statement"]),
            seconds_per_gb_read=float(prices["seconds_per_gb_read"]),
            seconds_per_gb_scanned=float(prices["seconds_per_gb_scanned"]),
            seconds_per_gb_written=float(prices["seconds_per_gb_written"]),
            seconds_per_million_changes=float(prices["seconds_per_million_changes"]),
            seconds_per_gb_captured=float(prices["seconds_per_gb_captured"]),
            seconds_per_capture=float(prices["seconds_per_capture"]),
            fast_fixed_seconds=float(prices["fast_fixed_seconds"]),
            complete_fixed_seconds=float(prices["complete_fixed_seconds"]),
            seconds_per_stage=float(prices.get("seconds_per_stage", 0.0)),
            seconds_per_gb_shuffled=float(prices.get("seconds_per_gb_shuffled", 0.0)),
            seconds_per_gb_sorted=float(prices.get("seconds_per_gb_sorted", 0.0)),
            seconds_per_gb_rebuilt=float(prices["seconds_per_gb_rebuilt"])
            if "seconds_per_gb_rebuilt" in prices
            else None,
            seconds_per_gb_compacted=float(prices["seconds_per_gb_compacted"])
            if "seconds_per_gb_compacted" in prices
            else None,
            measured=str(document.get("measured", "")),
        )

    @property
    def rebuilt_per_gb(self) -> float:
        """A complete refresh's price per GB of the view it writes again."""
        return self.seconds_per_gb_written if self.seconds_per_gb_rebuilt is None else self.seconds_per_gb_rebuilt

    @property
    def compacted_per_gb(self) -> float:
        """A compaction's price per GB of the data files it rewrites."""
        return self.rebuilt_per_gb if self.seconds_per_gb_compacted is None else self.seconds_per_gb_compacted


CALIBRATION_ENV = environment.CALIBRATION.name


def calibration() -> Calibration:
    """The prices: those of the file ``DBT_INCREMENTAL_MV_CALIBRATION`` names (measured on your
    cluster: benchmarks/README.md), else the package's (each file read once per process)."""
    return _calibration(environment.CALIBRATION.value())


@lru_cache(maxsize=4)
def _calibration(path: str | None) -> Calibration:
    if path is None:
        return Calibration.from_json(
            resources.files("dbt_incremental_mv").joinpath(CALIBRATION_FILE).read_text(encoding="utf-8")
        )
    try:
        return Calibration.from_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"{CALIBRATION_ENV}={path}: not a calibration file ({exc}); copy dbt_incremental_mv/calibration.json "
            f"and change its prices, or unset {CALIBRATION_ENV} to use the package's"
        ) from exc


# ---------------------------------------------------------------- what a statement reads

# A static filter a scan's data files are pruned by: ("range", column, low, high) or
# ("and" | "or", (filters...)). None: no filter (the whole table is read).
RangeFilter = tuple


@dataclass(frozen=True)
class TableRead:
    """One table reference in a statement: the table, the snapshot it names (None: its current
    one, or the view's write branch) and the static range filter Spark pushes down to its scan."""

    relation: str
    snapshot: int | None = None
    filter: RangeFilter | None = None


def _bound(node: exp.Expr) -> Bound | None:
    """A literal bound of a range (an integer, a string or a date), or None."""
    if isinstance(node, exp.Paren):
        return _bound(node.this)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.to.is_type("date"):
        try:
            return datetime.date.fromisoformat(node.this.name)
        except ValueError:
            return None
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        value = _bound(node.this)
        return -value if isinstance(value, int) else None
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.name
        try:
            return int(node.name)
        except ValueError:
            return None
    return None


def range_filter(condition: exp.Expr | None) -> RangeFilter | None:
    """The part of a WHERE condition Iceberg prunes data files by: ranges of a column between
    literals and IN lists of literals (each value a range of its own), combined by AND and OR;
    anything else (an IN of a subquery, a comparison of two columns) prunes nothing. None: no
    file can be skipped."""
    if condition is None:
        return None
    if isinstance(condition, exp.Paren):
        return range_filter(condition.this)
    if isinstance(condition, exp.In) and isinstance(condition.this, exp.Column) and not condition.args.get("query"):
        values = [_bound(v) for v in condition.expressions]
        if not values or any(v is None for v in values):
            return None
        points = tuple(("range", condition.this.name.lower(), v, v) for v in values)
        return points[0] if len(points) == 1 else ("or", points)
    if isinstance(condition, exp.Between) and isinstance(condition.this, exp.Column):
        low, high = _bound(condition.args["low"]), _bound(condition.args["high"])
        if low is not None and high is not None and type(low) is type(high):
            return ("range", condition.this.name.lower(), low, high)
        return None
    if isinstance(condition, exp.And):
        parts = [p for p in (range_filter(condition.this), range_filter(condition.expression)) if p is not None]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else ("and", tuple(parts))
    if isinstance(condition, exp.Or):
        left, right = range_filter(condition.this), range_filter(condition.expression)
        if left is None or right is None:
            return None  # one side may match any file
        return ("or", (left, right))
    return None


def _relation(table: exp.Table, view_relation: str) -> str:
    parts = [p for p in (table.catalog, table.db, table.name) if p]
    name = ".".join(parts).lower()
    if len(parts) == 3 and parts[2].lower().startswith("branch_") and ".".join(parts[:2]).lower() == view_relation:
        return view_relation  # the view's write branch: made from its main
    return name


@lru_cache(maxsize=256)
def _parsed(sql: str) -> exp.Expr:
    """A statement's syntax tree, parsed once for what it reads and for its stages (read only)."""
    return sqlglot.parse_one(sql, read="spark")


def table_reads(sql: str, view_relation: str) -> list[TableRead]:
    """Every table a statement reads (a DELETE or MERGE its target too), with the snapshot it names
    and the static range filter of a scan that reads that table alone (``select ... from t where``,
    ``delete from t where``). Temporary views (the refresh's cached deltas) are left out: they are
    in memory, and the statement that computed them is counted for what it read."""
    tree = _parsed(sql)
    reads = []
    for table in tree.find_all(exp.Table):
        if not table.db:
            continue  # a temporary view, or a CTE
        version = table.args.get("version")
        snapshot = None
        if version is not None and isinstance(version.expression, exp.Literal):
            try:
                snapshot = int(version.expression.name)
            except ValueError:
                snapshot = None
        condition = None
        parent = table.parent
        if isinstance(parent, exp.Delete) and parent.this is table:
            condition = parent.args.get("where")
        elif (
            isinstance(parent, exp.From)
            and isinstance(parent.parent, exp.Select)
            and not parent.parent.args.get("joins")
        ):
            condition = parent.parent.args.get("where")
        if isinstance(parent, exp.Insert) and parent.this is table:
            continue  # the target of an INSERT is written, not read
        if isinstance(parent, exp.Schema) and isinstance(parent.parent, exp.Insert):
            continue
        reads.append(
            TableRead(
                _relation(table, view_relation),
                snapshot,
                range_filter(condition.this if condition is not None else None),
            )
        )
    return reads


# ---------------------------------------------------------------- the shape of a query


def statement_stages(sql: str) -> int:
    """The stages a statement's plan adds besides its scans: its joins (the semi joins of EXISTS
    included), its grouped and DISTINCT selects, its window functions and its unions, each a
    shuffle or a sort in Spark's plan. The benchmark's statements cost about a tenth of a second
    per stage whatever they read (benchmarks/JOURNAL.md, "Cost-based force")."""
    tree = _parsed(sql)
    selects = list(tree.find_all(exp.Select))
    return (
        sum(1 for _ in tree.find_all(exp.Join))
        + sum(1 for _ in tree.find_all(exp.Exists))
        + sum(1 for s in selects if s.args.get("group"))
        + sum(1 for s in selects if s.args.get("distinct"))
        + sum(1 for _ in tree.find_all(exp.Window))
        + sum(1 for _ in tree.find_all(exp.Union))
    )


def query_stages(view: ViewDefinition) -> tuple[int, int]:
    """(joins and aggregations, windows) of a complete refresh's query: a view's joins, its
    GROUP BY, the ranking window each MIN/MAX reserve is built by (render.py) and a ranked or
    windowed view's windows; a UNION ALL's branches summed; a PER_PARTITION view's groupings and
    DISTINCTs, and its windows."""
    if view.branches:
        shapes = [query_stages(b) for b in view.branches]
        return sum(s for s, _ in shapes), sum(w for _, w in shapes)
    if view.partition_query is not None:
        query = view.partition_query.query
        groupings = sum(1 for s in query.find_all(exp.Select) if s.args.get("group") or s.args.get("distinct"))
        windows = {(tuple(w.args.get("partition_by") or ()), w.args.get("order")) for w in query.find_all(exp.Window)}
        return groupings, len(windows)
    return len(view.joins) + int(view.is_aggregate), len(view.reserves) + _window_stages(view)


def _window_stages(view: ViewDefinition) -> int:
    """A ranked view's window; a windowed view's windows, one stage per PARTITION BY and ORDER BY
    they are computed over (Spark sorts once for each)."""
    if view.ranking is not None:
        return 1
    if view.windowing is None:
        return 0
    windows = [w for o in view.outputs for w in o.expression.find_all(exp.Window)]
    windows += [w for p in view.windowing.post_conjuncts for w in p.find_all(exp.Window)]
    return len({(tuple(w.args.get("partition_by") or ()), w.args.get("order")) for w in windows})


def fast_seconds(prices: Calibration, stages: Sequence[int], read: int, written: int, changes: int) -> float:
    """A fast refresh's price: its statements (``stages``: each one's, statement_stages), the bytes
    they read, write and the changes they apply."""
    return (
        prices.fast_fixed_seconds
        + prices.seconds_per_statement * len(stages)
        + prices.seconds_per_stage * sum(stages)
        + prices.seconds_per_gb_scanned * read / GB
        + prices.seconds_per_gb_written * written / GB
        + prices.seconds_per_million_changes * changes / 1e6
    )


def complete_seconds(prices: Calibration, read: int, stages: int, windows: int, written: int) -> float:
    """A complete refresh's price: one statement reading ``read`` bytes of masters through
    ``stages`` joins and aggregations and ``windows`` rankings (query_stages), writing ``written``
    (the view again, sorted)."""
    return (
        prices.complete_fixed_seconds
        + prices.seconds_per_statement
        + (
            prices.seconds_per_gb_read
            + prices.seconds_per_gb_shuffled * stages
            + prices.seconds_per_gb_sorted * windows
        )
        * read
        / GB
        + prices.rebuilt_per_gb * written / GB
    )


# ---------------------------------------------------------------- sizes


class Sizes(Protocol):
    """The metadata the estimate reads (metadata.Metadata)."""

    def table_size(self, name: str, snapshot: int | None = None) -> tuple[int, int] | None:
        """(bytes of the live files, records) of ``name`` at ``snapshot`` (None: main)."""

    def scan_size(self, name: str, snapshot: int | None, range_filter: RangeFilter) -> int | None:
        """Bytes of the files a scan filtered by ``range_filter`` reads (None: not known)."""


@dataclass(frozen=True)
class Estimate:
    method: RefreshAction  # FAST or COMPLETE
    seconds: float
    statements: int
    bytes_read: int
    bytes_written: int
    changes: int = 0
    # the table read the most, and the share of it read (the fast refresh's)
    largest_read: tuple[str, float] | None = None
    unknown: tuple[str, ...] = ()  # tables whose size the metadata does not give
    bytes_captured: int = 0  # the data files a capture it needs reads (decided before the capture)
    stages: int = 0  # joins, aggregations, windows... of its statements (statement_stages, query_stages)
    # the compaction its commit makes due (with_compaction): its statements (0: none), what it
    # rewrites and the bytes of the view's data files it rewrites
    compaction_statements: int = 0
    bytes_compacted: int = 0
    compaction_kind: CompactionKind = CompactionKind.DATA_FILES

    def describe(self) -> str:
        read = f"reads {self.bytes_read / GB:.2f} GB"
        if self.largest_read is not None and self.method == RefreshAction.FAST:
            name, share = self.largest_read
            read += f" ({share:.0%} of {name})"
        shape = f" ({self.stages} stage{'s' if self.stages != 1 else ''})" if self.stages else ""
        parts = [f"{self.statements} statement{'s' if self.statements != 1 else ''}{shape}", read]
        if self.method == RefreshAction.COMPLETE:
            parts.append(f"writes {self.bytes_written / GB:.2f} GB")
        elif self.bytes_captured:
            parts.append(f"after a capture of {self.bytes_captured / GB:.2f} GB of changed master files")
        else:
            parts.append(f"{self.changes:,} changes")
        if self.compaction_statements and self.compaction_kind is CompactionKind.DELETE_FILES:
            parts.append("then merges the view's delete files")
        elif self.compaction_statements and self.compaction_kind is CompactionKind.SMALL_FILES:
            parts.append(f"then rewrites the view's small data files ({self.bytes_compacted / GB:.2f} GB)")
        elif self.compaction_statements:
            parts.append(f"then compacts the view ({self.bytes_compacted / GB:.2f} GB rewritten)")
        return ", ".join(parts)


@dataclass(frozen=True)
class Choice:
    method: RefreshAction  # FAST or COMPLETE
    fast: Estimate
    complete: Estimate

    @property
    def short(self) -> str:
        """The choice in a few words (a fast refresh's log line)."""
        if self.fast.unknown or self.complete.unknown:
            return "fast whenever possible (a table's size is not in its metadata)"
        compaction = " (its compaction with it)" if self.fast.compaction_statements else ""
        return f"estimated {self.fast.seconds:.1f} s fast{compaction} vs {self.complete.seconds:.1f} s complete"

    @property
    def why(self) -> str:
        unknown = tuple(dict.fromkeys(self.fast.unknown + self.complete.unknown))
        if unknown:
            return f"fast whenever possible: no size in the metadata of {', '.join(unknown)}"
        return (
            f"estimated {self.fast.seconds:.1f} s fast vs {self.complete.seconds:.1f} s complete: "
            f"fast {self.fast.describe()}; complete {self.complete.describe()}"
        )


def _read_bytes(read: TableRead, sizes: Sizes) -> tuple[int, int] | None:
    """(bytes read, bytes of the whole table) of one table reference; None: size not known."""
    whole = sizes.table_size(read.relation, read.snapshot)
    if whole is None:
        return None
    total = whole[0]
    if read.filter is None or total == 0:
        return total, total
    pruned = sizes.scan_size(read.relation, read.snapshot, read.filter)
    return (total if pruned is None else min(pruned, total)), total


def estimate_fast(
    statement: RefreshStatement,
    view_relation: str,
    marked: Mapping[str, MarkedLog],
    sizes: Sizes,
    prices: Calibration,
    whole_reads_only: bool = False,
) -> Estimate:
    """A fast refresh running ``statement`` (its cached deltas and its writes); ``whole_reads_only``:
    count only the tables it reads whole, not those a range filter prunes (a lower bound, before
    the changes and their range are known)."""
    # (each statement, and whether it is a view cached lazily: computed by the next statement)
    parts = [(c.sql, c.lazy) for c in statement.cached] + [(w.sql, False) for w in statement.writes]
    statements = [sql for sql, _ in parts]
    read, largest, unknown = 0, None, []
    for sql in statements:
        for table_read in table_reads(sql, view_relation):
            if whole_reads_only and table_read.filter is not None:
                continue
            sized = _read_bytes(table_read, sizes)
            if sized is None:
                unknown.append(table_read.relation)
                continue
            size, total = sized
            read += size
            if total and (largest is None or size > largest[0]):
                largest = (size, total, table_read.relation)
    changes = sum(m.inserts + m.deletes for m in marked.values())
    view = sizes.table_size(view_relation)
    view_bytes, view_rows = view if view is not None else (0, 0)
    written = int(min(changes, view_rows) * (view_bytes / view_rows)) if view_rows else 0
    # a view cached lazily is computed by the next statement: its stages are that statement's
    stages: list[int] = []
    pending = 0
    for sql, lazy in parts:
        pending += statement_stages(sql)
        if not lazy:
            stages.append(pending)
            pending = 0
    return Estimate(
        RefreshAction.FAST,
        fast_seconds(prices, stages, read, written, changes),
        len(stages),
        read,
        written,
        changes,
        (largest[2], largest[0] / largest[1]) if largest is not None else None,
        tuple(dict.fromkeys(unknown)),
        stages=sum(stages),
    )


def with_capture(
    fast: Estimate, captures: Sequence[tuple[int, int]], prices: Calibration, unknown: tuple[str, ...] = ()
) -> Estimate:
    """A fast refresh that must first capture logs: ``captures`` holds, per log, the bytes of the
    master's changed data files and the number of views that read the log. A capture is made
    once for all of them, so each pays its share (a statement that reads the files, its commit)."""
    seconds = sum(
        (prices.seconds_per_statement + prices.seconds_per_capture + prices.seconds_per_gb_captured * size / GB)
        / max(1, readers)
        for size, readers in captures
    )
    return replace(
        fast,
        seconds=fast.seconds + seconds,
        statements=fast.statements + len(captures),
        bytes_captured=sum(size for size, _ in captures),
        unknown=tuple(dict.fromkeys(fast.unknown + unknown)),
    )


def _view_deletes(statement: RefreshStatement, view_relation: str, sizes: Sizes) -> tuple[int, int]:
    """(the DELETEs of the view in ``statement``, the bytes of the view's data files they plan)."""
    deletes = [w for w in statement.writes if w.kind is WriteKind.DELETE]
    planned = 0
    for write in deletes:
        for table_read in table_reads(write.sql, view_relation):
            sized = _read_bytes(table_read, sizes) if table_read.relation == view_relation else None
            planned += sized[0] if sized is not None else 0
    return len(deletes), planned


def files_after(
    files: ViewFiles, statement: RefreshStatement, view_relation: str, written: int, sizes: Sizes
) -> ViewFiles | None:
    """The view's files once the fast refresh of ``statement`` has committed, ``files`` those it has
    now: each INSERT adds a data file (``written`` bytes in all, estimate_fast); each DELETE a delete
    file for each data file it plans (one from each scan task that deletes; a later DELETE in the
    same file merges them: about one per data file at most), at least one. None: a write replaces
    the view's rows (an INSERT OVERWRITE leaves no delete file and no small file)."""
    kinds = [w.kind for w in statement.writes]
    if WriteKind.OVERWRITE in kinds:
        return None
    deletes, planned = _view_deletes(statement, view_relation, sizes)
    per_file = files.bytes / files.data_files if files.data_files else 0
    deleted_in = max(deletes, -(-planned // int(per_file)) if per_file >= 1 else deletes)
    data_files = files.data_files + kinds.count(WriteKind.INSERT)
    return replace(
        files,
        data_files=data_files,
        delete_files=min(data_files, files.delete_files + deleted_in) if deletes else files.delete_files,
        bytes=files.bytes + written,
    )


def with_compaction(
    fast: Estimate,
    statement: RefreshStatement,
    view_relation: str,
    files: ViewFiles,
    statements: int,
    sizes: Sizes,
    prices: Calibration,
    kind: CompactionKind = CompactionKind.DATA_FILES,
) -> Estimate:
    """The fast refresh ``fast`` of ``statement`` followed by the compaction its commit makes due
    (refresh/phases/compact.py): ``files``, the view's files that commit leaves (files_after),
    ``statements`` the compaction's, ``kind`` what it rewrites. Its delete files merged: its
    statements (the delete files are small). Its small data files: at most each extra data file
    (small_file_bytes). Its data files: those that have deletes and the
    small ones (layout.COMPACTION_OPTIONS): every file when they average under the small-file size;
    else those with a delete file (each about the view's average file) and the files the refresh
    adds; at most the whole view."""
    small = not files.partitioned and files.bytes < files.data_files * COMPACT_SMALL_FILE_BYTES
    if kind is CompactionKind.DELETE_FILES:
        rewritten = 0
    elif kind is CompactionKind.SMALL_FILES:  # the files the refreshes added, each under small_file_bytes
        rewritten = min(files.bytes, files.data_files_over * files.small_file_bytes)
    elif small or not files.data_files:
        rewritten = files.bytes
    else:
        with_deletes = files.delete_files * files.bytes // files.data_files
        rewritten = min(files.bytes, with_deletes + fast.bytes_written)
    return replace(
        fast,
        seconds=fast.seconds + prices.seconds_per_statement * statements + prices.compacted_per_gb * rewritten / GB,
        compaction_statements=statements,
        bytes_compacted=rewritten,
        compaction_kind=kind,
    )


def estimate_complete(
    masters_read: Sequence[tuple[str, int | None]],
    view_relation: str,
    sizes: Sizes,
    prices: Calibration,
    shape: tuple[int, int] = (0, 0),
) -> Estimate:
    """A complete refresh: its query reads every master occurrence (``masters_read``: relation and
    the snapshot it is pinned to) through ``shape`` (query_stages: its joins and aggregations, its
    windows) and writes the view again (its current size)."""
    read, unknown = 0, []
    for name, snapshot in masters_read:
        size = sizes.table_size(name, snapshot)
        if size is None:
            unknown.append(name)
        else:
            read += size[0]
    view = sizes.table_size(view_relation)
    if view is None:
        unknown.append(view_relation)
    written = view[0] if view is not None else 0
    stages, windows = shape
    return Estimate(
        RefreshAction.COMPLETE,
        complete_seconds(prices, read, stages, windows, written),
        1,
        read,
        written,
        unknown=tuple(dict.fromkeys(unknown)),
        stages=stages + windows,
    )


def estimate_recompute(
    view: ViewDefinition, snapshots: Mapping[str, int], view_relation: str, sizes: Sizes, prices: Calibration
) -> Estimate:
    """A complete refresh of ``view``: every occurrence's master read at its snapshot in
    ``snapshots`` (by relation; absent: its current one), through the query's shape."""
    masters = [(o.master.name, snapshots.get(o.master.name)) for o in view.occurrences]
    return estimate_complete(masters, view_relation, sizes, prices, query_stages(view))


def choose(fast: Estimate, complete: Estimate) -> Choice:
    """The cheaper refresh; a tie goes to fast (it leaves the view's files as they are), and so
    does an estimate missing a table's size (Oracle's rule: fast whenever possible)."""
    if fast.unknown or complete.unknown:
        return Choice(RefreshAction.FAST, fast, complete)
    return Choice(RefreshAction.COMPLETE if complete.seconds < fast.seconds else RefreshAction.FAST, fast, complete)
