"""Iceberg's Java objects read through py4j for the JVM catalog (jvm_catalog.py): planned scan
tasks and files, range filters as Iceberg expressions, a commit chain, row-lineage and file
statistics, column bounds. Stateless: every function takes the Java objects it reads."""

from __future__ import annotations

import datetime
from collections.abc import Generator, Iterator, Sequence
from contextlib import closing
from typing import Any

from dbt_incremental_mv.metadata.types import EPOCH, Bound


def planned_tasks(scan: Any) -> Generator[Any, None, None]:
    """The file scan tasks a table scan plans (manifests only, no data read); its task list is
    closed when the iteration ends or is closed."""
    tasks = scan.planFiles()
    try:
        yield from iterate(tasks)
    finally:
        tasks.close()


def iceberg_filter(expressions: Any, range_filter: tuple) -> Any:
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
    parts = [iceberg_filter(expressions, part) for part in range_filter[1]]
    combined = parts[0]
    for part in parts[1:]:
        combined = getattr(expressions, kind)(combined, part)
    return combined


def planned_files(scan: Any) -> Generator[Any, None, None]:
    """The data files a table scan plans (see :func:`planned_tasks`)."""
    tasks = planned_tasks(scan)
    try:
        for task in tasks:
            yield task.file()
    finally:
        tasks.close()


def scan_tasks(table: Any, snapshot: int) -> dict[str, tuple[tuple[tuple[str, int], ...], Any]]:
    """The file scan tasks of ``table`` at ``snapshot`` by data file path, each with the delete
    files applied to it (path and offset: deletion vectors share a file)."""
    found = {}
    with closing(planned_tasks(table.newScan().useSnapshot(snapshot))) as tasks:
        for task in tasks:
            applied = task.deletes()
            # by index: iterating a py4j list ends on a Java exception (~10 ms per task)
            deletes = tuple(
                sorted((str(d.location()), offset(d.contentOffset())) for d in map(applied.get, range(applied.size())))
            )
            found[str(task.file().location())] = (deletes, task)
    return found


def format_version(table: Any) -> int:
    """The Iceberg format version of a loaded table (0: not known)."""
    try:
        return int(table.operations().current().formatVersion())
    except Exception:  # noqa: BLE001 - not a table with operations (e.g. a metadata table)
        return 0


# Iceberg's reserved field id of the row lineage column _last_updated_sequence_number
# (MetadataColumns.LAST_UPDATED_SEQUENCE_NUMBER): rows a commit copies carry it in the file,
# rows it writes leave it null (they inherit the file's sequence number)
LAST_UPDATED_FIELD_ID = 2147483539


def rows_gone_at_most(table: Any, commits: Sequence[Any]) -> int | None:
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
        removed = sum(int(f.recordCount()) for f in iterate(commit.removedDataFiles(io)))
        for delete_file in iterate(commit.addedDeleteFiles(io)):
            if str(delete_file.content()) != "POSITION_DELETES":
                return None
            removed += int(delete_file.recordCount())
        copied = 0
        if str(commit.operation()) != "append":  # an append copies no row
            for data_file in iterate(commit.addedDataFiles(io)):
                written = null_count(data_file, LAST_UPDATED_FIELD_ID)
                if written is None:
                    return None
                copied += int(data_file.recordCount()) - written
        gone += max(removed - copied, 0)
    return gone


def null_count(data_file: Any, field_id: int) -> int | None:
    """How many values of a column are null in a data file, from its statistics (None: not kept)."""
    counts = data_file.nullValueCounts()
    found = counts.get(field_id) if counts is not None else None
    return None if found is None else int(found)


def written_after(task: Any, sequence: int) -> bool:
    """Whether a scan task's data file was written after ``sequence`` (unknown counts as yes):
    only such a file can hold a row written or updated since."""
    found = task.file().dataSequenceNumber()
    return found is None or int(found) > sequence


def first_row_id(task: Any) -> int | None:
    """The first row id of a scan task's data file: None for files written before the table
    had row lineage (v2, or before an upgrade to v3), whose rows have no ``_row_id``."""
    found = task.file().firstRowId()
    return None if found is None else int(found)


def commits_between(table: Any, start: int, end: int) -> list[Any] | None:
    """The snapshots after ``start`` up to ``end``, oldest first (None: ``start`` is not an
    ancestor of ``end``, or a snapshot between them is gone)."""
    chain = []
    cursor = table.snapshot(end)
    while cursor is not None and int(cursor.snapshotId()) != start:
        chain.append(cursor)
        parent = cursor.parentId()
        cursor = table.snapshot(parent) if parent is not None else None
    return list(reversed(chain)) if cursor is not None else None


def has_delete_files(snapshot: Any) -> bool:
    """Whether delete files are live in, or added by, ``snapshot`` (unknown counts as yes)."""
    summary = snapshot.summary()
    total, added = summary.get("total-delete-files"), summary.get("added-delete-files")
    return total is None or int(total) > 0 or (added is not None and int(added) > 0)


def iterate(iterable: Any) -> Iterator[Any]:
    iterator = iterable.iterator()
    while iterator.hasNext():
        yield iterator.next()


def offset(value: Any) -> int:
    return -1 if value is None else int(value)


def schema_id(snapshot: Any) -> int | None:
    found = snapshot.schemaId()
    return None if found is None else int(found)


def bound(jvm: Any, field: Any, raw: Any) -> Bound:
    value = jvm.org.apache.iceberg.types.Conversions.fromByteBuffer(field.type(), raw)
    kind = str(field.type().typeId())
    if kind == "DATE":
        return EPOCH + datetime.timedelta(days=int(value))
    if kind == "STRING":
        return str(value)
    return int(value)


# The static entry points of Iceberg's Java API the JVM catalog calls (class -> methods), checked
# once per JVM against the Iceberg in use: internal classes (ScanTaskSetManager, SparkTableCache) and
# parsers are not a public API and may move between releases. Tested with Iceberg 1.10.2 (Spark 3.5,
# 4.0) and 1.11.0 (Spark 4.1).
JAVA_API = {
    "org.apache.iceberg.spark.Spark3Util": ("loadIcebergTable",),
    "org.apache.iceberg.TableMetadataParser": ("toJson",),
    "org.apache.iceberg.util.JsonUtil": ("factory",),
    "org.apache.iceberg.TableMetadata": ("buildFrom",),
    "org.apache.iceberg.expressions.Expressions": ("alwaysTrue", "and", "greaterThanOrEqual", "lessThanOrEqual"),
    "org.apache.iceberg.expressions.ResidualEvaluator": ("unpartitioned",),
    "org.apache.iceberg.types.Conversions": ("fromByteBuffer",),
    "org.apache.iceberg.spark.ScanTaskSetManager": ("get",),
    "org.apache.iceberg.spark.SparkTableCache": ("get",),
}


def missing_java_api(jvm: Any, api: dict[str, tuple[str, ...]] = JAVA_API) -> str | None:
    """The first class or ``class.method`` of ``api`` the JVM's Iceberg lacks, or None."""
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    for name, methods in api.items():
        try:
            found = jvm.java.lang.Class.forName(name, False, loader)
        except Exception:  # noqa: BLE001 - py4j wraps ClassNotFoundException
            return name
        present = {method.getName() for method in found.getMethods()}
        for method in methods:
            if method not in present:
                return f"{name}.{method}"
    return None


def iceberg_version(jvm: Any) -> str:
    """The Iceberg release on the JVM's class path (``unknown`` when it does not say)."""
    try:
        return str(jvm.org.apache.iceberg.IcebergBuild.version())
    except Exception:  # noqa: BLE001
        return "unknown"
