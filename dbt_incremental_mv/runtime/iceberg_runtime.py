"""Locate or prepare the Apache Iceberg runtime jars for an embedded Spark session.

The Iceberg runtime is chosen by the installed PySpark: its Spark line (3.5, 4.0, 4.1) and
Scala version (read off PySpark's own ``spark-core_<scala>`` jar) name the artifact
``org.apache.iceberg:iceberg-spark-runtime-<line>_<scala>`` and ``ICEBERG_FOR_SPARK`` its
version. A Spark line Iceberg does not support fails with a message naming both.

- **Spark 3.5, offline**: the runtime jar comes from the PyPI package
  ``snowpark-connect-deps-iceberg``. That jar lacks Iceberg's relocated Jackson classes, so
  the Jackson jars PySpark ships are relocated here, once, into a cached jar beside it: the
  pure-Python equivalent of ``jarjar`` with the rule
  ``com.fasterxml.jackson.** -> org.apache.iceberg.shaded.com.fasterxml.jackson.@1``.
- **Spark 4**: no PyPI package ships a Spark 4 Iceberg runtime. The runtime jar (one shaded
  jar, no dependencies) is downloaded once from Maven Central (or the repository named by
  ``DBT_INCREMENTAL_MV_MAVEN_REPOSITORY``) into the cache, its SHA-1 checked against the
  repository's; later sessions are offline. ``iceberg_jars: packages`` lets Spark's own
  resolver (Ivy, ``spark.jars.packages``) fetch it instead, with the user's Ivy settings.

Everything here is idempotent: jars are written atomically into a cache directory and reused
afterwards.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dbt_incremental_mv import environment

ICEBERG_VERSION = "1.10.2"  # the bundled runtime's (Spark 3.5)
# The Iceberg release whose Spark runtime each Spark line gets: the bundled one where Iceberg
# builds it (3.5, 4.0), else the first release that supports the line (4.1: Iceberg 1.11.0).
ICEBERG_FOR_SPARK = {"3.5": ICEBERG_VERSION, "4.0": ICEBERG_VERSION, "4.1": "1.11.0"}
BUNDLED_SPARK_LINE = "3.5"
MAVEN_REPOSITORY_ENV = environment.MAVEN_REPOSITORY.name
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
DOWNLOAD_TIMEOUT_S = 120
JACKSON_JARS = ("jackson-core", "jackson-databind", "jackson-annotations")

_SLASHED_FROM = b"com/fasterxml/jackson/"
_SLASHED_TO = b"org/apache/iceberg/shaded/com/fasterxml/jackson/"
_DOTTED_FROM = b"com.fasterxml.jackson."
_DOTTED_TO = b"org.apache.iceberg.shaded.com.fasterxml.jackson."


class IcebergRuntimeError(RuntimeError):
    """The Iceberg runtime jars could not be found or prepared."""


@dataclass(frozen=True)
class SparkLine:
    """The installed PySpark's Spark release and Scala version: what picks the Iceberg runtime."""

    version: str  # "3.5.9", "4.0.2"
    scala: str  # "2.12", "2.13"

    @property
    def line(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def iceberg(self) -> str:
        """The Iceberg version of this line's runtime (IcebergRuntimeError when Iceberg has none)."""
        try:
            return ICEBERG_FOR_SPARK[self.line]
        except KeyError:
            supported = ", ".join(ICEBERG_FOR_SPARK)
            raise IcebergRuntimeError(
                f"PySpark {self.version} is installed, and Apache Iceberg publishes no Spark runtime for "
                f"Spark {self.line}: dbt-incremental-mv runs on Spark {supported}. Install one of them "
                "(e.g. `pip install 'pyspark>=3.5.1,<3.6'`), or name Iceberg jars built for your Spark "
                "in the profile's server_side_parameters (spark.jars) with iceberg_jars: none."
            ) from None

    @property
    def artifact(self) -> str:
        return f"iceberg-spark-runtime-{self.line}_{self.scala}"

    @property
    def package(self) -> str:
        """The Maven coordinates of the Iceberg runtime for this Spark (``spark.jars.packages``)."""
        return f"org.apache.iceberg:{self.artifact}:{self.iceberg}"

    @property
    def runtime_jar_name(self) -> str:
        return f"{self.artifact}-{self.iceberg}.jar"

    @property
    def bundled(self) -> bool:
        """Whether the offline runtime (a PyPI package) is built for this Spark."""
        return self.line == BUNDLED_SPARK_LINE


def installed_spark() -> SparkLine:
    """The Spark line of the installed PySpark, its Scala version read off the ``spark-core`` jar."""
    jars = _pyspark_jars_dir()  # its error says to install pyspark
    import pyspark

    cores = sorted(p.name for p in jars.glob("spark-core_2.*-*.jar"))
    if not cores:
        raise IcebergRuntimeError(f"PySpark {pyspark.__version__} ships no spark-core jar in {jars}: reinstall pyspark")
    scala = cores[-1][len("spark-core_") :].split("-", 1)[0]
    return SparkLine(version=pyspark.__version__, scala=scala)


@dataclass(frozen=True)
class IcebergJars:
    """Jars to put on the driver classpath (``spark.jars``) of an embedded session."""

    runtime: Path
    relocated_jackson: Path | None = None  # the bundled runtime's Jackson (Maven's runtime shades its own)

    @property
    def classpath(self) -> list[str]:
        return [str(jar) for jar in (self.runtime, self.relocated_jackson) if jar is not None]


# Sizes of the constant-pool entries that are not CONSTANT_Utf8 (JVMS 4.4), keyed by tag.
_CONSTANT_SIZES = {
    3: 4,
    4: 4,
    5: 8,
    6: 8,
    7: 2,
    8: 2,
    9: 4,
    10: 4,
    11: 4,
    12: 4,
    15: 3,
    16: 2,
    17: 4,
    18: 4,
    19: 2,
    20: 2,
}


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
    base = environment.CACHE.value() or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "dbt-incremental-mv"
    )
    return Path(base)


def _pyspark_jars_dir() -> Path:
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - pyspark is a dependency
        raise IcebergRuntimeError("pyspark is not installed: pip install 'dbt-incremental-mv'") from exc
    return Path(pyspark.__file__).parent / "jars"


def _bundled_runtime_jar(spark: SparkLine) -> Path:
    try:
        import snowpark_connect_deps_iceberg as bundle
    except ImportError as exc:
        raise IcebergRuntimeError(
            "No Iceberg runtime jar is available offline: the package 'snowpark-connect-deps-iceberg' "
            "is not installed. Either `pip install snowpark-connect-deps-iceberg==1.0.3`, or set "
            "`iceberg_jars: packages` in the profile to let Spark download "
            f"{spark.package} from Maven Central."
        ) from exc
    jar = Path(bundle.__file__).parent / "jars" / spark.runtime_jar_name
    if not jar.is_file():
        raise IcebergRuntimeError(f"{jar} is missing: reinstall snowpark-connect-deps-iceberg==1.0.3")
    return jar


def runtime_jars(spark: SparkLine | None = None, *, http_client: bool = False) -> IcebergJars:
    """The Iceberg runtime jars for the installed Spark, as files: the bundled offline runtime on
    Spark 3.5, the Maven Central runtime (downloaded once into the cache) on Spark 4 - and on Spark
    3.5 too when the catalog needs Iceberg's HTTP client (``http_client``: a REST catalog), which
    the bundled jar lacks (see ``uses_http_client``)."""
    spark = spark or installed_spark()
    if spark.bundled and not http_client:
        return prepare_offline_jars(spark)
    return IcebergJars(runtime=maven_runtime_jar(spark))


def uses_http_client(settings: Mapping[str, str]) -> bool:
    """Whether a Spark configuration defines an Iceberg REST catalog: Iceberg's HTTP client
    (Apache HttpClient 5, relocated to ``org.apache.iceberg.shaded.org.apache.hc``) is then loaded,
    and the bundled offline runtime was stripped of it (as of its relocated Jackson): every
    statement fails with ``NoClassDefFoundError: org/apache/iceberg/shaded/org/apache/hc/...``."""
    for key, value in settings.items():
        if not key.startswith("spark.sql.catalog."):
            continue
        if key.endswith(".type") and str(value).strip().lower() == "rest":
            return True
        if key.endswith(".catalog-impl") and str(value).strip().endswith(".RESTCatalog"):
            return True
    return False


def maven_runtime_jar(spark: SparkLine) -> Path:
    """The Iceberg runtime jar of ``spark`` in the cache, downloaded once (see ``maven_jar``)."""
    return maven_jar(
        "org.apache.iceberg",
        spark.artifact,
        spark.iceberg,
        needed_by=f"Spark {spark.version} needs Iceberg's runtime {spark.package}, which no Python package ships",
    )


def maven_jar(group: str, artifact: str, version: str, classifier: str = "", *, needed_by: str = "") -> Path:
    """The jar ``group:artifact:version[:classifier]`` in the cache's ``jars`` folder, downloaded once from the
    Maven repository (``DBT_INCREMENTAL_MV_MAVEN_REPOSITORY``, default Maven Central), checked against
    the repository's SHA-1 and renamed into place atomically (concurrent first uses each download,
    one rename wins). ``needed_by`` starts the error message (why the jar is wanted)."""
    name = f"{artifact}-{version}{f'-{classifier}' if classifier else ''}.jar"
    target = cache_dir() / "jars" / name
    if target.is_file():
        return target
    repository = (environment.MAVEN_REPOSITORY.value() or MAVEN_CENTRAL).rstrip("/")
    url = f"{repository}/{group.replace('.', '/')}/{artifact}/{version}/{name}"
    partial = None
    try:
        with urllib.request.urlopen(f"{url}.sha1", timeout=DOWNLOAD_TIMEOUT_S) as response:
            expected = response.read().decode("ascii", "replace").split()[0].strip().lower()
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(prefix=target.name, suffix=".tmp", dir=target.parent)
        digest = hashlib.sha1()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != expected:
            raise IcebergRuntimeError(f"{url} does not match its SHA-1 ({digest.hexdigest()} != {expected}): not used")
        os.chmod(partial, 0o644)  # mkstemp's 0600 would hide it from other users of a shared cache
        os.replace(partial, target)
        partial = None
    except (OSError, urllib.error.URLError, ValueError) as exc:
        why = f"{needed_by}, and it" if needed_by else ":".join(filter(None, (group, artifact, version, classifier)))
        raise IcebergRuntimeError(
            f"{why} could not be downloaded from {url}: {exc}. With network access, retry; behind a "
            f"Maven mirror, set {MAVEN_REPOSITORY_ENV} to its URL; offline, put the jar at {target} "
            "(or name it in the profile's server_side_parameters: spark.jars, with iceberg_jars: none)."
        ) from exc
    finally:
        if partial is not None and os.path.exists(partial):
            os.unlink(partial)
    return target


def prepare_offline_jars(spark: SparkLine | None = None, *, http_client: bool = False) -> IcebergJars:
    """Return the bundled Iceberg runtime jar and a cached relocated Jackson jar (Spark 3.5 only;
    not for a REST catalog: ``http_client``, see ``uses_http_client``)."""
    spark = spark or installed_spark()
    if http_client:
        raise IcebergRuntimeError(
            "The profile defines an Iceberg REST catalog, and the bundled offline Iceberg runtime lacks the "
            "HTTP client a REST catalog needs (org.apache.iceberg.shaded.org.apache.hc). Use iceberg_jars: auto "
            f"(downloads {spark.package} once into the cache) or iceberg_jars: packages in the profile."
        )
    if not spark.bundled:
        raise IcebergRuntimeError(
            f"The bundled offline Iceberg runtime is built for Spark {BUNDLED_SPARK_LINE}; PySpark {spark.version} "
            f"is installed. Use iceberg_jars: auto (downloads {spark.package} once into the cache) or "
            "iceberg_jars: packages (Spark's own resolver) in the profile."
        )
    runtime = _bundled_runtime_jar(spark)
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
                f"Set {environment.CACHE.name} to a writable directory."
            ) from exc
    return IcebergJars(runtime=runtime, relocated_jackson=target)
