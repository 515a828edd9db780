"""The metadata seam: every read of a table's metadata, and every commit that only moves refs.

A refresh needs much metadata (columns, properties, snapshots with their summaries, where the
main branch is) and little data. Metadata is not data: it should not cost a Spark job. Two
catalogs answer the same questions:

- :class:`JvmCatalog` (``method: session``): Iceberg's Java API through py4j, in the session's
  own JVM. One call returns a table's whole metadata (its ``TableMetadata`` as JSON): no SQL
  statement, no Spark job, tens of milliseconds. Ref moves (fast-forwarding ``main`` to a staged
  or branch snapshot) are compare-and-swap commits of the table metadata, atomic with the
  bookkeeping properties they carry.
- :class:`SqlCatalog` (thrift, http, odbc): the same answers through SQL (``describe``,
  ``show tblproperties``, the ``snapshots`` and ``refs`` metadata tables), one table's metadata
  in three statements; ref moves as branch statements.

In session mode the seam also stages the data files that changed between two snapshots of a
master as Iceberg scan task sets (:meth:`Metadata.changed_files`), so that capture reads those
files and no other: finding them reads the commits' manifests, not data.

:class:`Metadata` caches what a refresh has read, so nothing is read twice; whatever writes a
table calls :meth:`Metadata.forget` for it.
"""

from __future__ import annotations

import datetime
import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from dbt_incremental_mv.conflicts import LOST_RACE, lost_race
from dbt_incremental_mv.sql_text import ident, integer, relation, string

Query = Callable[[str], Sequence[Sequence[Any]]]
Execute = Callable[[str], None]

logger = logging.getLogger(__name__)

# Snapshot summary keys read in SQL mode (thrift returns maps as text: selected key by key).
SUMMARY_KEYS = (
    "wap.id",
    "added-records",
    "deleted-records",
    "added-position-deletes",
    "removed-position-deletes",
    "added-equality-deletes",
    "removed-equality-deletes",
    "added-delete-files",
    "total-delete-files",
    "total-records",
    "total-data-files",
    "total-files-size",
    "total-position-deletes",
    "added-files-size",
    "removed-files-size",
)


class LostRace(RuntimeError):
    """A compare-and-swap commit found the table changed since it was read: nothing was applied."""

    lost_race = True  # recognised by conflicts.lost_race


class MetadataContention(LostRace):
    """A metadata commit refused only because another commit to the table came first."""


def _java_error(exc: BaseException) -> str:
    """The Java exception's line of a py4j error (its first line names only the call)."""
    lines = [line.strip(" :") for line in str(exc).splitlines() if "Exception" in line]
    return (lines[0] if lines else str(exc).strip().splitlines()[0])[:300]


# A metadata-only commit (a branch made, moved or dropped) refused because another commit to the
# same table landed first is made again on the new metadata, this many times in all. Iceberg's
# ManageSnapshots does not retry by itself: its operation keeps the metadata it was created on,
# and every retry of its transaction fails with "Table metadata refresh is required".
METADATA_COMMIT_ATTEMPTS = 6


def metadata_contention(exc: BaseException) -> bool:
    """Whether ``exc`` is Iceberg refusing a metadata commit only because another commit to the
    table came first (not a refused validation: a fast-forward whose target is no longer a
    descendant of main fails with IllegalArgumentException and stays lost)."""
    return isinstance(exc, MetadataContention) or "CommitFailedException" in str(exc)


def retried_metadata_commit(commit: Callable[[], None], what: str) -> None:
    """Run ``commit`` (one metadata-only commit) again while it loses to unrelated concurrent
    commits, with a short random pause; the last refusal is raised."""
    for attempt in range(1, METADATA_COMMIT_ATTEMPTS + 1):
        try:
            commit()
            return
        except Exception as exc:  # noqa: BLE001 - py4j or the connection wraps the Java exception
            if attempt == METADATA_COMMIT_ATTEMPTS or not metadata_contention(exc):
                raise
            logger.debug("%s: concurrent metadata commit, attempt %d of %d", what, attempt, METADATA_COMMIT_ATTEMPTS)
            time.sleep(random.uniform(0.05, 0.1 * 2 ** attempt))


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: int
    parent_id: int | None
    operation: str
    summary: Mapping[str, str] = field(default_factory=dict)
    sequence_number: int | None = None  # None when read through SQL (not in the snapshots table)
    schema_id: int | None = None  # the schema the snapshot was written with (None through SQL)

    def count(self, key: str) -> int:
        value = self.summary.get(key)
        return int(value) if value not in (None, "") else 0


@dataclass(frozen=True)
class TableMetadata:
    """What a refresh reads of one table, all at once."""

    name: str
    columns: tuple[tuple[str, str], ...]  # (lowercase name, Spark type) in table order
    properties: Mapping[str, str]
    snapshots: Mapping[int, Snapshot]
    main: int | None  # the snapshot the main branch is at (None: no snapshot yet)
    # the other branches and where they are (read through the Java API only: empty over SQL)
    branches: Mapping[str, int] = field(default_factory=dict)

    @property
    def format_version(self) -> int | None:
        value = self.properties.get("format-version")
        try:
            return int(value) if value is not None else None
        except ValueError:
            return None

    @property
    def current(self) -> Snapshot | None:
        return self.snapshots.get(self.main) if self.main is not None else None

    def ancestry(self, start: int | None = None) -> list[Snapshot]:
        """The ancestors of ``start`` (default: main), newest first, as far as they are known."""
        chain = []
        cursor = self.main if start is None else start
        while cursor is not None and cursor in self.snapshots:
            chain.append(self.snapshots[cursor])
            cursor = self.snapshots[cursor].parent_id
        return chain

    def commits_since(self, recorded: int | None) -> list[Snapshot] | None:
        """The commits on main after ``recorded``, oldest first; None when ``recorded`` is not an
        ancestor of main (the table was recreated, rolled back, or its history expired)."""
        parents = {s.snapshot_id: s.parent_id for s in self.snapshots.values()}
        chain = commits_since(recorded, self.main, parents)
        return None if chain is None else [self.snapshots[c] for c in chain]


def commits_since(recorded: int | None, current: int | None, parents: Mapping[int, int | None]) -> list[int] | None:
    """The log's commits after ``recorded`` up to ``current``, oldest first; None when
    ``recorded`` is not an ancestor of ``current`` (recreated, rolled back or expired history)."""
    chain: list[int] = []
    cursor = current
    while cursor is not None and cursor != recorded:
        if cursor not in parents:
            return None
        chain.append(cursor)
        cursor = parents[cursor]
    if cursor != recorded:
        return None
    return list(reversed(chain))


# ---------------------------------------------------------------- Iceberg types as Spark names


_PRIMITIVES = {
    "boolean": "boolean",
    "int": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "date": "date",
    "timestamp": "timestamp_ntz",
    "timestamptz": "timestamp",
    "timestamp_ns": "timestamp_ntz",
    "timestamptz_ns": "timestamp",
    "string": "string",
    "uuid": "string",
    "binary": "binary",
    "time": "bigint",
}


def spark_type(iceberg_type: Any) -> str:
    """An Iceberg schema type (its JSON form) as Spark's ``describe`` names it."""
    if isinstance(iceberg_type, str):
        name = iceberg_type.strip().lower()
        if name.startswith("decimal"):
            return name.replace(" ", "")
        if name.startswith("fixed"):
            return "binary"
        return _PRIMITIVES.get(name, name)
    kind = iceberg_type.get("type")
    if kind == "struct":
        fields = ",".join(f"{f['name']}:{spark_type(f['type'])}" for f in iceberg_type["fields"])
        return f"struct<{fields}>"
    if kind == "list":
        return f"array<{spark_type(iceberg_type['element'])}>"
    if kind == "map":
        return f"map<{spark_type(iceberg_type['key'])},{spark_type(iceberg_type['value'])}>"
    raise ValueError(f"unknown Iceberg type {iceberg_type!r}")


def from_metadata_json(name: str, document: Mapping[str, Any]) -> TableMetadata:
    """A :class:`TableMetadata` from Iceberg's table metadata JSON (``TableMetadataParser``)."""
    schema_id = document.get("current-schema-id")
    schemas = document.get("schemas") or ([document["schema"]] if "schema" in document else [])
    schema = next((s for s in schemas if s.get("schema-id") == schema_id), schemas[-1] if schemas else {"fields": []})
    columns = tuple((f["name"].lower(), spark_type(f["type"])) for f in schema.get("fields", []))
    properties = {str(k): str(v) for k, v in (document.get("properties") or {}).items()}
    properties["format-version"] = str(document.get("format-version"))
    snapshots = {}
    for entry in document.get("snapshots") or []:
        summary = {str(k): str(v) for k, v in (entry.get("summary") or {}).items()}
        snapshots[int(entry["snapshot-id"])] = Snapshot(
            snapshot_id=int(entry["snapshot-id"]),
            parent_id=None if entry.get("parent-snapshot-id") is None else int(entry["parent-snapshot-id"]),
            operation=summary.get("operation", ""),
            summary=summary,
            sequence_number=entry.get("sequence-number"),
            schema_id=entry.get("schema-id"),
        )
    refs = document.get("refs") or {}
    main = refs.get("main", {}).get("snapshot-id")
    if main is None and document.get("current-snapshot-id") not in (None, -1):
        main = document["current-snapshot-id"]
    branches = {
        str(ref): int(entry["snapshot-id"]) for ref, entry in refs.items()
        if ref != "main" and entry.get("type", "branch") == "branch" and entry.get("snapshot-id") is not None
    }
    return TableMetadata(name, columns, properties, snapshots, None if main is None else int(main), branches)


# ---------------------------------------------------------------- catalogs


@dataclass(frozen=True)
class DataFile:
    """A live data file of a table, as its manifests describe it."""

    path: str
    sequence: int | None  # its data sequence number: every row in it was written at or before it
    upper_bound: str | None = None  # of the column asked for (None: not asked, or no bound kept)


# Iceberg types whose bounds a refresh turns into SQL range filters (integers, strings, dates):
# comparisons Spark pushes down to Iceberg's file pruning unchanged (no cast of the column)
BOUNDED_TYPES = ("INTEGER", "LONG", "STRING", "DATE")
EPOCH = datetime.date(1970, 1, 1)

Bound = int | str | datetime.date


@dataclass(frozen=True)
class WrittenSince:
    """The data files of a table snapshot written after a sequence number (a log's rows a view
    has not consumed): their records, and the range of values each column holds in them."""

    records: int
    bounds: dict[str, tuple[Bound, Bound]]


@dataclass(frozen=True)
class ChangedFiles:
    """The data files of a table that differ between two snapshots, staged to be read once:
    temp views over the rows live at the start snapshot in the files gone since (or whose
    delete files changed), and over the rows live at the end snapshot in the files new since
    (or with other delete files). None: no such file.

    ``lineage_since``: the start snapshot's sequence number when every staged row has a row
    lineage (an Iceberg v3 table whose files all have a first row id): a row of the new files
    is then new since the start when its ``_last_updated_sequence_number`` is above it, and a
    row of the old files is gone (deleted, or updated) when no row of the new files at or below
    it carries its ``_row_id``. None: rows are compared by value."""

    removed_view: str | None
    added_view: str | None
    removed_files: int
    added_files: int
    # the new side's files that can hold rows new since the start, read for after images: all
    # of it, but with lineage only the files written since (merge-on-read: a file whose deletes
    # changed is on the new side for the ids of the rows it keeps, which need none of its columns)
    written_view: str | None
    written_files: int
    lineage_since: int | None = None
    # with lineage, from the files' statistics: at most how many rows of the old side are gone
    # (deleted or updated) since the start (None: not known)
    rows_gone_at_most: int | None = None

    def describe(self) -> str:
        if self.lineage_since is None:
            return f"{self.removed_files} removed and {self.added_files} added data file(s) read once, rows compared by value"
        kept = self.added_files - self.written_files
        ids_only = f" ({kept} of them for their row ids only)" if kept else ""
        return (
            f"{self.removed_files} removed and {self.added_files} added data file(s){ids_only} read once, "
            "rows told apart by row lineage"
        )

    @property
    def views(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v for v in (self.removed_view, self.added_view, self.written_view) if v is not None))


class SqlCatalog:
    """Metadata through SQL statements: works over every connection method."""

    def __init__(self, query: Query, execute: Execute) -> None:
        self.query = query
        self.execute = execute

    def load(self, name: str, columns: Sequence[tuple[str, str]] | None = None) -> TableMetadata | None:
        if columns is None:
            columns = self.columns(name)
        if not columns:
            return None
        properties = {
            str(row[0]): str(row[-1]) for row in self.query(f"show tblproperties {relation(name)}") if row and row[0] is not None
        }
        keys = ", ".join(f"s.summary[{string(k)}]" for k in SUMMARY_KEYS)
        table = relation(name)
        rows = self.query(
            f"select s.snapshot_id, s.parent_id, s.operation, {keys}, r.snapshot_id as main_snapshot_id\n"
            f"from {table}.`snapshots` s cross join (select snapshot_id from {table}.`refs` where name = 'main') r"
        )
        snapshots = {}
        for row in rows:
            summary = {k: str(v) for k, v in zip(SUMMARY_KEYS, row[3:-1]) if v is not None}
            parent = None if row[1] is None else int(row[1])
            snapshots[int(row[0])] = Snapshot(int(row[0]), parent, str(row[2]), {"operation": str(row[2]), **summary})
        main = int(rows[0][-1]) if rows else None
        return TableMetadata(name, tuple(columns), properties, snapshots, main)

    def mains(self, names: Sequence[str]) -> dict[str, int]:
        """Where main is, for several tables in one statement (tables without a snapshot are left out)."""
        parts = [
            f"select {string(name)} as relation_name, snapshot_id from {relation(name)}.`refs` where name = 'main'"
            for name in names
        ]
        return {str(r[0]): int(r[1]) for r in self.query("\nunion all\n".join(parts))}

    def columns(self, name: str) -> list[tuple[str, str]]:
        try:
            rows = self.query(f"describe table {relation(name)}")
        except Exception as exc:  # noqa: BLE001 - the table is missing or unreadable
            if "TABLE_OR_VIEW_NOT_FOUND" in str(exc) or "not found" in str(exc).lower():
                return []
            raise
        columns = []
        for col_name, data_type, *_ in rows:
            if not col_name or col_name.startswith("#"):
                break
            columns.append((col_name.lower(), data_type))
        return columns

    def fast_forward(
        self, name: str, expected_main: int | None, *, to_snapshot: int | None = None, branch: str | None = None,
        properties: Mapping[str, str] | None = None, drop_branches: Sequence[str] = (),
    ) -> None:
        """Move main to ``to_snapshot`` (a staged snapshot) or to the head of ``branch`` (then
        dropped). Iceberg's fast_forward fails unless main is an ancestor of the target, so main
        must still be at ``expected_main``, an ancestor of the target. ``properties`` are not
        written over SQL: the readers of these bookkeeping properties then read the log's rows
        instead. ``drop_branches`` are dropped after the move (over SQL, not in the same commit)."""
        table = relation(name)
        if branch is None:
            assert to_snapshot is not None
            branch = f"mv_publish_{to_snapshot}"
            self.create_branch(name, branch, to_snapshot)
        move = f"call spark_catalog.system.fast_forward({string(name)}, 'main', {string(branch)})"
        try:  # Iceberg checks again on each attempt that main is an ancestor of the target
            retried_metadata_commit(lambda: self.execute(move), move)
        except Exception as exc:
            if lost_race(exc):
                raise LostRace(str(exc)) from exc
            raise
        finally:
            for dropped in (branch, *drop_branches):
                self.drop_branch(name, dropped)

    def branch_head(self, name: str, branch: str) -> int | None:
        rows = self.query(f"select snapshot_id from {relation(name)}.`refs` where name = {string(branch)}")
        return int(rows[0][0]) if rows else None

    def create_branch(self, name: str, branch: str, snapshot: int) -> None:
        create = f"alter table {relation(name)} create branch {ident(branch)} as of version {integer(snapshot)}"
        retried_metadata_commit(lambda: self.execute(create), create)

    def drop_branch(self, name: str, branch: str) -> None:
        """Drop a capture's or publish's branch; one left behind by a lost race is harmless."""
        drop = f"alter table {relation(name)} drop branch if exists {ident(branch)}"
        try:
            retried_metadata_commit(lambda: self.execute(drop), drop)
        except Exception as exc:
            if not lost_race(exc):
                raise

    def drop_temp_view(self, view: str) -> None:
        self.execute(f"drop view if exists {ident(view)}")

    def reset_staging(self) -> None:
        self.execute("reset spark.wap.id")


# Parsed table metadata by (table, metadata file, table uuid): never stale, metadata files are immutable.
_parsed: dict[tuple[str, str, str], TableMetadata] = {}
_parsed_lock = threading.Lock()
PARSED_KEPT = 256


class JvmCatalog:
    """Metadata through Iceberg's Java API in the embedded session's JVM (no SQL, no Spark job)."""

    def __init__(self, session: Any, on_commit: Callable[[str], None] | None = None) -> None:
        self.session = session
        self.on_commit = on_commit or (lambda description: None)
        self._staged: dict[str, Any] = {}  # staged scan task set (= its temp view) -> its table

    def _table(self, name: str) -> Any | None:
        jvm = self.session._jvm
        # Iceberg resolves the catalog through the thread's active session: a dbt worker thread
        # has none, and would look in a catalog that does not know the table
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(self.session._jsparkSession)
        try:
            return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(self.session._jsparkSession, name)
        except Exception as exc:  # noqa: BLE001 - py4j wraps the Java exception
            text = str(exc)
            if "NoSuchTableException" in text or "cannot be found" in text:
                return None
            raise

    def load(self, name: str, columns: Sequence[tuple[str, str]] | None = None) -> TableMetadata | None:
        table = self._table(name)
        if table is None:
            return None
        current = table.operations().current()
        # A metadata file never changes once written, but a Hadoop catalog names them v1, v2, ...
        # per table: a table dropped and created again reuses the names. Its uuid tells them apart.
        key = (name, str(current.metadataFileLocation()), str(current.uuid()))
        with _parsed_lock:
            parsed = _parsed.get(key)
        if parsed is None:
            document = json.loads(self.session._jvm.org.apache.iceberg.TableMetadataParser.toJson(current))
            parsed = from_metadata_json(name, document)
            with _parsed_lock:
                if len(_parsed) >= PARSED_KEPT:
                    _parsed.pop(next(iter(_parsed)))
                _parsed[key] = parsed
        return parsed

    def fast_forward(
        self, name: str, expected_main: int | None, *, to_snapshot: int | None = None, branch: str | None = None,
        properties: Mapping[str, str] | None = None, drop_branches: Sequence[str] = (),
    ) -> None:
        """Move main to ``to_snapshot`` (a staged snapshot) or to the head of ``branch`` (and drop
        the branch and ``drop_branches``), and set ``properties``, in ONE compare-and-swap commit
        of the table metadata: refused (LostRace) unless main is still at ``expected_main``."""
        target = branch or f"mv_publish_{to_snapshot}"
        description = f"call spark_catalog.system.fast_forward({string(name)}, 'main', {string(target)}) [metadata commit]"
        # made again while main is still where expected but another metadata commit came first
        retried_metadata_commit(
            lambda: self._fast_forward(name, expected_main, to_snapshot, branch, properties, drop_branches), description,
        )
        logger.debug("%s", description)
        self.on_commit(description)

    def _fast_forward(
        self, name: str, expected_main: int | None, to_snapshot: int | None, branch: str | None,
        properties: Mapping[str, str] | None, drop_branches: Sequence[str],
    ) -> None:
        table = self._table(name)
        if table is None:
            raise LostRace(f"{name} no longer exists")
        operations = table.operations()
        base = operations.current()
        main = base.ref("main")
        current = None if main is None else int(main.snapshotId())
        if current != expected_main:
            raise LostRace(f"main of {name} is at {current}, not at {expected_main}: another commit {LOST_RACE}")
        builder = self.session._jvm.org.apache.iceberg.TableMetadata.buildFrom(base)
        if branch is not None:
            head = base.ref(branch)
            if head is None:
                raise LostRace(f"the branch {branch} of {name} is gone: another commit {LOST_RACE}")
            to_snapshot = int(head.snapshotId())
            builder = builder.removeRef(branch)
        for dropped in drop_branches:
            if base.ref(dropped) is not None:
                builder = builder.removeRef(dropped)
        builder = builder.setBranchSnapshot(to_snapshot, "main")
        if properties:
            values = self.session._jvm.java.util.HashMap()
            for key, value in properties.items():
                values.put(key, value)
            builder = builder.setProperties(values)
        try:
            operations.commit(base, builder.build())
        except Exception as exc:  # noqa: BLE001 - py4j wraps the Java exception
            if metadata_contention(exc):
                raise MetadataContention(f"another commit to {name} came first: {LOST_RACE} ({_java_error(exc)})") from exc
            raise

    def written_since(
        self, name: str, snapshot: int, columns: Sequence[str], after_sequence: int
    ) -> WrittenSince | None:
        """The records of the data files of ``snapshot`` written after sequence
        ``after_sequence``, and the range of values each of ``columns`` holds in them, from the
        files' statistics (a scan plan: manifests only, no data read). A column is left out when
        a file has no bounds for it (statistics off, or a type not in BOUNDED_TYPES)."""
        table = self._table(name)
        if table is None:
            return None
        jvm = self.session._jvm
        at = table.snapshot(snapshot)
        schema = table.schemas().get(at.schemaId()) if at is not None else None
        fields = {}
        for column in columns:
            found = schema.caseInsensitiveFindField(column) if schema is not None else None
            if found is not None and str(found.type().typeId()) in BOUNDED_TYPES:
                fields[column] = found
        lows: dict[str, Any] = {}
        highs: dict[str, Any] = {}
        records = 0
        with closing(_planned_files(table.newScan().useSnapshot(snapshot).includeColumnStats())) as files:
            for data_file in files:
                written = data_file.dataSequenceNumber()
                if written is not None and int(written) <= after_sequence:
                    continue  # every row in it was written at or before that sequence
                records += int(data_file.recordCount())
                if not fields:
                    continue
                lowers, uppers = data_file.lowerBounds(), data_file.upperBounds()
                values, nulls = data_file.valueCounts(), data_file.nullValueCounts()
                for column, found in list(fields.items()):
                    field_id = found.fieldId()
                    count = values.get(field_id) if values is not None else None
                    none = nulls.get(field_id) if nulls is not None else None
                    if count is not None and none is not None and int(count) == int(none):
                        continue  # only NULLs here, which match no key
                    lower = lowers.get(field_id) if lowers is not None else None
                    upper = uppers.get(field_id) if uppers is not None else None
                    if lower is None or upper is None:
                        del fields[column]
                        continue
                    low = _bound(jvm, found, lower)
                    high = _bound(jvm, found, upper)
                    lows[column] = low if column not in lows else min(lows[column], low)
                    highs[column] = high if column not in highs else max(highs[column], high)
        return WrittenSince(records, {c: (lows[c], highs[c]) for c in fields if c in lows})

    def branch_head(self, name: str, branch: str) -> int | None:
        table = self._table(name)
        ref = table.refs().get(branch) if table is not None else None
        return int(ref.snapshotId()) if ref is not None else None

    def create_branch(self, name: str, branch: str, snapshot: int) -> None:
        def create() -> None:
            self._table(name).manageSnapshots().createBranch(branch, snapshot).commit()

        retried_metadata_commit(create, f"create branch {branch} on {name}")
        self.on_commit(f"create branch {branch} on {name}")

    def drop_branch(self, name: str, branch: str) -> None:
        table = self._table(name)
        if table is None or table.refs().get(branch) is None:
            return
        try:
            table.manageSnapshots().removeBranch(branch).commit()
        except Exception as exc:  # noqa: BLE001 - a concurrent removal; harmless
            logger.debug("branch %s of %s left behind: %s", branch, name, exc)

    def scan_size(self, name: str, snapshot: int | None, range_filter: tuple) -> int | None:
        """Bytes a scan filtered by ``range_filter`` reads: planned by Iceberg with a split size so
        large that its tasks come back as one or two groups, summed in the JVM (two py4j calls, not
        a few per file)."""
        table = self._table(name)
        if table is None:
            return None
        jvm = self.session._jvm
        expression = _iceberg_filter(jvm.org.apache.iceberg.expressions.Expressions, range_filter)
        scan = table.newScan().caseSensitive(False)
        if snapshot is not None:
            scan = scan.useSnapshot(snapshot)
        scan = (
            scan.filter(expression)
            .option("read.split.target-size", str(1 << 60))
            .option("read.split.planning-lookback", "1")
            .option("read.split.open-file-cost", "0")
        )
        total = 0
        groups = scan.planTasks()
        try:
            for group in _iterate(groups):
                total += int(group.sizeBytes())
        finally:
            groups.close()
        return total

    def data_files(self, name: str, upper_bound_of: str | None = None) -> list[DataFile]:
        """The live data files of ``name`` (a scan plan: manifests only, no data read), each with
        its data sequence number and the upper bound of column ``upper_bound_of``."""
        table = self._table(name)
        if table is None or table.currentSnapshot() is None:
            return []
        jvm = self.session._jvm
        column = table.schema().findField(upper_bound_of) if upper_bound_of else None
        found = []
        scan = table.newScan()
        for data_file in _planned_files(scan.includeColumnStats() if column is not None else scan):
            written = data_file.dataSequenceNumber()
            upper = None
            if column is not None:
                bounds = data_file.upperBounds()
                raw = bounds.get(column.fieldId()) if bounds is not None else None
                if raw is not None:
                    upper = str(jvm.org.apache.iceberg.types.Conversions.fromByteBuffer(column.type(), raw))
            found.append(DataFile(str(data_file.location()), None if written is None else int(written), upper))
        return found

    def delete_data_files(self, name: str, paths: Sequence[str]) -> None:
        """Remove whole data files in one commit that reads no data (Iceberg's DeleteFiles)."""
        table = self._table(name)
        delete = table.newDelete()
        for path in paths:
            # a CharSequence that is not a String: py4j would pick the protected
            # SnapshotProducer.deleteFile(String), which deletes the file from storage at once
            delete.deleteFile(self.session._jvm.java.lang.StringBuilder(path))
        delete.commit()
        self.on_commit(f"delete {len(paths)} data files of {name} [metadata commit]")

    def stage_changed_files(self, name: str, start: int, end: int) -> ChangedFiles | None:
        """Stage the data files of ``name`` that differ between snapshots ``start`` and ``end``
        as scan task sets, read through temp views the way Iceberg's ``rewrite_data_files``
        reads its file groups (``scan-task-set-id``). None when a snapshot is gone or the
        table's schema is not the one both were written with (staged files are read with the
        table's current schema).

        Without delete files (copy-on-write history) the changed files are the ones the commits
        in between added and removed (their own manifests: work proportional to the change).
        With delete files, a data file also changed when the deletes applied to it did: both
        snapshots are planned (every live file's task: a few py4j round trips each)."""
        table = self._table(name)
        if table is None:
            return None
        old, new = table.snapshot(start), table.snapshot(end)
        current = int(table.schema().schemaId())
        if old is None or new is None or {_schema_id(old), _schema_id(new)} != {current}:
            return None
        commits = _commits_between(table, start, end)
        if commits is not None and not any(_has_delete_files(s) for s in (old, new, *commits)):
            removed, added = self._files_changed_by(table, commits)
        else:
            before, after = _scan_tasks(table, start), _scan_tasks(table, end)
            removed = [task for path, (deletes, task) in before.items() if path not in after or after[path][0] != deletes]
            added = [task for path, (deletes, task) in after.items() if path not in before or before[path][0] != deletes]
        lineage_since = rows_gone = None
        written: list[Any] = added
        if _format_version(table) >= 3 and all(_first_row_id(task) is not None for task in (*removed, *added)):
            lineage_since = int(old.sequenceNumber())
            written = [task for task in added if _written_after(task, lineage_since)]
            rows_gone = _rows_gone_at_most(table, commits) if commits is not None else None
        token = uuid.uuid4().hex[:16]
        changed = ChangedFiles(None, None, len(removed), len(added), None, len(written), lineage_since, rows_gone)
        try:
            changed = replace(changed, removed_view=self._stage(table, f"mv_files_removed_{token}", removed))
            changed = replace(changed, added_view=self._stage(table, f"mv_files_added_{token}", added))
            changed = replace(changed, written_view=(
                self._stage(table, f"mv_files_written_{token}", written) if len(written) < len(added) else changed.added_view
            ))
        except Exception:
            self.unstage_changed_files(changed)
            raise
        return changed

    def stage_appended_files(self, name: str, snapshot: int) -> ChangedFiles | None:
        """Stage the data files the append commit ``snapshot`` added: exactly the rows it inserted
        (no delete file of an earlier commit applies to a newer data file), read from the
        commit's own manifests. None: not an append, or not readable with the current schema."""
        table = self._table(name)
        if table is None:
            return None
        commit = table.snapshot(snapshot)
        if commit is None or str(commit.operation()) != "append" or _schema_id(commit) != int(table.schema().schemaId()):
            return None
        _, added = self._files_changed_by(table, [commit])
        view = self._stage(table, f"mv_files_appended_{uuid.uuid4().hex[:16]}", added) if added else None
        return ChangedFiles(None, view, 0, len(added), view, len(added))

    def _files_changed_by(self, table: Any, commits: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        """Scan tasks of the data files ``commits`` (oldest first, no delete files anywhere)
        removed that were live before them, and of those they added that are still live: read
        from each commit's own manifests, not from a plan of the whole table."""
        io = table.io()
        removed: dict[str, Any] = {}
        added: dict[str, Any] = {}
        for commit in commits:
            for data_file in _iterate(commit.removedDataFiles(io)):
                path = str(data_file.location())
                if added.pop(path, None) is None:  # added and removed in between: at neither end
                    removed[path] = data_file
            for data_file in _iterate(commit.addedDataFiles(io)):
                added[str(data_file.location())] = data_file
        iceberg = self.session._jvm.org.apache.iceberg
        schema = iceberg.SchemaParser.toJson(table.schema())
        residual = iceberg.expressions.ResidualEvaluator.unpartitioned(iceberg.expressions.Expressions.alwaysTrue())
        no_deletes = self.session.sparkContext._gateway.new_array(iceberg.DeleteFile, 0)
        specs: dict[int, str] = {}

        def task(data_file: Any) -> Any:
            spec_id = int(data_file.specId())
            if spec_id not in specs:
                specs[spec_id] = iceberg.PartitionSpecParser.toJson(table.specs().get(spec_id))
            return iceberg.BaseFileScanTask(data_file, no_deletes, schema, specs[spec_id], residual)

        return [task(f) for f in removed.values()], [task(f) for f in added.values()]

    def _stage(self, table: Any, view: str, tasks: Sequence[Any]) -> str | None:
        if not tasks:
            return None
        jvm = self.session._jvm
        staged = jvm.java.util.ArrayList()
        for task in tasks:
            staged.add(task)
        jvm.org.apache.iceberg.spark.ScanTaskSetManager.get().stageTasks(table, view, staged)
        self._table_cache().add(view, table)
        self._staged[view] = table
        self.session.read.format("iceberg").option("scan-task-set-id", view).load(view).createOrReplaceTempView(view)
        return view

    def unstage_changed_files(self, changed: ChangedFiles) -> None:
        for view in changed.views:
            table = self._staged.pop(view, None)
            if table is None:
                continue
            self.session.catalog.dropTempView(view)
            self.session._jvm.org.apache.iceberg.spark.ScanTaskSetManager.get().removeTasks(table, view)
            self._table_cache().remove(view)

    def _table_cache(self) -> Any:
        """Iceberg's SparkTableCache singleton. Its static ``get()`` is overloaded by an instance
        ``get(String)`` py4j cannot tell apart: called by reflection, with the context class
        loader (the Iceberg jar is not on the system class path)."""
        jvm = self.session._jvm
        gateway = self.session.sparkContext._gateway
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        cls = jvm.java.lang.Class.forName("org.apache.iceberg.spark.SparkTableCache", True, loader)
        getter = cls.getMethod("get", gateway.new_array(jvm.java.lang.Class, 0))
        return getter.invoke(None, gateway.new_array(jvm.java.lang.Object, 0))

    def drop_temp_view(self, view: str) -> None:
        self.session.catalog.dropTempView(view)

    def reset_staging(self) -> None:
        self.session.conf.unset("spark.wap.id")


def _planned_tasks(scan: Any) -> Iterator[Any]:
    """The file scan tasks a table scan plans (manifests only, no data read); its task list is
    closed when the iteration ends or is closed."""
    tasks = scan.planFiles()
    try:
        yield from _iterate(tasks)
    finally:
        tasks.close()


def _iceberg_filter(expressions: Any, range_filter: tuple) -> Any:
    """An Iceberg expression of a range filter (see refresh/cost.py): dates as ISO strings, which
    Iceberg binds to the column's type."""
    kind = range_filter[0]
    if kind == "range":
        _, column, low, high = range_filter
        low, high = (v.isoformat() if isinstance(v, datetime.date) else v for v in (low, high))
        # ``and`` and ``or`` are Python keywords: the static methods are looked up by name
        return getattr(expressions, "and")(
            expressions.greaterThanOrEqual(column, low), expressions.lessThanOrEqual(column, high)
        )
    parts = [_iceberg_filter(expressions, part) for part in range_filter[1]]
    combined = parts[0]
    for part in parts[1:]:
        combined = getattr(expressions, kind)(combined, part)
    return combined


def _planned_files(scan: Any) -> Iterator[Any]:
    """The data files a table scan plans (see :func:`_planned_tasks`)."""
    tasks = _planned_tasks(scan)
    try:
        for task in tasks:
            yield task.file()
    finally:
        tasks.close()


def _scan_tasks(table: Any, snapshot: int) -> dict[str, tuple[tuple[tuple[str, int], ...], Any]]:
    """The file scan tasks of ``table`` at ``snapshot`` by data file path, each with the delete
    files applied to it (path and offset: deletion vectors share a file)."""
    found = {}
    with closing(_planned_tasks(table.newScan().useSnapshot(snapshot))) as tasks:
        for task in tasks:
            applied = task.deletes()
            # by index: iterating a py4j list ends on a Java exception (~10 ms per task)
            deletes = tuple(sorted(
                (str(d.location()), _offset(d.contentOffset())) for d in map(applied.get, range(applied.size()))
            ))
            found[str(task.file().location())] = (deletes, task)
    return found


def _format_version(table: Any) -> int:
    """The Iceberg format version of a loaded table (0: not known)."""
    try:
        return int(table.operations().current().formatVersion())
    except Exception:  # noqa: BLE001 - not a table with operations (e.g. a metadata table)
        return 0


# Iceberg's reserved field id of the row lineage column _last_updated_sequence_number
# (MetadataColumns.LAST_UPDATED_SEQUENCE_NUMBER): rows a commit copies carry it in the file,
# rows it writes leave it null (they inherit the file's sequence number)
LAST_UPDATED_FIELD_ID = 2147483539


def _rows_gone_at_most(table: Any, commits: Sequence[Any]) -> int | None:
    """At most how many rows ``commits`` deleted or updated, from their own manifests' file
    statistics (None: not known). A commit removes the rows of the data files it removes and
    the rows its position deletes or deletion vectors name (a vector names every deleted row of
    its file, the older ones too: an upper bound); of the rows of its new data files, those it
    copied carry their lineage (a non-null ``_last_updated_sequence_number``, whose null count
    the manifest keeps), the rest it wrote. An equality delete can delete any number of rows:
    not known."""
    io = table.io()
    gone = 0
    for commit in commits:
        removed = sum(int(f.recordCount()) for f in _iterate(commit.removedDataFiles(io)))
        for delete_file in _iterate(commit.addedDeleteFiles(io)):
            if str(delete_file.content()) != "POSITION_DELETES":
                return None
            removed += int(delete_file.recordCount())
        copied = 0
        if str(commit.operation()) != "append":  # an append copies no row
            for data_file in _iterate(commit.addedDataFiles(io)):
                written = _null_count(data_file, LAST_UPDATED_FIELD_ID)
                if written is None:
                    return None
                copied += int(data_file.recordCount()) - written
        gone += max(removed - copied, 0)
    return gone


def _null_count(data_file: Any, field_id: int) -> int | None:
    """How many values of a column are null in a data file, from its statistics (None: not kept)."""
    counts = data_file.nullValueCounts()
    found = counts.get(field_id) if counts is not None else None
    return None if found is None else int(found)


def _written_after(task: Any, sequence: int) -> bool:
    """Whether a scan task's data file was written after ``sequence`` (unknown counts as yes):
    only such a file can hold a row written or updated since."""
    found = task.file().dataSequenceNumber()
    return found is None or int(found) > sequence


def _first_row_id(task: Any) -> int | None:
    """The first row id of a scan task's data file: None for files written before the table
    had row lineage (v2, or before an upgrade to v3), whose rows have no ``_row_id``."""
    found = task.file().firstRowId()
    return None if found is None else int(found)


def _commits_between(table: Any, start: int, end: int) -> list[Any] | None:
    """The snapshots after ``start`` up to ``end``, oldest first (None: ``start`` is not an
    ancestor of ``end``, or a snapshot between them is gone)."""
    chain = []
    cursor = table.snapshot(end)
    while cursor is not None and int(cursor.snapshotId()) != start:
        chain.append(cursor)
        parent = cursor.parentId()
        cursor = table.snapshot(parent) if parent is not None else None
    return list(reversed(chain)) if cursor is not None else None


def _has_delete_files(snapshot: Any) -> bool:
    """Whether delete files are live in, or added by, ``snapshot`` (unknown counts as yes)."""
    summary = snapshot.summary()
    total, added = summary.get("total-delete-files"), summary.get("added-delete-files")
    return total is None or int(total) > 0 or (added is not None and int(added) > 0)


def _iterate(iterable: Any) -> Iterator[Any]:
    iterator = iterable.iterator()
    while iterator.hasNext():
        yield iterator.next()


def _offset(value: Any) -> int:
    return -1 if value is None else int(value)


def _schema_id(snapshot: Any) -> int | None:
    found = snapshot.schemaId()
    return None if found is None else int(found)


def _bound(jvm: Any, field: Any, raw: Any) -> Bound:
    value = jvm.org.apache.iceberg.types.Conversions.fromByteBuffer(field.type(), raw)
    kind = str(field.type().typeId())
    if kind == "DATE":
        return EPOCH + datetime.timedelta(days=int(value))
    if kind == "STRING":
        return str(value)
    return int(value)


class Metadata:
    """The seam: a refresh's metadata reads, cached until the refresh writes the table."""

    def __init__(self, catalog: SqlCatalog | JvmCatalog) -> None:
        self.catalog = catalog
        self._tables: dict[str, TableMetadata | None] = {}
        # over SQL, a column check or a snapshot id need not read a table's whole metadata
        self._columns: dict[str, list[tuple[str, str]]] = {}
        self._mains: dict[str, int | None] = {}
        self._scan_sizes: dict[tuple, int | None] = {}  # a snapshot's files never change: kept

    @property
    def in_jvm(self) -> bool:
        return isinstance(self.catalog, JvmCatalog)

    def table(self, name: str) -> TableMetadata | None:
        if name not in self._tables:
            self._tables[name] = self.catalog.load(name, self._columns.get(name))
        return self._tables[name]

    def columns(self, name: str) -> list[tuple[str, str]]:
        if name in self._tables or self.in_jvm:
            found = self.table(name)
            return list(found.columns) if found is not None else []
        if name not in self._columns:
            self._columns[name] = self.catalog.columns(name)  # describe only: no snapshot read for a column check
        return list(self._columns[name])

    def main(self, name: str) -> int | None:
        return self.mains([name]).get(name)

    def mains(self, names: Iterable[str]) -> dict[str, int]:
        """The main snapshot of each table that has one (over SQL: one statement for all of them)."""
        names = list(dict.fromkeys(names))
        unknown = [n for n in names if n not in self._tables and n not in self._mains]
        if unknown and not self.in_jvm:
            self._mains.update({n: None for n in unknown})
            self._mains.update(self.catalog.mains(unknown))
        found = {}
        for name in names:
            if name in self._tables or self.in_jvm:
                table = self.table(name)
                found[name] = table.main if table is not None else None
            else:
                found[name] = self._mains.get(name)
        return {name: snapshot for name, snapshot in found.items() if snapshot is not None}

    def forget(self, *names: str) -> None:
        for name in names:
            self._tables.pop(name, None)
            self._columns.pop(name, None)
            self._mains.pop(name, None)

    def fast_forward(
        self, name: str, expected_main: int | None, *, to_snapshot: int | None = None, branch: str | None = None,
        properties: Mapping[str, str] | None = None, drop_branches: Sequence[str] = (),
    ) -> None:
        """Move ``name``'s main to a staged snapshot or a branch's head, as a compare-and-swap
        (LostRace: main is no longer at ``expected_main``, nothing changed), dropping
        ``drop_branches``."""
        try:
            self.catalog.fast_forward(
                name, expected_main, to_snapshot=to_snapshot, branch=branch, properties=properties,
                drop_branches=drop_branches,
            )
        finally:
            self.forget(name)

    def branch_head(self, name: str, branch: str) -> int | None:
        return self.catalog.branch_head(name, branch)

    def create_branch(self, name: str, branch: str, snapshot: int) -> None:
        self.catalog.create_branch(name, branch, snapshot)

    def drop_branch(self, name: str, branch: str) -> None:
        self.catalog.drop_branch(name, branch)
        self.forget(name)

    def data_files(self, name: str, upper_bound_of: str | None = None) -> list[DataFile]:
        """The live data files of a table (session mode only: the Java API's scan plan)."""
        return self.catalog.data_files(name, upper_bound_of)

    def written_since(
        self, name: str, snapshot: int, columns: Sequence[str], after_sequence: int
    ) -> WrittenSince | None:
        """The records of ``name`` (at ``snapshot``) written after ``after_sequence`` and the range
        of values of ``columns`` in them, from file statistics; None over SQL (it would cost a job)."""
        if not self.in_jvm:
            return None
        return self.catalog.written_since(name, snapshot, columns, after_sequence)

    def table_size(self, name: str, snapshot: int | None = None) -> tuple[int, int] | None:
        """(bytes of the live files, live records) of ``name`` at ``snapshot`` (None: main), from
        the snapshot's summary; None when the table, the snapshot or the totals are not known."""
        table = self.table(name)
        if table is None:
            return None
        at = table.snapshots.get(snapshot if snapshot is not None else table.main)  # type: ignore[arg-type]
        if at is None or "total-files-size" not in at.summary:
            return None
        return at.count("total-files-size"), at.count("total-records") - at.count("total-position-deletes")

    def scan_size(self, name: str, snapshot: int | None, range_filter: tuple) -> int | None:
        """Bytes of the data files (and their delete files) a scan of ``name`` at ``snapshot``
        filtered by ``range_filter`` (refresh/cost.py) reads, once Iceberg has skipped the files
        whose statistics are outside it: a scan plan, manifests only (session mode; None over SQL,
        where it would cost a job)."""
        if not self.in_jvm:
            return None
        key = (name, snapshot, range_filter)
        if key not in self._scan_sizes:
            self._scan_sizes[key] = self.catalog.scan_size(name, snapshot, range_filter)
        return self._scan_sizes[key]

    def delete_data_files(self, name: str, paths: Sequence[str]) -> None:
        """Drop whole data files: a metadata-only delete (session mode only)."""
        try:
            self.catalog.delete_data_files(name, paths)
        finally:
            self.forget(name)

    @contextmanager
    def changed_files(self, name: str, start: int, end: int) -> Iterator[ChangedFiles | None]:
        """The data files of ``name`` that differ between two snapshots, staged for one read
        while the block runs (session mode only; None: they cannot be staged, read otherwise)."""
        changed = self.catalog.stage_changed_files(name, start, end) if self.in_jvm else None
        try:
            yield changed
        finally:
            if changed is not None:
                self.catalog.unstage_changed_files(changed)

    @contextmanager
    def appended_files(self, name: str, snapshot: int) -> Iterator[ChangedFiles | None]:
        """The data files the append commit ``snapshot`` of ``name`` added, staged for one read
        while the block runs (session mode only; None: not staged, read otherwise)."""
        appended = self.catalog.stage_appended_files(name, snapshot) if self.in_jvm else None
        try:
            yield appended
        finally:
            if appended is not None:
                self.catalog.unstage_changed_files(appended)

    def drop_temp_view(self, view: str) -> None:
        self.catalog.drop_temp_view(view)

    def reset_staging(self) -> None:
        """Unset ``spark.wap.id`` (a failed earlier refresh on this connection may have left it set)."""
        self.catalog.reset_staging()
