"""The view's own layout, and layout advice: Iceberg's equivalent of the indexes Oracle's fast
refresh wants.

**The view's layout** (``view_layout``, applied by every build and complete refresh): a join
view's rows are written sorted by the hidden key of its largest master (its fact, whose changes
are the most numerous), in row groups of ROW_GROUP_BYTES, with Parquet bloom filters on its
other hidden keys. The sort is global (``ORDER BY``: Spark range-partitions the rows, so each
data file holds its own range of the key), so a refresh's DELETE plans only the data files
whose range can hold a marked key, and within them reads only the row groups whose statistics
can: ranges and literals of the fact's keys are pruned by the files' and row groups' min/max,
literals of a dimension's keys by the bloom filters. (A sort within each write task, Spark's
``SORT BY``, left every file spanning the whole key: at TPC-H scale factor 10 each DELETE of
the 3-way join planned all 8 of the view's files for changes at both ends of the key.) What that
costs a complete refresh: a sampling job and a shuffle of the view's rows. Measured on the
view's build: the TPC-H 3-way join at scale factor 10 in 47-51 s (35-36 s sorted within tasks,
29 s for the plain query without hidden columns); the shop's at 100M orders in 446 s (101 s
for the plain query). A build that sorts only where the view is small enough is not built.

Oracle's DEL step wants an index on each rowid column of the view and its INS step indexes on
the masters' join columns. Iceberg has no indexes; it prunes data files by the min/max
statistics of their columns, which are tight when the table is sorted (or bucketed) by them:

- the view, by its hidden key columns: DEL and the MERGE find the rows of the marked keys
  in a few files;
- each master, by its key: the INS step reads the master restricted to the marked keys;
- each master that is joined to, by its join columns: the INS step looks up join partners;
- a master holding another's key (a fact's foreign key, ``o_custkey``): Parquet bloom filters on
  those columns, in row groups small enough to skip. A changed dimension row's INS step reads the
  fact by its key, as literals when few: Iceberg then skips the row groups whose bloom filter
  rules them all out. It pays when the changed rows' facts are fewer than the fact's row groups
  (on TPC-H-shaped data, 30 customers' 300 orders hit every row group of ``orders``: nothing is
  skipped, and only a fact sorted by that key, or kept so by the plugin, would read less).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from sqlglot import exp

from dbt_incremental_mv.analysis import ViewDefinition
from dbt_incremental_mv.analysis.links import key_links
from dbt_incremental_mv.metadata import TableMetadata
from dbt_incremental_mv.sql_text import ident, idents, relation, string

# set on every table the plugin creates (views, internal states, logs, the refresh history), each
# committed to by every refresh: a commit deletes the metadata files past Iceberg's
# write.metadata.previous-versions-max (100) instead of keeping every one (refresh/phases/expire.py)
METADATA_CLEANUP = "write.metadata.delete-after-commit.enabled"

ROW_GROUP_BYTES = 16 * 1024 * 1024  # Iceberg's default is 128 MB: a row group is what a filter skips
# an indexed join state's: its lookups are an IN of the changed dimension keys, scattered over it. In a
# 93 MB state sorted by the key (three files), twenty scattered keys made the tasks read 63 MB in 16 MB
# row groups (one or two a file), 36 MB in 4 MB ones and 11 MB in 1 MB ones, the files as large
INDEXED_ROW_GROUP_BYTES = 1024 * 1024
# Iceberg's adaptive split size (on by default) cuts a small scan into splits at row-group boundaries
# to use every core: a state of 1 MB row groups was read in a task per row group (207 for 81 MB), and
# a merge-on-read DELETE writes the position deletes of each task as a file of its own, every later
# DELETE of the same commit writing each task's file's earlier deletes again. Off, a split is Iceberg's
# 128 MB target: on an indexed join state at TPC-H scale factor 1 a refresh's two DELETEs took 1.5-2.3 s
# and 3.7-4.0 s instead of 2.5 s and 13.6-19.4 s, and wrote 15 and 90 delete files instead of 103 and 326.
FIXED_SPLITS = {"read.split.adaptive-size.enabled": "false"}
BLOOM_PROPERTY = "write.parquet.bloom-filter-enabled.column."
# the columns a build sorted the view by (a JSON list): its compaction keeps them sorted
SORTED_BY_PROPERTY = "dbt_incremental_mv.sorted-by"


@dataclass(frozen=True)
class ViewLayout:
    """How the view's table is written: sorted by ``sort_by``, with bloom filters on ``bloom``
    (hidden key columns of the other occurrences)."""

    sort_by: tuple[str, ...] = ()
    bloom: tuple[str, ...] = ()
    row_group_bytes: int = ROW_GROUP_BYTES
    fixed_splits: bool = False  # read in splits of Iceberg's target size, not adaptive ones (FIXED_SPLITS)

    def properties(self) -> dict[str, str]:
        """The table properties it needs (defaults the user's tblproperties may override)."""
        found = {"write.parquet.row-group-size-bytes": str(self.row_group_bytes)}
        found.update({f"{BLOOM_PROPERTY}{column}": "true" for column in self.bloom})
        if self.fixed_splits:
            found.update(FIXED_SPLITS)
        return found

    def record(self) -> dict[str, str]:
        """The plugin's own property saying how the table was sorted (the user's cannot override it)."""
        return {SORTED_BY_PROPERTY: json.dumps(list(self.sort_by))} if self.sort_by else {}

    def sorted_query(self, query: str) -> str:
        """``query`` with its rows sorted globally: each data file written holds a range of the key."""
        return f"{query}\norder by {idents(self.sort_by)}" if self.sort_by else query


def written_sort(properties: Mapping[str, str]) -> tuple[str, ...]:
    """The columns a view's table was built sorted by (ViewLayout.record), from its table
    properties: what its compaction keeps. None recorded (built before the property, or edited by
    hand): ()."""
    try:
        return tuple(str(c) for c in json.loads(properties.get(SORTED_BY_PROPERTY) or "[]"))
    except (ValueError, TypeError):
        return ()


def view_layout(view: ViewDefinition, master_rows: Mapping[str, int], sorted_by: str | None = None) -> ViewLayout:
    """The layout of a join view (and of a UNION ALL's join branches): sorted by the hidden key of
    the occurrence whose master has the most rows (``master_rows``, from metadata; the first
    occurrence when none is known), or of the occurrence ``sorted_by`` (an alias: the dimension of
    an indexed join state, whose changes the view's refreshes look up), bloom filters on every
    other hidden key column. Aggregate views keep Iceberg's defaults (their refresh finds groups
    by a join, not by literals)."""
    keyed = [o for o in view.occurrences if view.key_columns(o.alias)]
    if not keyed:
        return ViewLayout()
    largest = max(keyed, key=lambda o: (o.alias == sorted_by, master_rows.get(o.master.name, -1), -keyed.index(o)))
    sort_by = tuple(h.name for h in view.key_columns(largest.alias))
    bloom = tuple(h.name for o in keyed if o.alias != largest.alias for h in view.key_columns(o.alias))
    return ViewLayout(sort_by, bloom)


def indexed_layout(view: ViewDefinition, sort_by: tuple[str, ...]) -> ViewLayout:
    """The layout of an indexed join state (analysis/indexed.py): sorted by the columns a dimension's
    changes look it up by, in small row groups (INDEXED_ROW_GROUP_BYTES: the unit a lookup skips), bloom
    filters on every hidden key column (what its own refresh deletes by), read in fixed splits
    (FIXED_SPLITS: an internal table no user reads; its refresh's DELETEs write a delete file per task)."""
    keyed = [o for o in view.occurrences if view.key_columns(o.alias)]
    return ViewLayout(
        sort_by,
        tuple(h.name for o in keyed for h in view.key_columns(o.alias)),
        row_group_bytes=INDEXED_ROW_GROUP_BYTES,
        fixed_splits=True,
    )


def _columns(expression: exp.Expr) -> list[str]:
    return [c.name for c in expression.find_all(exp.Column)]


def layout_advice(view: ViewDefinition, view_relation: str) -> list[str]:
    """Statements (as advice, never run) that make the refresh of ``view`` prune files."""
    advice = []
    hidden = [h.name for h in view.hidden_columns if h.occurrence is not None]
    if hidden:
        first = view.occurrences[0].alias
        ordered = [h.name for h in view.key_columns(first)] + [
            h for h in hidden if h not in {k.name for k in view.key_columns(first)}
        ]
        advice.append(f"alter table {relation(view_relation)} write ordered by {idents(ordered)}")
    elif view.group_key_columns:
        advice.append(f"alter table {relation(view_relation)} write ordered by {idents(view.group_key_columns)}")
    join_columns: dict[str, list[str]] = {}
    for step in (s for part in view.branches or (view,) for s in part.joins):  # (a UNION ALL's: its branches')
        master = view.occurrence(step.alias).master
        for pair in step.equi_pairs:
            for column in _columns(pair.right):
                join_columns.setdefault(master.name, [])
                if column not in join_columns[master.name]:
                    join_columns[master.name].append(column)
    seen = set()
    for occurrence in view.occurrences:
        master = occurrence.master
        if master.name in seen:
            continue
        seen.add(master.name)
        columns = list(master.key)
        for column in join_columns.get(master.name, []):
            if column not in columns:
                columns.append(column)
        advice.append(f"alter table {relation(master.name)} write ordered by {', '.join(ident(c) for c in columns)}")
    looked_up: dict[str, list[str]] = {}  # master -> its columns holding another master's key
    for part in view.branches or (view,):
        for link in key_links(part):
            master_name = view.occurrence(link.target).master.name
            for column in link.columns:
                if column not in looked_up.setdefault(master_name, []):
                    looked_up[master_name].append(column)
    for master_name, columns in looked_up.items():
        properties = [(f"{BLOOM_PROPERTY}{c}", "true") for c in columns]
        properties.append(("write.parquet.row-group-size-bytes", str(ROW_GROUP_BYTES)))
        listed = ", ".join(f"{string(k)} = {string(v)}" for k, v in properties)
        advice.append(f"alter table {relation(master_name)} set tblproperties ({listed})")
    return advice


# A view's refreshes leave delete files (merge-on-read; deletion vectors on format 3) and small
# data files; a full scan of the view then opens and applies them all. Measured
# (benchmarks/view_reads.py, a 1M-row view, format 2, refreshes deleting and inserting 100 rows
# each), a full scan against the same rows rebuilt: after 20 refreshes (5 delete files, 42 data
# files) 1.37x, after 100 (49 delete files, 202 data files) 1.64-1.92x; compacted, 0.75-1.05x.
# What a scan pays is the files it opens beyond those a rewrite of the view leaves (one per
# COMPACT_FILE_BYTES): the refreshes' small data files and their delete files (an INSERT or a
# DELETE writes one from each of its tasks: at TPC-H scale factor 10 one refresh of the 3-way join
# left its 190 MB view 11 data files and 12 delete files more), and the deleted rows it still
# reads. Compaction is due when those extra files reach COMPACT_EXTRA_FILES plus
# COMPACT_EXTRA_PER_FILE for each file a rewrite leaves (a larger view's scan is its bytes, which a
# small file's opening adds little to), or, for a view of more than one such file, when
# COMPACT_DELETED_SHARE of the rows in its data files are deleted. A compaction of that 190 MB view
# (29-36 s) costs as much as its rebuild (29 s): it is due after a few refreshes, not at every
# one, as it was when 4 delete files made it due. A view of at most COMPACT_SMALL_VIEW_BYTES is due
# at COMPACT_SMALL_VIEW_EXTRA_FILES: its scan is a job's fixed cost (0.4 s for a 3 MB view) that
# each file beyond a rebuild's raises by 2-3%. Measured after 100 refreshes of 100 rows
# (benchmarks/view_reads.py): due at 32 files, a 3 MB view read 1.29-1.42x its rebuilt self; at 8,
# its compactions rewriting the refreshes' small files (compaction_kind), 1.19-1.20x at 0.25 s
# of compaction per refresh (a 12 MB one 1.14-1.16x at 0.31 s).
COMPACT_FILE_BYTES = 64 * 1024 * 1024  # the data files a compaction writes (about a sorted build's)
COMPACT_EXTRA_FILES = 16
COMPACT_EXTRA_PER_FILE = 16
COMPACT_SMALL_VIEW_BYTES = 16 * 1024 * 1024
COMPACT_SMALL_VIEW_EXTRA_FILES = 8
COMPACT_DELETED_SHARE = 0.1
COMPACT_SMALL_FILE_BYTES = 8 * 1024 * 1024  # a compaction rewrites these, and the files with deletes
COMPACT_TINY_FILE_BYTES = 256 * 1024  # always small (a view of a few KB: every file of it)


# the totals of an Iceberg snapshot's summary a ViewFiles is read from, and those it reads when
# present (rows in the data files, and deleted by position)
TOTALS = ("total-data-files", "total-delete-files", "total-files-size")
ROW_TOTALS = ("total-records", "total-position-deletes")


@dataclass(frozen=True)
class ViewFiles:
    """A table's live files, from its current snapshot's totals; ``partitioned``: its table is
    (each partition has files of its own, however small: only its delete files count as extra)."""

    data_files: int
    delete_files: int
    bytes: int
    partitioned: bool = False
    records: int = 0  # rows in its data files, the deleted ones included
    deleted: int = 0  # rows deleted by position (0: not known)

    @classmethod
    def of(cls, table: TableMetadata | None, partitioned: bool = False) -> ViewFiles | None:
        """None: no table, or no snapshot."""
        current = table.current if table is not None else None
        return cls.of_summary(current.summary, partitioned) if current is not None else None

    @classmethod
    def of_summary(cls, summary: Mapping[str, str], partitioned: bool = False) -> ViewFiles | None:
        """From a snapshot's summary (its totals; None when it has none)."""
        if any(key not in summary for key in TOTALS):
            return None
        data_files, delete_files, size = (int(summary[key] or 0) for key in TOTALS)
        records, deleted = (int(summary.get(key) or 0) for key in ROW_TOTALS)
        return cls(data_files, delete_files, size, partitioned, records, deleted)

    @property
    def rewritten_files(self) -> int:
        """The data files a rewrite of the view leaves (one per COMPACT_FILE_BYTES)."""
        return max(1, -(-self.bytes // COMPACT_FILE_BYTES))

    @property
    def data_files_over(self) -> int:
        """Its data files beyond rewritten_files (0 when partitioned: each partition has files of its own)."""
        return 0 if self.partitioned else max(0, self.data_files - self.rewritten_files)

    @property
    def extra_files(self) -> int:
        """The files a scan opens beyond those: its delete files and its data_files_over."""
        return self.delete_files + self.data_files_over

    @property
    def extra_files_due(self) -> int:
        """The extra files at which it is due (fewer for a small view: the comment above)."""
        due = COMPACT_EXTRA_FILES + COMPACT_EXTRA_PER_FILE * self.rewritten_files
        return min(due, COMPACT_SMALL_VIEW_EXTRA_FILES) if self.bytes <= COMPACT_SMALL_VIEW_BYTES else due

    @property
    def small_file_bytes(self) -> int:
        """Data files under this many bytes are small: what a refresh's INSERT adds, not what a
        build writes (a sixteenth of the view, at least COMPACT_TINY_FILE_BYTES, at most
        COMPACT_SMALL_FILE_BYTES; a build writes a few files of a view under 64 MB: 2-3 of a 3 MB
        one, 8 of a 54 MB one)."""
        return min(COMPACT_SMALL_FILE_BYTES, max(COMPACT_TINY_FILE_BYTES, self.bytes // 16))

    @property
    def deleted_share(self) -> float:
        """The share of the rows in its data files deleted (0: not known)."""
        return self.deleted / self.records if self.records else 0.0

    @property
    def judged_by_deleted_rows(self) -> bool:
        """Whether its deleted rows can make it due: a view of more than one file (in one, the rows
        a scan reads and drops cost less than the job the scan is)."""
        return self.rewritten_files > 1

    @property
    def deleted_rows_due(self) -> bool:
        """Too many of its rows deleted (COMPACT_DELETED_SHARE, where judged_by_deleted_rows)."""
        return self.judged_by_deleted_rows and self.deleted > 0 and self.deleted_share >= COMPACT_DELETED_SHARE

    @property
    def compaction_due(self) -> bool:
        """Too many extra files for the view's size, or too many deleted rows (the thresholds above)."""
        return self.extra_files >= self.extra_files_due or self.deleted_rows_due

    @property
    def due_at(self) -> str:
        """When it is due, in words (explain)."""
        files = (
            f"{self.extra_files_due:,} delete files"
            if self.partitioned
            else f"{self.extra_files_due:,} files beyond the {self.rewritten_files:,} data files a rewrite leaves"
        )
        deleted = f", or {COMPACT_DELETED_SHARE:.0%} of its rows deleted" if self.judged_by_deleted_rows else ""
        return f"{files} (now {self.extra_files:,}){deleted}"

    def describe(self) -> str:
        return f"{self.data_files:,} data files and {self.delete_files:,} delete files, {self.bytes / 1024**2:,.1f} MB"


def _nested(column_types: Sequence[str]) -> bool:
    """Whether a table of these Spark column types has an ARRAY or MAP column (compaction_statements)."""
    return any(t.lower().startswith(("array", "map")) for t in column_types)


class CompactionKind(StrEnum):
    """What a compaction rewrites (compaction_kind decides)."""

    DELETE_FILES = "delete files"
    """The position delete files merged, at most one per data file; the data files stay as they are."""
    DATA_FILES = "data files"
    """The data files with deletes and the small ones rewritten with their deletes applied, sorted."""
    SMALL_FILES = "small data files"
    """The small data files (ViewFiles.small_file_bytes: those the refreshes added) rewritten into
    one, sorted, with their deletes applied; the others stay as they are, their delete files too."""


def compaction_kind(files: ViewFiles, format_version: int | None, column_types: Sequence[str] = ()) -> CompactionKind:
    """What a compaction of ``files`` rewrites. A DELETE writes the position deletes each of its scan
    tasks finds as a file of their own (plan.py: no shuffle by data file), so a refresh of scattered
    keys leaves delete files by the dozen or hundred against a few data files (TPC-H scale factor 1:
    an indexed join state of 6 data files had 325 after one refresh, and its compaction, every data
    file sorted again, took 40-44 s of a 70 s refresh). Merged into one per data file, a scan opens
    as few files as before the refreshes (a 124 MB table: its full scan 1.96 s before, 3.21 s after
    three such DELETEs, 1.87 s once merged in 1.6 s; 1.28 s with its data rewritten in 9.6 s). So
    the delete files are merged where that leaves it at most half the extra files that make it due
    (ViewFiles.compaction_due: a few data files and many delete files) and not many of its rows
    deleted; the data files are rewritten otherwise (many small data files: a merge would leave it
    due again after a few refreshes, and a scan opening them all), when it is not due
    (a compaction asked for by hand), on format 3 (a deletion vector per data file already) and
    for a table with ARRAY or MAP columns (whose delete files Iceberg 1.10 cannot rewrite, see
    compaction_statements).

    Where small data files are most of the extra files (as a refresh's INSERT leaves one or two
    each time), only they are rewritten: a data file with deletes is rewritten with every row it
    holds, and a small refresh deletes a few rows from every file of a small view, so rewriting
    those rewrote the whole view at each compaction (a 54 MB view: 22 s, sorted, every 15 refreshes
    of 100 rows; 0.4 s to rewrite its small files alone, ``benchmarks/view_reads.py``). Its
    deleted rows stay deleted by position until COMPACT_DELETED_SHARE of them are (then the data
    files are rewritten, whatever the view's size). A compaction of the small files that leaves
    the view due (files under small_file_bytes that a build wrote, say) rewrites the data files
    after it (Compaction.if_still_due)."""
    if (format_version is not None and format_version >= 3) or _nested(column_types) or not files.compaction_due:
        return CompactionKind.DATA_FILES
    if files.deleted_rows_due or files.deleted_share >= COMPACT_DELETED_SHARE:
        return CompactionKind.DATA_FILES
    if files.data_files_over > files.delete_files:
        return CompactionKind.SMALL_FILES
    merged = files.data_files_over + min(files.delete_files, files.data_files)
    return CompactionKind.DELETE_FILES if 2 * merged <= files.extra_files_due else CompactionKind.DATA_FILES


# every data file with a delete, and the small ones (Iceberg's default takes every file under 384 MB,
# which rewrote a whole view of 100 MB files to apply one delete: the compaction follows the change)
COMPACTION_OPTIONS = {
    "delete-file-threshold": "1",
    "min-file-size-bytes": str(COMPACT_SMALL_FILE_BYTES),
    "remove-dangling-deletes": "true",
    # files of about a build's size, not Iceberg's 512 MB: a DELETE by key keeps planning few bytes
    "target-file-size-bytes": str(COMPACT_FILE_BYTES),
}
# the small files only (CompactionKind.SMALL_FILES): no file for its deletes, two small files make a
# group worth rewriting (Iceberg's default wants five)
SMALL_FILES_OPTIONS = {
    "delete-file-threshold": str(2**31 - 1),
    "delete-ratio-threshold": "1.0",
    "min-input-files": "2",
}


def compaction_statements(
    view_relation: str,
    format_version: int | None,
    column_types: Sequence[str] = (),
    sort_by: Sequence[str] = (),
    kind: CompactionKind = CompactionKind.DATA_FILES,
    small_file_bytes: int = COMPACT_SMALL_FILE_BYTES,
) -> list[str]:
    """Iceberg's compaction of a view. ``CompactionKind.DELETE_FILES``: its position delete files
    merged (rewrite_position_delete_files, every one, dangling ones dropped). ``SMALL_FILES``: its
    data files under ``small_file_bytes`` rewritten (sorted by ``sort_by``), none for its deletes
    (Iceberg's thresholds of delete files and deleted rows per file set past any). ``DATA_FILES``: its
    data files rewritten with their deletes applied (every
    file with a delete file, and those under COMPACT_SMALL_FILE_BYTES, binpacked; sorted by
    ``sort_by``, the columns its build sorted it by (written_sort), so that the rewritten files keep
    ranges of the key its refreshes look up); on format 2, the position delete files left pointing
    at the rewritten files dropped (rewrite_data_files keeps some of them, which
    no longer apply but stay in the view's totals). Iceberg 1.10 fails to rewrite position delete
    files of a table with ARRAY or MAP columns (``column_types``: its Spark types; "Invalid partition
    field parent", apache/iceberg#14619): such a view has every data file rewritten instead, which
    leaves every delete file dangling, and so dropped. A refresh reads its view's state through
    such ``replace`` commits (refresh/state/view_state.py)."""
    table = string(relation(view_relation))
    if kind is CompactionKind.DELETE_FILES:
        return [f"call system.rewrite_position_delete_files(table => {table}, options => map('rewrite-all', 'true'))"]
    nested = _nested(column_types)
    options = {**COMPACTION_OPTIONS, **({"rewrite-all": "true"} if nested else {})}
    if kind is CompactionKind.SMALL_FILES:
        options.update({**SMALL_FILES_OPTIONS, "min-file-size-bytes": str(small_file_bytes)})
    listed = ", ".join(f"{string(k)}, {string(v)}" for k, v in sorted(options.items()))
    order = ", ".join(f"{ident(c)} ASC NULLS FIRST" for c in sort_by)
    sort = f"strategy => 'sort', sort_order => {string(order)}, " if sort_by else ""
    statements = [f"call system.rewrite_data_files(table => {table}, {sort}options => map({listed}))"]
    if kind is CompactionKind.DATA_FILES and (format_version is None or format_version < 3) and not nested:
        statements.append(
            f"call system.rewrite_position_delete_files(table => {table}, options => map('rewrite-all', 'true'))"
        )
    return statements
