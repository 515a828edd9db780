"""The metadata seam's value types: snapshots, table metadata, data files, bounds, staged changed
files; lost races and retried metadata commits; Iceberg types as Spark names."""

from __future__ import annotations

import datetime
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbt_incremental_mv.sql_text import ident

Query = Callable[[str], Sequence[Sequence[Any]]]
Execute = Callable[[str], None]
# The setting a write is staged under: its commit is made on no branch, carrying this id
WAP_ID = "spark.wap.id"
# A session setting to apply: (key, value), or (key, None) for the value the session started with
# (what ``RESET key`` gives back)
Setting = tuple[str, str | None]


def drop_temp_view_statement(view: str) -> str:
    """The SQL statement dropping a temporary view (and its cached data, if cached)."""
    return f"drop view if exists {ident(view)}"


def setting_statements(settings: Sequence[Setting]) -> list[str]:
    """The SQL statements applying ``settings``: ``SET key=value``, ``RESET key``."""
    return [f"set {key}={value}" if value is not None else f"reset {key}" for key, value in settings]


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


def java_error(exc: BaseException) -> str:
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
            time.sleep(random.uniform(0.05, 0.1 * 2**attempt))


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: int
    parent_id: int | None
    operation: str
    summary: Mapping[str, str] = field(default_factory=dict)
    sequence_number: int | None = None  # None when read through SQL (not in the snapshots table)
    schema_id: int | None = None  # the schema the snapshot was written with (None through SQL)
    timestamp_ms: int | None = None  # when it was committed (epoch milliseconds)

    def count(self, key: str) -> int:
        value = self.summary.get(key)
        return int(value) if value is not None and value != "" else 0


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


def spark_line(version: str) -> tuple[int, int]:
    """(major, minor) of a Spark version as ``version()`` or ``SparkSession.version`` give it
    (``'4.1.1 c0690c7...'``, ``'3.5.9'``)."""
    major, minor = version.split()[0].split(".")[:2]
    return int(major), int(minor)


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
            timestamp_ms=entry.get("timestamp-ms"),
        )
    refs = document.get("refs") or {}
    main = refs.get("main", {}).get("snapshot-id")
    if main is None and document.get("current-snapshot-id") not in (None, -1):
        main = document["current-snapshot-id"]
    branches = {
        str(ref): int(entry["snapshot-id"])
        for ref, entry in refs.items()
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
