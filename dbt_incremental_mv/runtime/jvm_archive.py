"""A class-data-sharing (CDS) archive for the embedded session's JVM.

Starting Spark loads and verifies some ten thousand classes (Spark SQL, Iceberg, Hadoop), and
the first statements load thousands more: ~2.5 s of every ``dbt`` command on a 2-core machine,
more than a small refresh's own work. Java 17 can map the classes an earlier JVM loaded from an
archive instead (``-XX:SharedArchiveFile``; JEP 350 dynamic archives). Measured on the example
project (2 cores, idle): a ``dbt run`` with nothing to do 11.1 -> 8.4 s, a small refresh's
``dbt run`` about 3 s less. Peak speed is unchanged (the JIT is not touched).

- The archive is made for one classpath and one JVM: its file name is a hash of the ``java``
  binary, the PySpark jars and the session's jar settings, so a new PySpark, Iceberg jar or JDK
  gets a new archive. A JVM that cannot use an archive ignores it (silently: the ``cds`` log is
  off) and starts as before.
- It is built once, by a separate low-priority process that runs a small Iceberg workload in a
  temporary warehouse and dumps the classes it loaded (``-XX:ArchiveClassesAtExit``) to a
  temporary file renamed into place when complete: a dbt command never waits for it and never
  sees a half-written archive. The first embedded session without one starts that process;
  ``dbt-incremental-mv jvm-archive`` builds it in the foreground (``scripts/setup.sh`` does).
  A JVM that cannot dump one (a Java older than 13) is not asked again in the background for a day.
- Off with ``DBT_INCREMENTAL_MV_JVM_ARCHIVE=off``, or when the profile's own
  ``spark.driver.extraJavaOptions`` already choose a CDS setting.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from dbt_incremental_mv import environment
from dbt_incremental_mv.runtime.iceberg_runtime import cache_dir

SWITCH = environment.JVM_ARCHIVE.name
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# the JVM's own messages about archives (a mismatch, a skipped class) are not for dbt users
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
# a user who chose any of these manages class sharing: leave it alone
USER_CHOICES = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit")
# settings that decide the driver's classpath (the archive is only valid for the same one)
CLASSPATH_SETTINGS = ("spark.jars", "spark.jars.packages", "spark.driver.extraClassPath")
# a build that has not finished in this long died: another may take over
BUILD_TIMEOUT_S = 15 * 60
# a JVM that could not dump an archive (e.g. a Java older than 13) is not asked again for a day
FAILED_RETRY_S = 24 * 3600
KEEP_ARCHIVES = 3  # archives of other classpaths kept (several virtualenvs on one machine)

# What the builder runs: the kinds of statement a build and a fast refresh issue, so that the
# classes their planning, code generation and Iceberg commits load are in the archive.
WORKLOAD = (
    "create namespace if not exists spark_catalog.mv_cds",
    "create table spark_catalog.mv_cds.m (k bigint, g string, x decimal(12,2), d date) using iceberg "
    "tblproperties ('format-version'='3', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')",
    "create table spark_catalog.mv_cds.c (k bigint, g string, x decimal(12,2), d date) using iceberg "
    "tblproperties ('format-version'='2')",
    "insert into spark_catalog.mv_cds.m values (1, 'a', 1.50, date'2024-01-01'), (2, 'b', null, null)",
    "insert into spark_catalog.mv_cds.c select * from spark_catalog.mv_cds.m",
    "update spark_catalog.mv_cds.c set x = 2.00 where k = 1",
    "delete from spark_catalog.mv_cds.m where k = 2",
    "merge into spark_catalog.mv_cds.c t using (select * from spark_catalog.mv_cds.m) s on t.k = s.k "
    "when matched then delete when not matched then insert *",
    "call spark_catalog.system.create_changelog_view(table => 'mv_cds.c', changelog_view => 'mv_cds_changes')",
    "select * from mv_cds_changes",
    "alter table spark_catalog.mv_cds.m create branch mv_cds",
    "insert into spark_catalog.mv_cds.m.branch_mv_cds select k + 10, g, x, d from spark_catalog.mv_cds.m",
    "select m.g, count(*), sum(m.x), max(c.d), min(c.x) from spark_catalog.mv_cds.m m "
    "left join spark_catalog.mv_cds.c c on m.k <=> c.k where exists "
    "(select /*+ BROADCAST */ 1 from spark_catalog.mv_cds.c k where k.g <=> m.g) group by m.g",
    "select * from spark_catalog.mv_cds.m.snapshots",
    "select * from spark_catalog.mv_cds.m.refs",
    "show tables in spark_catalog.mv_cds",
    "describe table extended spark_catalog.mv_cds.m",
)


def enabled(settings: Mapping[str, str]) -> bool:
    """Whether the plugin manages the archive of a session with these settings."""
    if (environment.JVM_ARCHIVE.value() or "").strip().lower() in ("off", "0", "false", "no"):
        return False
    return not any(choice in settings.get(JAVA_OPTIONS, "") for choice in USER_CHOICES)


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java else "java"


def _file_identity(path: str) -> str:
    try:
        stat = os.stat(path)
    except OSError:
        return f"{path}:missing"
    return f"{path}:{stat.st_size}:{int(stat.st_mtime)}"


def archive_path(settings: Mapping[str, str]) -> Path:
    """Where the archive for a session with these settings is (or will be)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    # the JVM's class path is PySpark's jars directory: another virtualenv is another class path, and
    # a reinstall at the same path rewrites the jars (the JVM refuses an archive whose jars changed)
    parts = [_file_identity(_java()), f"pyspark {pyspark.__version__} in {jars}"]
    parts += sorted(_file_identity(str(p)) for p in jars.glob("*.jar")) if jars.is_dir() else []
    for key in CLASSPATH_SETTINGS:
        value = settings.get(key)
        if value:
            parts.append(
                f"{key}="
                + ",".join(_file_identity(item) if os.path.exists(item) else item for item in value.split(","))
            )
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return cache_dir() / "jvm" / f"spark-{key}.jsa"


def with_archive(settings: Mapping[str, str], archive: Path) -> dict[str, str]:
    """``settings`` with the driver JVM told to map ``archive``."""
    result = dict(settings)
    result[JAVA_OPTIONS] = f"{settings.get(JAVA_OPTIONS, '')} -XX:SharedArchiveFile={archive} {QUIET}".strip()
    return result


def session_options(settings: Mapping[str, str], build: bool = True) -> dict[str, str]:
    """The settings to start the embedded session with: the archive mapped when it exists;
    when it does not, its build started in the background (``build``) and the settings as they were."""
    if not enabled(settings):
        return dict(settings)
    archive = archive_path(settings)
    if archive.is_file():
        return with_archive(settings, archive)
    if build:
        start_build(settings, archive)
    return dict(settings)


def start_build(settings: Mapping[str, str], archive: Path) -> None:
    """Build the archive in a detached low-priority process (its output goes nowhere)."""
    if _building(archive) or _failed(archive):
        return
    with contextlib.suppress(OSError):  # on OSError no archive: the JVM starts as it always did
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dbt_incremental_mv.runtime.jvm_archive",
                "--background",
                json.dumps(dict(settings)),
                str(archive),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )


def _lock(archive: Path) -> Path:
    return archive.with_suffix(".building")


def _younger_than(marker: Path, seconds: float) -> bool:
    try:
        return time.time() - marker.stat().st_mtime < seconds
    except OSError:
        return False


def _failed(archive: Path) -> bool:
    return _younger_than(archive.with_suffix(".failed"), FAILED_RETRY_S)


def _building(archive: Path) -> bool:
    return _younger_than(_lock(archive), BUILD_TIMEOUT_S)


def _take_lock(archive: Path) -> bool:
    """Only one build per archive: the lock file is created exclusively (a stale one replaced)."""
    lock = _lock(archive)
    for _ in range(2):
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return True
        except FileExistsError:
            if _building(archive):
                return False
            try:
                lock.unlink()  # left by a build that died
            except OSError:
                return False
    return False


def build(settings: Mapping[str, str], archive: Path) -> bool:
    """Run the workload in a JVM that dumps its classes at exit; True when ``archive`` exists after."""
    if archive.is_file():
        return True
    archive.parent.mkdir(parents=True, exist_ok=True)
    if not _take_lock(archive):
        return False
    lock = _lock(archive)
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    try:
        try:
            with tempfile.TemporaryDirectory(prefix="dbt-mv-cds-") as warehouse:
                _run_workload(settings, warehouse, partial)
        except Exception:  # noqa: BLE001 - the JVM did not start or did not stop cleanly
            pass
        if partial.is_file() and partial.stat().st_size > 0:
            os.replace(partial, archive)
            _drop_old_archives(archive)
        else:  # no background build of it for a while (the foreground command still tries)
            archive.with_suffix(".failed").touch()
        return archive.is_file()
    finally:
        for leftover in (partial, lock):
            with contextlib.suppress(OSError):
                leftover.unlink()


def _run_workload(settings: Mapping[str, str], warehouse: str, partial: Path) -> None:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    conf = dict(settings)
    conf.update(
        {
            "spark.master": "local[1]",
            "spark.sql.warehouse.dir": warehouse,
            "spark.sql.catalog.spark_catalog": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.spark_catalog.type": "hadoop",
            "spark.sql.catalog.spark_catalog.warehouse": warehouse,
            JAVA_OPTIONS: f"{settings.get(JAVA_OPTIONS, '')} -XX:ArchiveClassesAtExit={partial} {QUIET}".strip(),
        }
    )
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    for statement in WORKLOAD:
        with contextlib.suppress(Exception):  # a statement this Spark cannot run only loads fewer classes
            spark.sql(statement).collect()
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    spark.stop()
    if gateway is not None:
        gateway.shutdown()
    if process is not None:  # the JVM exits on EOF of its stdin, writing the archive first
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=BUILD_TIMEOUT_S)


def _drop_old_archives(keep: Path) -> None:
    others = sorted(
        (p for p in keep.parent.glob("spark-*.jsa") if p != keep), key=lambda p: p.stat().st_mtime, reverse=True
    )
    for old in others[KEEP_ARCHIVES - 1 :]:
        with contextlib.suppress(OSError):
            old.unlink()


def main(argv: list[str]) -> int:
    background = argv[:1] == ["--background"]
    if background:
        argv = argv[1:]
        with contextlib.suppress(OSError):
            os.nice(10)  # leave the cores to the dbt command that started it
    settings, archive = json.loads(argv[0]), Path(argv[1])
    return 0 if build(settings, archive) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
