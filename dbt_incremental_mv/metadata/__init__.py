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

The value types are in ``types.py``, the two catalogs in ``sql_catalog.py`` and
``jvm_catalog.py`` (which reads Iceberg's Java objects with ``iceberg_java.py``); this module is the seam itself (:class:`Metadata`) and the interface it asks
of them (:class:`Catalog`, with :class:`SqlOnlyCatalog` and :class:`JvmOnlyCatalog` for the calls it
makes of one of them only). Every name is importable from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Protocol, cast

from dbt_incremental_mv.metadata.iceberg_java import LAST_UPDATED_FIELD_ID  # noqa: F401 - importable from here
from dbt_incremental_mv.metadata.jvm_catalog import (  # noqa: F401 - the seam's names, importable from here
    JvmCatalog,
    java_api_usable,
)
from dbt_incremental_mv.metadata.sql_catalog import (  # noqa: F401 - the seam's names, importable from here
    SqlCatalog,
)
from dbt_incremental_mv.metadata.types import (  # noqa: F401 - the seam's names, importable from here
    BOUNDED_TYPES,
    EPOCH,
    METADATA_COMMIT_ATTEMPTS,
    SUMMARY_KEYS,
    WAP_ID,
    Bound,
    ChangedFiles,
    DataFile,
    Execute,
    LostRace,
    MetadataContention,
    Query,
    Setting,
    Snapshot,
    TableMetadata,
    WrittenSince,
    commits_since,
    drop_temp_view_statement,
    from_metadata_json,
    metadata_contention,
    retried_metadata_commit,
    setting_statements,
    spark_line,
    spark_type,
)


class Catalog(Protocol):
    """What the seam asks of a catalog, whichever answers (SQL or the JVM)."""

    def load(self, name: str, columns: Sequence[tuple[str, str]] | None = None) -> TableMetadata | None: ...
    def fast_forward(
        self,
        name: str,
        expected_main: int | None,
        *,
        to_snapshot: int | None = None,
        branch: str | None = None,
        properties: Mapping[str, str] | None = None,
        drop_branches: Sequence[str] = (),
    ) -> None: ...
    def branch_head(self, name: str, branch: str) -> int | None: ...
    def create_branch(self, name: str, branch: str, snapshot: int) -> None: ...
    def drop_branch(self, name: str, branch: str) -> None: ...
    def drop_temp_view(self, view: str) -> None: ...
    def reset_staging(self) -> None: ...
    def apply_settings(self, settings: Sequence[Setting]) -> None: ...
    def spark_version(self) -> str: ...


class SqlOnlyCatalog(Catalog, Protocol):
    """What the seam asks over SQL only (:class:`SqlCatalog`; not :attr:`Metadata.in_jvm`): reads
    that need not load a table's whole metadata."""

    def mains(self, names: Sequence[str]) -> dict[str, int]: ...
    def columns(self, name: str) -> list[tuple[str, str]]: ...


class JvmOnlyCatalog(Catalog, Protocol):
    """What the seam asks in session mode only (:class:`JvmCatalog`; :attr:`Metadata.in_jvm`): scan
    plans, file statistics, metadata-only deletes and staged scan task sets of the Java API."""

    def written_since(
        self, name: str, snapshot: int, columns: Sequence[str], after_sequence: int
    ) -> WrittenSince | None: ...
    def scan_size(self, name: str, snapshot: int | None, range_filter: tuple) -> int | None: ...
    def data_files(self, name: str, upper_bound_of: str | None = None) -> list[DataFile]: ...
    def delete_data_files(self, name: str, paths: Sequence[str]) -> None: ...
    def stage_changed_files(self, name: str, start: int, end: int) -> ChangedFiles | None: ...
    def stage_appended_files(self, name: str, snapshot: int) -> ChangedFiles | None: ...
    def unstage_changed_files(self, changed: ChangedFiles) -> None: ...


class Metadata:
    """The seam: a refresh's metadata reads, cached until the refresh writes the table."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._tables: dict[str, TableMetadata | None] = {}
        # over SQL, a column check or a snapshot id need not read a table's whole metadata
        self._columns: dict[str, list[tuple[str, str]]] = {}
        self._mains: dict[str, int | None] = {}
        self._scan_sizes: dict[tuple, int | None] = {}  # a snapshot's files never change: kept
        self._spark: tuple[int, int] | None = None

    @property
    def in_jvm(self) -> bool:
        return isinstance(self.catalog, JvmCatalog)

    @property
    def _sql_catalog(self) -> SqlOnlyCatalog:
        """The catalog, for a call made over SQL only: the caller checked :attr:`in_jvm`."""
        return cast(SqlOnlyCatalog, self.catalog)

    @property
    def _jvm_catalog(self) -> JvmOnlyCatalog:
        """The catalog, for a call made in session mode only (the caller checked :attr:`in_jvm`,
        or the method is documented as session mode only)."""
        return cast(JvmOnlyCatalog, self.catalog)

    def spark(self) -> tuple[int, int]:
        """The Spark line (major, minor) that runs the statements, read once (over SQL, the
        server's: ``select version()``)."""
        if self._spark is None:
            try:
                self._spark = spark_line(self.catalog.spark_version())
            except Exception:  # noqa: BLE001 - an engine without version(): the statements of 3.5
                self._spark = (3, 5)
        return self._spark

    def table(self, name: str) -> TableMetadata | None:
        if name not in self._tables:
            self._tables[name] = self.catalog.load(name, self._columns.get(name))
        return self._tables[name]

    def columns(self, name: str) -> list[tuple[str, str]]:
        if name in self._tables or self.in_jvm:
            found = self.table(name)
            return list(found.columns) if found is not None else []
        if name not in self._columns:
            self._columns[name] = self._sql_catalog.columns(name)  # describe only: no snapshot read for a column check
        return list(self._columns[name])

    def main(self, name: str) -> int | None:
        return self.mains([name]).get(name)

    def mains(self, names: Iterable[str]) -> dict[str, int]:
        """The main snapshot of each table that has one (over SQL: one statement for all of them)."""
        names = list(dict.fromkeys(names))
        unknown = [n for n in names if n not in self._tables and n not in self._mains]
        if unknown and not self.in_jvm:
            self._mains.update({n: None for n in unknown})
            self._mains.update(self._sql_catalog.mains(unknown))
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
        self,
        name: str,
        expected_main: int | None,
        *,
        to_snapshot: int | None = None,
        branch: str | None = None,
        properties: Mapping[str, str] | None = None,
        drop_branches: Sequence[str] = (),
    ) -> None:
        """Move ``name``'s main to a staged snapshot or a branch's head, as a compare-and-swap
        (LostRace: main is no longer at ``expected_main``, nothing changed), dropping
        ``drop_branches``."""
        try:
            self.catalog.fast_forward(
                name,
                expected_main,
                to_snapshot=to_snapshot,
                branch=branch,
                properties=properties,
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
        return self._jvm_catalog.data_files(name, upper_bound_of)

    def written_since(
        self, name: str, snapshot: int, columns: Sequence[str], after_sequence: int
    ) -> WrittenSince | None:
        """The records of ``name`` (at ``snapshot``) written after ``after_sequence`` and the range
        of values of ``columns`` in them, from file statistics; None over SQL (it would cost a job)."""
        if not self.in_jvm:
            return None
        return self._jvm_catalog.written_since(name, snapshot, columns, after_sequence)

    def table_size(self, name: str, snapshot: int | None = None) -> tuple[int, int] | None:
        """(bytes of the live files, live records) of ``name`` at ``snapshot`` (None: main), from
        the snapshot's summary; None when the table, the snapshot or the totals are not known."""
        table = self.table(name)
        if table is None:
            return None
        at = table.snapshots.get(snapshot if snapshot is not None else table.main)  # type: ignore[arg-type]  # main None: get() finds nothing
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
            self._scan_sizes[key] = self._jvm_catalog.scan_size(name, snapshot, range_filter)
        return self._scan_sizes[key]

    def delete_data_files(self, name: str, paths: Sequence[str]) -> None:
        """Drop whole data files: a metadata-only delete (session mode only)."""
        try:
            self._jvm_catalog.delete_data_files(name, paths)
        finally:
            self.forget(name)

    @contextmanager
    def changed_files(self, name: str, start: int, end: int) -> Iterator[ChangedFiles | None]:
        """The data files of ``name`` that differ between two snapshots, staged for one read
        while the block runs (session mode only; None: they cannot be staged, read otherwise)."""
        changed = self._jvm_catalog.stage_changed_files(name, start, end) if self.in_jvm else None
        try:
            yield changed
        finally:
            if changed is not None:
                self._jvm_catalog.unstage_changed_files(changed)

    @contextmanager
    def appended_files(self, name: str, snapshot: int) -> Iterator[ChangedFiles | None]:
        """The data files the append commit ``snapshot`` of ``name`` added, staged for one read
        while the block runs (session mode only; None: not staged, read otherwise)."""
        appended = self._jvm_catalog.stage_appended_files(name, snapshot) if self.in_jvm else None
        try:
            yield appended
        finally:
            if appended is not None:
                self._jvm_catalog.unstage_changed_files(appended)

    def drop_temp_view(self, view: str) -> None:
        self.catalog.drop_temp_view(view)

    def reset_staging(self) -> None:
        """Unset ``spark.wap.id`` (a failed earlier refresh on this connection may have left it set)."""
        self.catalog.reset_staging()

    def apply_settings(self, settings: Sequence[Setting]) -> None:
        """Change the session's settings (a value None: back to the session's own, as ``RESET``):
        in session mode through the session itself, no statement; over SQL as ``SET``/``RESET``."""
        if settings:
            self.catalog.apply_settings(settings)
