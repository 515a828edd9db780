"""Hadoop's local file system without a ``chmod`` process per file (local sessions).

Without Hadoop's native library (libhadoop: PySpark ships none), Hadoop's local file system
sets the permissions of every file and directory it creates by starting ``chmod`` in a new
process (``RawLocalFileSystem.setPermission`` -> ``Shell.execCommand``): every data file,
manifest, manifest list and metadata file of every commit, and their ``.crc`` files. Measured on
2 cores: 10-13 ms per file created through the ``file:`` file system (a py4j loop of 200
creates; 2-3 ms with the class below); Java Flight Recorder counted 1,648 ``chmod`` processes in
a 3-minute run of one generated view's refreshes.

The plugin's jar (``jars/``, built from ``java/`` by ``scripts/build_jar.py``) holds
``LocalFileSystemWithoutForks``: Hadoop's ``LocalFileSystem`` (checksums and all) whose raw file
system sets the same permission bits through ``java.nio``, and renames a file without ever
replacing an existing one (a hard link, then the old name removed), as Hadoop's FileSystem contract
says and a POSIX rename does not: Iceberg's Hadoop catalog commits by renaming to the next version's
name, and only this makes two processes' commits of one table a compare-and-swap (docs/catalogs.md). A local session (the embedded one, a
local Thrift Server) gets it as the ``file:`` scheme's file system, on the driver's class path,
unless the user chose a ``file:`` implementation (``spark.hadoop.fs.file.impl``).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from dbt_incremental_mv.runtime.iceberg_runtime import cache_dir

JAR = Path(__file__).parents[1] / "jars" / "dbt-incremental-mv-hadoop.jar"
FILE_SYSTEM = "dbtmv.hadoop.LocalFileSystemWithoutForks"
SCHEME_SETTING = "spark.hadoop.fs.file.impl"
CLASSPATH_SETTING = "spark.driver.extraClassPath"
SOURCE_DIGEST = "Source-SHA256"  # the jar manifest's digest of the sources it was built from


def cached_jar() -> Path | None:
    """The jar, copied into the plugin's cache under a name of its content (the JVM's class-data
    archive is keyed by the class path: an installed copy and a source checkout's share one); None
    when it cannot be (not shipped, cache not writable: the session then keeps Hadoop's own)."""
    try:
        data = JAR.read_bytes()
    except OSError:
        return None
    target = cache_dir() / "jars" / f"{JAR.stem}-{hashlib.sha256(data).hexdigest()[:16]}.jar"
    if target.is_file():
        return target
    partial = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(prefix=target.name, suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(partial, target)
    except OSError:
        return None
    finally:  # a write that failed leaves no partial file (as iceberg_runtime.relocate_jackson)
        if partial is not None and os.path.exists(partial):
            os.unlink(partial)
    return target


def with_local_file_system(settings: Mapping[str, str], jar: Path | None) -> dict[str, str]:
    """``settings`` of a local session with the ``file:`` scheme served by the plugin's file system
    from ``jar`` (appended to the driver's class path), unless they choose one already or there
    is no jar."""
    result = dict(settings)
    if SCHEME_SETTING in result or jar is None:
        return result
    classpath = result.get(CLASSPATH_SETTING)
    result[CLASSPATH_SETTING] = f"{classpath}{os.pathsep}{jar}" if classpath else str(jar)
    result[SCHEME_SETTING] = FILE_SYSTEM
    return result


def source_digest(java_root: Path) -> str:
    """The SHA-256 of the ``.java`` files under ``java_root`` (paths and contents, in path order):
    what the jar's manifest records, so that a test finds a jar not rebuilt after an edit."""
    digest = hashlib.sha256()
    for path in sorted(java_root.rglob("*.java")):
        digest.update(path.relative_to(java_root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
