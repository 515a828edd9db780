"""The embedded session: one Spark session per dbt connection."""

import threading


def run_in_thread(adapter, name, sql):
    result = {}

    def work():
        with adapter.connection_named(name):
            _, table = adapter.execute(sql, fetch=True)
            result["rows"] = [tuple(row) for row in table]

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return result["rows"]


def test_session_settings_do_not_leak_between_connections(project):
    adapter = project.adapter
    run_in_thread(adapter, "writer", "set spark.dbt_mv_probe = writer_value")
    assert run_in_thread(adapter, "writer_again", "set spark.dbt_mv_probe") != [("spark.dbt_mv_probe", "writer_value")]
    # ...while all connections share the catalog: a table made by one is seen by the other.
    run_in_thread(adapter, "creator", f"create table {project.test_schema}.shared_probe (x int) using iceberg")
    assert run_in_thread(adapter, "reader", f"show tables in {project.test_schema}") == [
        (project.test_schema, "shared_probe", False)
    ]


def test_the_jvm_maps_the_class_archive_setup_built(tmp_path):
    """scripts/setup.sh builds the class-data-sharing archive; a JVM with the embedded session's
    classpath must be able to map it (``-Xshare:on`` refuses to start otherwise)."""
    import subprocess
    import sys
    from pathlib import Path

    from dbt_incremental_mv.runtime import jvm_archive
    from dbt_incremental_mv.runtime.embedded import profile_settings

    settings = profile_settings(warehouse=tmp_path, user_params={})
    archive = jvm_archive.archive_path(settings)
    assert archive.is_file(), f"{archive} was not built (scripts/setup.sh runs `dbt-incremental-mv jvm-archive`)"
    probe = (
        "import json, sys\n"
        "from pyspark.sql import SparkSession\n"
        "b = SparkSession.builder\n"
        "for k, v in json.loads(sys.argv[1]).items(): b = b.config(k, v)\n"
        "print(b.getOrCreate().sql('select 41 + 1').collect()[0][0])\n"
    )
    strict = jvm_archive.with_archive(settings, archive)
    strict["spark.driver.extraJavaOptions"] = strict["spark.driver.extraJavaOptions"].replace(jvm_archive.QUIET, "-Xshare:on")
    import json

    done = subprocess.run([sys.executable, "-c", probe, json.dumps(strict)], capture_output=True, text=True, timeout=300, cwd=Path(tmp_path))
    assert done.returncode == 0 and done.stdout.strip().endswith("42"), done.stderr[-2000:]


def test_column_bounds_come_from_the_statistics_of_the_files_written_after_a_sequence(project):
    """The span the marked keys are bucketed over (refresh/phases/mark.py) is read from the log files'
    column statistics: only files written after the view's position count (their records too),
    files of NULLs only are skipped, and a column without usable statistics is left out."""
    import datetime

    adapter = project.adapter
    table = f"{project.test_schema}.bounds_probe"
    with adapter.connection_named("bounds"):
        for sql in (
            f"create table {table} (k bigint, d date, name string, price double) using iceberg "
            "tblproperties ('format-version' = '3')",
            f"insert into {table} values (5, date '2024-01-01', 'bob', 1.0), (9, date '2024-03-01', 'al', 2.0)",
            f"insert into {table} values (null, null, null, null)",
            f"insert into {table} values (100, date '2023-01-01', 'zed', 3.0)",
        ):
            adapter.execute(sql)
        metadata = adapter._metadata()
        assert metadata.in_jvm
        snapshot = metadata.main(table)
        columns = ["k", "d", "name", "price", "missing"]
        written = metadata.written_since(table, snapshot, columns, 0)
        assert written.records == 4 and written.bounds == {
            "k": (5, 100), "d": (datetime.date(2023, 1, 1), datetime.date(2024, 3, 1)), "name": ("al", "zed"),
        }
        later = metadata.written_since(table, snapshot, ["k"], 1)  # the first file is older
        assert (later.records, later.bounds) == (2, {"k": (100, 100)})
        none = metadata.written_since(table, snapshot, ["k"], 3)
        assert (none.records, none.bounds) == (0, {})


def write_equality_deletes(session, table_name, ids):
    """Commit an equality delete file (on column ``id``, an int) as CDC sinks such as Flink write
    them: Spark SQL cannot write one."""
    jvm = session._jvm
    gateway = session.sparkContext._gateway
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(session._jsparkSession, table_name)
    schema = table.schema()
    names = jvm.java.util.ArrayList()
    names.add("id")
    delete_schema = schema.select(names)
    field_ids = gateway.new_array(gateway.jvm.int, 1)
    field_ids[0] = schema.findField("id").fieldId()
    factory = jvm.org.apache.iceberg.data.GenericAppenderFactory(schema, table.spec(), field_ids, delete_schema, None)
    output = jvm.org.apache.iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(
        table.io().newOutputFile(f"{table.location()}/data/equality-deletes-{ids[0]}.parquet")
    )
    writer = factory.newEqDeleteWriter(output, jvm.org.apache.iceberg.FileFormat.PARQUET, None)
    record = jvm.org.apache.iceberg.data.GenericRecord.create(delete_schema)
    for value in ids:
        row = record.copy()
        row.setField("id", value)
        writer.write(row)
    writer.close()
    table.newRowDelta().addDeletes(writer.toDeleteFile()).commit()


def test_the_files_a_capture_reads_are_the_changed_ones_with_their_delete_files(project):
    """Capture by files (refresh/phases/capture.py): between two snapshots of a merge-on-read master,
    the data files whose rows changed (new files, files given position or equality deletes) are
    staged as they were and as they are; their difference is exactly the change, and the staged
    views are gone after the block."""
    adapter = project.adapter
    table = f"{project.test_schema}.files_probe"
    with adapter.connection_named("files"):
        adapter.execute(
            f"create table {table} (id int, v string) using iceberg tblproperties ('format-version' = '2', "
            "'write.delete.mode' = 'merge-on-read', 'write.update.mode' = 'merge-on-read')"
        )
        for low in (0, 10, 20):  # three files
            adapter.execute(f"insert into {table} select cast(id as int), cast(id as string) from range({low}, {low + 10})")
        metadata = adapter._metadata()
        start = metadata.main(table)
        adapter.execute(f"update {table} set v = 'x' where id = 3")  # a position delete and a new file
        adapter.execute(f"delete from {table} where id = 15")  # a position delete
        write_equality_deletes(metadata.catalog.session, table, [7])
        adapter.execute(f"insert into {table} values (100, 'n')")  # a new file
        metadata.forget(table)
        end = metadata.main(table)

        def rows_of(sql):
            _, found = adapter.execute(sql, fetch=True)
            return sorted(tuple(r) for r in found)

        with metadata.changed_files(table, start, end) as changed:
            assert changed is not None and changed.removed_view and changed.added_view
            inserted = rows_of(f"select * from {changed.added_view} except all select * from {changed.removed_view}")
            deleted = rows_of(f"select * from {changed.removed_view} except all select * from {changed.added_view}")
            staged = rows_of(f"select id from {changed.removed_view}")
        assert inserted == [(3, "x"), (100, "n")]
        assert deleted == [(3, "3"), (7, "7"), (15, "15")]
        assert not any(20 <= i < 30 for (i,) in staged)  # the untouched file is not read
        views = rows_of("show views")
        assert not [v for v in views if "mv_files_" in str(v)]


def test_copy_on_write_changes_are_found_in_the_commits_own_manifests(project, monkeypatch):
    """Without delete files, the files a capture reads come from the commits' own manifests
    (added and removed data files): no plan of the whole table, whatever its size. A file added
    and removed in between is read at neither end."""
    from dbt_incremental_mv.metadata import jvm_catalog as seam

    def whole_table_plan(*args):
        raise AssertionError("planned every live file of the table")

    adapter = project.adapter
    table = f"{project.test_schema}.cow_probe"
    with adapter.connection_named("cow"):
        adapter.execute(f"create table {table} (id int, v string) using iceberg")
        for low in (0, 10, 20):  # three files
            adapter.execute(f"insert into {table} select cast(id as int), cast(id as string) from range({low}, {low + 10})")
        metadata = adapter._metadata()
        start = metadata.main(table)
        adapter.execute(f"update {table} set v = 'x' where id = 3")  # rewrites the first file
        adapter.execute(f"insert into {table} values (100, 'n')")  # a new file ...
        adapter.execute(f"delete from {table} where id = 100")  # ... gone again
        adapter.execute(f"delete from {table} where id = 15")  # rewrites the second file
        metadata.forget(table)
        end = metadata.main(table)
        monkeypatch.setattr(seam, "scan_tasks", whole_table_plan)

        def rows_of(sql):
            _, found = adapter.execute(sql, fetch=True)
            return sorted(tuple(r) for r in found)

        with metadata.changed_files(table, start, end) as changed:
            assert (changed.removed_files, changed.added_files) == (2, 2), changed
            inserted = rows_of(f"select * from {changed.added_view} except all select * from {changed.removed_view}")
            deleted = rows_of(f"select * from {changed.removed_view} except all select * from {changed.added_view}")
    assert inserted == [(3, "x")]
    assert deleted == [(3, "3"), (15, "15")]


def test_a_v3_master_is_captured_by_row_lineage_with_duplicates_and_rows_copied_unchanged(project):
    """Capture by row lineage (logs/sql.py, ``_capture_by_lineage``): on a v3 copy-on-write
    master, the rows a commit copies unchanged into a new file keep their ``_row_id`` and
    sequence number and are not logged; rows equal by value (duplicates, an update to the same
    value, a key moved onto another row's values) are told apart by their ids. The images are
    the ones the comparison by value finds, and a table upgraded from v2 (rows with no id yet)
    falls back to the comparison by value. On a merge-on-read v3 master (deletion vectors) the
    same images, the files whose deletes changed read for their row ids only."""
    from dbt_incremental_mv.logs import sql as log_sql
    from dbt_incremental_mv.logs.capture_plan import broadcast_gone_ids
    from dbt_incremental_mv.logs.contract import LogSpec

    adapter = project.adapter
    schema = project.test_schema

    def rows_of(sql):
        _, found = adapter.execute(sql, fetch=True)
        return sorted((tuple(r) for r in found), key=str)

    def capture(table, version, lineage, merge_on_read=False):
        modes = "".join(f", 'write.{op}.mode' = 'merge-on-read'" for op in ("delete", "update", "merge") if merge_on_read)
        adapter.execute(
            f"create table {table} (id int, v string) using iceberg tblproperties ('format-version' = '{version}'{modes})"
        )
        for values in ("(1, 'a'), (2, 'b'), (3, null), (7, 'd')", "(5, 'd'), (5, 'd'), (6, 'e')", "(20, 'z')"):
            adapter.execute(f"insert into {table} values {values}")  # three files, duplicates in the second
        if version == 2:
            adapter.execute(f"alter table {table} set tblproperties ('format-version' = '3')")
        metadata = adapter._metadata()
        metadata.forget(table)
        start = metadata.main(table)
        adapter.execute(f"update {table} set v = 'b' where id = 2")  # to the same value: a D and an I all the same
        adapter.execute(f"update {table} set v = 'x' where id = 3")  # from NULL
        adapter.execute(f"delete from {table} where id = 5 and v = 'd'")  # both duplicates
        adapter.execute(f"insert into {table} values (6, 'e')")  # a duplicate of a row kept
        adapter.execute(f"update {table} set id = 1 where id = 7")  # key moved onto an existing key
        adapter.execute(f"update {table} set v = 'y' where id = 6 and v = 'e'")  # both copies of 6
        metadata.forget(table)
        end = metadata.main(table)
        spec = LogSpec(f"shop.{table}_log", f"{table}_log", "m", table, ("id",), True)
        anti = LogSpec(f"shop.{table}_anti", f"{table}_anti", "m", table, ("id",), True)
        for log in (spec, anti):
            adapter.execute(log_sql.create_log(log, [("id", "int"), ("v", "string")]))
        with metadata.changed_files(table, start, end) as changed:
            assert (changed.lineage_since is not None) is lineage, changed
            assert ("row lineage" in changed.describe()) is lineage
            # merge-on-read: the files given deletion vectors are read for their kept rows' ids only
            assert ("for their row ids only" in changed.describe()) is merge_on_read, changed.describe()
            # the commits' file statistics bound the rows they deleted or updated: copy-on-write
            # 7 (6 old rows, and the copy of 6 inserted since); deletion vectors name a file's
            # older deletes again (at least the 6); so few ids are broadcast
            if not lineage:
                assert changed.rows_gone_at_most is None, changed
            elif merge_on_read:
                assert changed.rows_gone_at_most is not None and changed.rows_gone_at_most >= 6, changed
            else:
                assert changed.rows_gone_at_most == 7, changed
            adapter.execute(log_sql.capture_by_files(
                spec, ["id", "v"], changed.removed_view, changed.added_view, end, lineage_since=changed.lineage_since,
                written_view=changed.written_view, gone_ids_broadcast=broadcast_gone_ids(changed.rows_gone_at_most),
            ))
            # the same images by the anti join, for gone rows too many to broadcast
            adapter.execute(log_sql.capture_by_files(
                anti, ["id", "v"], changed.removed_view, changed.added_view, end, lineage_since=changed.lineage_since,
                written_view=changed.written_view, gone_ids_broadcast=False,
            ))
        images = rows_of(f"select id, v, _mv_op from {table}_log where _mv_op in ('I', 'D')")
        assert rows_of(f"select id, v, _mv_op from {table}_anti where _mv_op in ('I', 'D')") == images
        return images

    expected = sorted([
        (2, "b", "D"), (2, "b", "I"), (3, None, "D"), (3, "x", "I"), (5, "d", "D"), (5, "d", "D"),
        (7, "d", "D"), (1, "d", "I"), (6, "e", "D"), (6, "y", "I"), (6, "y", "I"),
    ], key=str)
    with adapter.connection_named("lineage"):
        by_lineage = capture(f"{schema}.lineage_probe", 3, lineage=True)
        upgraded = capture(f"{schema}.upgraded_probe", 2, lineage=False)
        deletion_vectors = capture(f"{schema}.mor_probe", 3, lineage=True, merge_on_read=True)
    # by value, the update to the same value nets out (no row changed); by lineage it is logged
    # as the D and I of one row: the same view either way
    assert by_lineage == expected
    assert deletion_vectors == expected
    assert sorted(upgraded, key=str) == [r for r in expected if r[0] != 2]


def test_a_refreshs_cached_views_keep_their_analysed_plans(project):
    """The CACHE TABLEs of a refresh (refresh/publish.caching) store their analysed plans, not
    their SQL text: a cached view another one reads is not parsed and analysed again at every
    reference. The setting is the session's own again afterwards."""
    from dbt_incremental_mv.refresh.phases.publish import caching

    adapter = project.adapter
    views = ("mv_probe_inner", "mv_probe_outer")
    with adapter.connection_named("caching"):
        for step in caching([f"cache table `{views[0]}` as select 1 as x", f"cache table `{views[1]}` as select x from `{views[0]}`"]):
            for sql in step.statements:
                adapter.execute(sql)
        session = adapter.connections.get_thread_connection().handle.handle.session
        catalog = session._jsparkSession.sessionState().catalog()
        assert [catalog.getRawTempView(v).get().plan().isDefined() for v in views] == [True, True]
        _, table = adapter.execute("set spark.sql.legacy.storeAnalyzedPlanForView", fetch=True)
        assert [tuple(row) for row in table] == [("spark.sql.legacy.storeAnalyzedPlanForView", "false")]
        for view in views:
            adapter.execute(f"drop view if exists `{view}`")


def test_files_are_written_by_the_plugins_local_file_system_with_hadoops_permissions(project):
    """The embedded session's ``file:`` file system sets permissions without a chmod process per
    file (dbt_incremental_mv/runtime/local_fs.py); the files an Iceberg write leaves have the modes
    Hadoop's own would give them (0644 files, 0755 directories: its default umask 022), and
    their checksum files."""
    import os
    import stat

    from dbt_incremental_mv.runtime import local_fs

    adapter = project.adapter
    table = f"{project.test_schema}.permission_probe"
    with adapter.connection_named("permissions"):
        session = adapter.connections.get_thread_connection().handle.handle.session
        jvm = session._jvm
        file_system = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), session._jsc.hadoopConfiguration())
        assert file_system.getClass().getName() == local_fs.FILE_SYSTEM
        adapter.execute(f"create table {table} (x int) using iceberg")
        adapter.execute(f"insert into {table} values (1), (2)")
        _, files = adapter.execute(f"select file_path from {table}.files", fetch=True)
    paths = [row[0].removeprefix("file:") for row in files]
    assert paths
    for path in paths:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644, path
        assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o755, path
        assert os.path.isfile(os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.crc")), path


def test_the_iceberg_in_use_has_every_java_entry_point_the_metadata_reader_calls(project):
    """Else the metadata would be read through SQL (jvm_catalog.java_api_usable): on Spark 3.5 and 4
    (Iceberg 1.10.2, 1.11.0) the Java reader must be the one in use."""
    from dbt_incremental_mv.metadata.iceberg_java import iceberg_version, missing_java_api

    adapter = project.adapter
    with adapter.connection_named("java_api"):
        session = adapter.connections.get_thread_connection().handle.handle.session
        assert missing_java_api(session._jvm) is None, f"Iceberg {iceberg_version(session._jvm)}"
        assert adapter._metadata().in_jvm


def test_settings_made_through_the_session_are_what_set_and_reset_make(project):
    """A refresh's settings (the staging id, the cache planning) are made through the embedded
    session (Metadata.apply_settings), no statement each; RESET's value comes back after: the
    Spark configuration's when the session started with one, else none."""
    adapter = project.adapter
    with adapter.connection_named("settings"):
        metadata = adapter._metadata()
        assert metadata.in_jvm

        def setting(key):
            _, table = adapter.execute(f"set {key}", fetch=True)
            return tuple(table[0])[1]

        started = setting("spark.sql.shuffle.partitions")
        metadata.apply_settings((("spark.sql.shuffle.partitions", "3"), ("spark.wap.id", "probe")))
        assert (setting("spark.sql.shuffle.partitions"), setting("spark.wap.id")) == ("3", "probe")
        metadata.apply_settings((("spark.sql.shuffle.partitions", None), ("spark.wap.id", None)))
        after_apply = (setting("spark.sql.shuffle.partitions"), setting("spark.wap.id"))
        adapter.execute("set spark.sql.shuffle.partitions=3")
        adapter.execute("set spark.wap.id=probe")
        adapter.execute("reset spark.sql.shuffle.partitions")
        adapter.execute("reset spark.wap.id")
        assert after_apply == (setting("spark.sql.shuffle.partitions"), setting("spark.wap.id")) == (started, "<undefined>")


def test_a_cached_view_dropped_through_the_session_leaves_no_cached_data(project):
    """A refresh drops its cached views through the embedded session (Metadata.drop_temp_view, no
    statement): their cached data goes with them, as with DROP VIEW."""
    adapter = project.adapter
    with adapter.connection_named("uncache"):
        metadata = adapter._metadata()
        session = adapter.connections.get_thread_connection().handle.handle.session
        adapter.execute("cache table `mv_probe_cached` as select id * 7 as x from range(10)")
        same_plan = session.sql("select id * 7 as x from range(10)")
        assert same_plan.storageLevel.useMemory  # its data is cached
        metadata.drop_temp_view("mv_probe_cached")
        assert not same_plan.storageLevel.useMemory and not session.catalog.tableExists("mv_probe_cached")
