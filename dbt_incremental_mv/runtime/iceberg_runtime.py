"""Locate or prepare the Apache Iceberg runtime jars for an embedded Spark session.

Users with network access let Spark fetch Iceberg the standard way
(``spark.jars.packages``). Machines without Maven access (air-gapped laptops, CI)
take the runtime jar from the PyPI package ``snowpark-connect-deps-iceberg`` instead.
That jar lacks Iceberg's relocated Jackson classes, so the Jackson jars PySpark
ships are relocated here, once, into a cached jar beside it: the pure-Python
equivalent of ``jarjar`` with the rule
``com.fasterxml.jackson.** -> org.apache.iceberg.shaded.com.fasterxml.jackson.@1``.

Everything here is idempotent: the relocated jar is written atomically into a cache
directory keyed by the inputs' names and sizes, and reused afterwards.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

ICEBERG_VERSION = "1.10.2"
ICEBERG_PACKAGE = f"org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:{ICEBERG_VERSION}"
RUNTIME_JAR_NAME = f"iceberg-spark-runtime-3.5_2.12-{ICEBERG_VERSION}.jar"
JACKSON_JARS = ("jackson-core", "jackson-databind", "jackson-annotations")

_SLASHED_FROM = b"com/fasterxml/jackson/"
_SLASHED_TO = b"org/apache/iceberg/shaded/com/fasterxml/jackson/"
_DOTTED_FROM = b"com.fasterxml.jackson."
_DOTTED_TO = b"org.apache.iceberg.shaded.com.fasterxml.jackson."


class IcebergRuntimeError(RuntimeError):
    """The Iceberg runtime jars could not be found or prepared."""


@dataclass(frozen=True)
class IcebergJars:
    """Jars to put on the driver classpath (``spark.jars``) of an embedded session."""

    runtime: Path
    relocated_jackson: Path

    @property
    def classpath(self) -> list[str]:
        return [str(self.runtime), str(self.relocated_jackson)]


# Sizes of the constant-pool entries that are not CONSTANT_Utf8 (JVMS 4.4), keyed by tag.
_CONSTANT_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}


def _relocate_name(raw: bytes) -> bytes:
    return raw.replace(_SLASHED_FROM, _SLASHED_TO).replace(_DOTTED_FROM, _DOTTED_TO)


def relocate_class(data: bytes) -> bytes:
    """Rewrite every Jackson class name in a class file's constant pool.

    Only CONSTANT_Utf8 entries hold names and descriptors; the rest of the class
    file refers to constants by index, so it is copied unchanged. The patterns are
    ASCII and modified UTF-8 never has ASCII bytes inside a multi-byte sequence, so
    a byte-level replacement is exact.
    """
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise IcebergRuntimeError("not a Java class file")
    count = struct.unpack_from(">H", data, 8)[0]
    out = bytearray(data[:10])
    pos = 10
    index = 1
    while index < count:
        tag = data[pos]
        if tag == 1:
            length = struct.unpack_from(">H", data, pos + 1)[0]
            value = _relocate_name(data[pos + 3 : pos + 3 + length])
            out += bytes([1]) + struct.pack(">H", len(value)) + value
            pos += 3 + length
        elif tag in _CONSTANT_SIZES:
            size = _CONSTANT_SIZES[tag]
            out += data[pos : pos + 1 + size]
            pos += 1 + size
            if tag in (5, 6):  # long and double take two slots
                index += 1
        else:
            raise IcebergRuntimeError(f"unknown constant-pool tag {tag} in class file")
        index += 1
    out += data[pos:]
    return bytes(out)


def relocate_jackson(jackson_jars: list[Path], target: Path) -> None:
    """Merge ``jackson_jars`` into one jar at ``target`` with relocated packages."""
    seen: set[str] = set()
    fd, tmp_name = tempfile.mkstemp(prefix=target.name, suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp_name, "w", zipfile.ZIP_DEFLATED) as out:
            for jar in jackson_jars:
                with zipfile.ZipFile(jar) as source:
                    for info in source.infolist():
                        name = info.filename
                        if name.startswith("META-INF/") or info.is_dir() or name in seen:
                            continue
                        seen.add(name)
                        data = source.read(info)
                        if name.endswith(".class"):
                            data = relocate_class(data)
                        out.writestr(_relocate_name(name.encode()).decode(), data)
        os.replace(tmp_name, target)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)


def cache_dir() -> Path:
    base = os.environ.get("DBT_INCREMENTAL_MV_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "dbt-incremental-mv"
    )
    return Path(base)


def _pyspark_jars_dir() -> Path:
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - pyspark is a dependency
        raise IcebergRuntimeError("pyspark is not installed: pip install 'dbt-incremental-mv'") from exc
    return Path(pyspark.__file__).parent / "jars"


def _bundled_runtime_jar() -> Path:
    try:
        import snowpark_connect_deps_iceberg as bundle
    except ImportError as exc:
        raise IcebergRuntimeError(
            "No Iceberg runtime jar is available offline: the package 'snowpark-connect-deps-iceberg' "
            "is not installed. Either `pip install snowpark-connect-deps-iceberg==1.0.3`, or set "
            "`iceberg_jars: packages` in the profile to let Spark download "
            f"{ICEBERG_PACKAGE} from Maven Central."
        ) from exc
    jar = Path(bundle.__file__).parent / "jars" / RUNTIME_JAR_NAME
    if not jar.is_file():
        raise IcebergRuntimeError(f"{jar} is missing: reinstall snowpark-connect-deps-iceberg==1.0.3")
    return jar


def prepare_offline_jars() -> IcebergJars:
    """Return the bundled Iceberg runtime jar and a cached relocated Jackson jar."""
    runtime = _bundled_runtime_jar()
    jars_dir = _pyspark_jars_dir()
    jackson: list[Path] = []
    for name in JACKSON_JARS:
        found = sorted(jars_dir.glob(f"{name}-2.*.jar"))
        if not found:
            raise IcebergRuntimeError(f"PySpark ships no {name} jar in {jars_dir}: is pyspark 3.5 installed?")
        jackson.append(found[-1])
    key = hashlib.sha256("|".join(f"{j.name}:{j.stat().st_size}" for j in jackson).encode()).hexdigest()[:16]
    target_dir = cache_dir() / "jars"
    target = target_dir / f"iceberg-shaded-jackson-{key}.jar"
    if not target.is_file():
        try:
            target_dir.mkdir(parents=True, exist_ok=True)
            relocate_jackson(jackson, target)
        except OSError as exc:
            raise IcebergRuntimeError(
                f"Cannot write the relocated Jackson jar to {target_dir}: {exc}. "
                "Set DBT_INCREMENTAL_MV_CACHE to a writable directory."
            ) from exc
    return IcebergJars(runtime=runtime, relocated_jackson=target)
