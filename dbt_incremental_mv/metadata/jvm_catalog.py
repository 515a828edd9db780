"""Metadata through Iceberg's Java API in the embedded session's JVM (py4j): one call per table's
whole metadata, compare-and-swap ref moves, staged changed files for capture."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import replace
from typing import Any

from dbt_incremental_mv.conflicts import LOST_RACE
from dbt_incremental_mv.metadata.iceberg_java import (
    bound,
    commits_between,
    first_row_id,
    format_version,
    has_delete_files,
    iceberg_filter,
    iceberg_version,
    iterate,
    missing_java_api,
    planned_files,
    rows_gone_at_most,
    scan_tasks,
    schema_id,
    written_after,
)
from dbt_incremental_mv.metadata.types import (
    BOUNDED_TYPES,
    WAP_ID,
    ChangedFiles,
    DataFile,
    LostRace,
    MetadataContention,
    Setting,
    TableMetadata,
    WrittenSince,
    from_metadata_json,
    java_error,
    metadata_contention,
    retried_metadata_commit,
    setting_statements,
)
from dbt_incremental_mv.process_state import PROCESS
from dbt_incremental_mv.runtime.jvm_calls import java_class, string_writer, text_of
from dbt_incremental_mv.sql_text import string

logger = logging.getLogger(__name__)


def java_api_usable(session: Any) -> bool:
    """Whether the session's Iceberg has every entry point JvmCatalog calls (iceberg_java.JAVA_API).
    When it lacks one, the metadata is read through SQL instead (slower, same answers) and a
    warning names the Iceberg version and what is missing, once per JVM."""
    key = id(session._jvm)
    if key not in PROCESS.java_api:
        missing = missing_java_api(session._jvm)
        if missing is not None:
            logger.warning(
                "Iceberg %s in this Spark session lacks %s, which dbt-incremental-mv's Java metadata reader "
                "calls (tested with Iceberg 1.10.2 and 1.11.0): table metadata is read through SQL instead "
                "(slower; same answers).",
                iceberg_version(session._jvm),
                missing,
            )
        PROCESS.java_api[key] = missing is None
    return PROCESS.java_api[key]


class JvmCatalog:
    """Metadata through Iceberg's Java API in the embedded session's JVM (no SQL, no Spark job)."""

    def __init__(self, session: Any, on_change: Callable[[str], None] | None = None) -> None:
        self.session = session
        # told of every change made without a SQL statement: each metadata commit (described),
        # each setting (as the statement that would have made it)
        self.on_change = on_change or (lambda description: None)
        self._staged: dict[str, Any] = {}  # staged scan task set (= its temp view) -> its table

    def _table(self, name: str) -> Any | None:
        # Iceberg resolves the catalog through the thread's active session: a dbt worker thread
        # has none, and would look in a catalog that does not know the table
        java_class(self.session, "org.apache.spark.sql.SparkSession").setActiveSession(self.session._jsparkSession)
        try:
            return java_class(self.session, "org.apache.iceberg.spark.Spark3Util").loadIcebergTable(
                self.session._jsparkSession, name
            )
        except Exception as exc:  # noqa: BLE001 - py4j wraps the Java exception
            text = str(exc)
            if "NoSuchTableException" in text or "cannot be found" in text:
                return None
            raise

    def _existing_table(self, name: str) -> Any:
        """The loaded table ``name``, which the caller commits to: a table that is gone is an error."""
        table = self._table(name)
        if table is None:
            raise LookupError(f"Iceberg table {name} not found")
        return table

    def load(self, name: str, columns: Sequence[tuple[str, str]] | None = None) -> TableMetadata | None:
        table = self._table(name)
        if table is None:
            return None
        current = table.operations().current()
        # A metadata file never changes once written, but a Hadoop catalog names them v1, v2, ...
        # per table: a table dropped and created again reuses the names. Its uuid tells them apart.
        key = (name, str(current.metadataFileLocation()), str(current.uuid()))
        return PROCESS.parsed_metadata.get_or_make(
            key, lambda: from_metadata_json(name, json.loads(self._metadata_json(current)))
        )

    def _metadata_json(self, metadata: Any) -> str:
        """``metadata`` as Iceberg writes it to a metadata file, written into a JVM string and
        read in pieces (runtime/jvm_calls.py: one answer over 8,192 characters waits 44 ms, and a
        table's metadata passes that after a few dozen commits)."""
        writer = string_writer(self.session)
        generator = java_class(self.session, "org.apache.iceberg.util.JsonUtil").factory().createGenerator(writer)
        java_class(self.session, "org.apache.iceberg.TableMetadataParser").toJson(metadata, generator)
        generator.flush()
        return text_of(writer)

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
        """Move main to ``to_snapshot`` (a staged snapshot) or to the head of ``branch`` (and drop
        the branch and ``drop_branches``), and set ``properties``, in ONE compare-and-swap commit
        of the table metadata: refused (LostRace) unless main is still at ``expected_main``."""
        target = branch or f"mv_publish_{to_snapshot}"
        description = (
            f"call spark_catalog.system.fast_forward({string(name)}, 'main', {string(target)}) [metadata commit]"
        )
        # made again while main is still where expected but another metadata commit came first
        retried_metadata_commit(
            lambda: self._fast_forward(name, expected_main, to_snapshot, branch, properties, drop_branches),
            description,
        )
        logger.debug("%s", description)
        self.on_change(description)

    def _fast_forward(
        self,
        name: str,
        expected_main: int | None,
        to_snapshot: int | None,
        branch: str | None,
        properties: Mapping[str, str] | None,
        drop_branches: Sequence[str],
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
                raise MetadataContention(
                    f"another commit to {name} came first: {LOST_RACE} ({java_error(exc)})"
                ) from exc
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
        with closing(planned_files(table.newScan().useSnapshot(snapshot).includeColumnStats())) as files:
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
                    low = bound(jvm, found, lower)
                    high = bound(jvm, found, upper)
                    lows[column] = low if column not in lows else min(lows[column], low)
                    highs[column] = high if column not in highs else max(highs[column], high)
        return WrittenSince(records, {c: (lows[c], highs[c]) for c in fields if c in lows})

    def branch_head(self, name: str, branch: str) -> int | None:
        table = self._table(name)
        ref = table.refs().get(branch) if table is not None else None
        return int(ref.snapshotId()) if ref is not None else None

    def create_branch(self, name: str, branch: str, snapshot: int) -> None:
        def create() -> None:
            self._existing_table(name).manageSnapshots().createBranch(branch, snapshot).commit()

        retried_metadata_commit(create, f"create branch {branch} on {name}")
        self.on_change(f"create branch {branch} on {name}")

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
        expression = iceberg_filter(jvm.org.apache.iceberg.expressions.Expressions, range_filter)
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
            for group in iterate(groups):
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
        for data_file in planned_files(scan.includeColumnStats() if column is not None else scan):
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
        table = self._existing_table(name)
        delete = table.newDelete()
        for path in paths:
            # a CharSequence that is not a String: py4j would pick the protected
            # SnapshotProducer.deleteFile(String), which deletes the file from storage at once
            delete.deleteFile(self.session._jvm.java.lang.StringBuilder(path))
        delete.commit()
        self.on_change(f"delete {len(paths)} data files of {name} [metadata commit]")

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
        if old is None or new is None or {schema_id(old), schema_id(new)} != {current}:
            return None
        commits = commits_between(table, start, end)
        if commits is not None and not any(has_delete_files(s) for s in (old, new, *commits)):
            removed, added = self._files_changed_by(table, commits)
        else:
            before, after = scan_tasks(table, start), scan_tasks(table, end)
            removed = [
                task for path, (deletes, task) in before.items() if path not in after or after[path][0] != deletes
            ]
            added = [
                task for path, (deletes, task) in after.items() if path not in before or before[path][0] != deletes
            ]
        lineage_since = rows_gone = None
        written: list[Any] = added
        if format_version(table) >= 3 and all(first_row_id(task) is not None for task in (*removed, *added)):
            lineage_since = int(old.sequenceNumber())
            written = [task for task in added if written_after(task, lineage_since)]
            rows_gone = rows_gone_at_most(table, commits) if commits is not None else None
        token = uuid.uuid4().hex[:16]
        changed = ChangedFiles(None, None, len(removed), len(added), None, len(written), lineage_since, rows_gone)
        try:
            changed = replace(changed, removed_view=self._stage(table, f"mv_files_removed_{token}", removed))
            changed = replace(changed, added_view=self._stage(table, f"mv_files_added_{token}", added))
            changed = replace(
                changed,
                written_view=(
                    self._stage(table, f"mv_files_written_{token}", written)
                    if len(written) < len(added)
                    else changed.added_view
                ),
            )
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
        if commit is None or str(commit.operation()) != "append" or schema_id(commit) != int(table.schema().schemaId()):
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
            for data_file in iterate(commit.removedDataFiles(io)):
                path = str(data_file.location())
                if added.pop(path, None) is None:  # added and removed in between: at neither end
                    removed[path] = data_file
            for data_file in iterate(commit.addedDataFiles(io)):
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
        self.session.conf.unset(WAP_ID)

    def apply_settings(self, settings: Sequence[Setting]) -> None:
        """The settings changed in the session's SQL configuration: what ``SET`` does, and for a
        value None what ``RESET key`` does (unset, then the value the Spark configuration the
        session was started from holds, if any), without a statement (~15 ms each over dbt)."""
        conf = self.session.conf
        for (key, value), statement in zip(settings, setting_statements(settings)):
            if value is None:
                conf.unset(key)
                initial = self.session._jsparkSession.sharedState().conf().getOption(key)
                if initial.isDefined():
                    conf.set(key, initial.get())
            else:
                conf.set(key, value)
            self.on_change(statement)

    def spark_version(self) -> str:
        return str(self.session.version)
