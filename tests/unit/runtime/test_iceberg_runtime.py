import struct
import zipfile
from pathlib import Path

import pytest

from dbt_incremental_mv.runtime import iceberg_runtime
from dbt_incremental_mv.runtime.iceberg_runtime import IcebergRuntimeError, SparkLine, relocate_class

SPARK_35 = SparkLine("3.5.9", "2.12")  # the bundled runtime's line (whatever PySpark runs the tests)


def prepare_offline_jars():
    return iceberg_runtime.prepare_offline_jars(SPARK_35)


def constant_pool_utf8(data: bytes) -> list[str]:
    """The CONSTANT_Utf8 strings of a class file (an independent, minimal parser)."""
    count = struct.unpack_from(">H", data, 8)[0]
    sizes = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}
    pos, index, strings = 10, 1, []
    while index < count:
        tag = data[pos]
        if tag == 1:
            length = struct.unpack_from(">H", data, pos + 1)[0]
            strings.append(data[pos + 3 : pos + 3 + length].decode("utf-8", "replace"))
            pos += 3 + length
        else:
            pos += 1 + sizes[tag]
            index += tag in (5, 6)
        index += 1
    return strings


def make_class(strings: list[bytes], tail: bytes = b"\x00\x21\x00\x01") -> bytes:
    pool = b"".join(b"\x01" + struct.pack(">H", len(s)) + s for s in strings)
    pool += b"\x05" + struct.pack(">q", 42)  # a long: takes two slots
    count = len(strings) + 2 + 1
    return b"\xca\xfe\xba\xbe\x00\x00\x00\x34" + struct.pack(">H", count) + pool + tail


def test_relocates_slashed_and_dotted_names_and_keeps_the_rest():
    data = make_class(
        [b"com/fasterxml/jackson/core/JsonFactory", b"(Lcom/fasterxml/jackson/core/JsonParser;)V",
         b"com.fasterxml.jackson.databind.Module", b"java/lang/Object", "caf\u00e9".encode()]
    )
    out = relocate_class(data)
    assert constant_pool_utf8(out) == [
        "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactory",
        "(Lorg/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonParser;)V",
        "org.apache.iceberg.shaded.com.fasterxml.jackson.databind.Module",
        "java/lang/Object",
        "caf\u00e9",
    ]
    assert out.endswith(b"\x00\x21\x00\x01")


def test_rejects_what_is_not_a_class_file():
    with pytest.raises(IcebergRuntimeError):
        relocate_class(b"PK\x03\x04 not a class")


def test_prepared_jar_holds_relocated_jackson_and_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("DBT_INCREMENTAL_MV_CACHE", str(tmp_path))
    jars = prepare_offline_jars()
    assert jars.runtime.name == f"iceberg-spark-runtime-3.5_2.12-{iceberg_runtime.ICEBERG_VERSION}.jar"
    with zipfile.ZipFile(jars.relocated_jackson) as jar:
        names = jar.namelist()
        factory = jar.read("org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder.class")
    assert not any(name.startswith(("com/", "META-INF")) for name in names)
    assert "org/apache/iceberg/shaded/com/fasterxml/jackson/databind/ObjectMapper.class" in names
    assert not any("com/fasterxml" in s and "shaded" not in s for s in constant_pool_utf8(factory))
    mtime = jars.relocated_jackson.stat().st_mtime_ns
    assert prepare_offline_jars().relocated_jackson.stat().st_mtime_ns == mtime  # reused, not rebuilt


def test_missing_bundle_fails_with_what_to_do(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_bundle(name, *args, **kwargs):
        if name == "snowpark_connect_deps_iceberg":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_bundle)
    with pytest.raises(IcebergRuntimeError, match="iceberg_jars: packages"):
        prepare_offline_jars()


def test_unwritable_cache_fails_clearly(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("DBT_INCREMENTAL_MV_CACHE", str(blocker / "cache"))
    with pytest.raises(IcebergRuntimeError, match="DBT_INCREMENTAL_MV_CACHE"):
        prepare_offline_jars()
    assert not Path(blocker / "cache").exists()


def test_the_installed_spark_is_read_off_pyspark():
    spark = iceberg_runtime.installed_spark()
    import pyspark

    assert spark.version == pyspark.__version__ and spark.scala in ("2.12", "2.13")
    assert spark.package == f"org.apache.iceberg:iceberg-spark-runtime-{spark.line}_{spark.scala}:{spark.iceberg}"


def test_a_spark_line_iceberg_does_not_support_fails_naming_it():
    with pytest.raises(IcebergRuntimeError, match=r"PySpark 4\.3\.0 is installed.*Spark 4\.3.*Spark 3\.5, 4\.0, 4\.1"):
        iceberg_runtime.SparkLine("4.3.0", "2.13").package


class FakeRepository:
    """A Maven repository served from memory: path -> bytes."""

    def __init__(self, files):
        self.files, self.requests = files, []

    def urlopen(self, url, timeout=None):
        import io
        import urllib.error

        self.requests.append(url)
        path = url.split("/maven2/", 1)[1]
        if path not in self.files:
            raise urllib.error.HTTPError(url, 404, "Not Found", {}, None)
        return io.BytesIO(self.files[path])


def test_the_spark_4_runtime_is_downloaded_once_checked_and_cached(tmp_path, monkeypatch):
    import hashlib
    import urllib.request

    monkeypatch.setenv("DBT_INCREMENTAL_MV_CACHE", str(tmp_path))
    monkeypatch.setenv(iceberg_runtime.MAVEN_REPOSITORY_ENV, "https://mirror.example/maven2/")
    spark = iceberg_runtime.SparkLine("4.0.2", "2.13")
    jar = b"PK\x03\x04 the runtime"
    path = "org/apache/iceberg/iceberg-spark-runtime-4.0_2.13/1.10.2/iceberg-spark-runtime-4.0_2.13-1.10.2.jar"
    repository = FakeRepository({path: jar, path + ".sha1": hashlib.sha1(jar).hexdigest().encode() + b"  x.jar\n"})
    monkeypatch.setattr(urllib.request, "urlopen", repository.urlopen)
    jars = iceberg_runtime.runtime_jars(spark)
    assert jars.classpath == [str(tmp_path / "jars" / "iceberg-spark-runtime-4.0_2.13-1.10.2.jar")]
    assert jars.runtime.read_bytes() == jar and jars.runtime.stat().st_mode & 0o777 == 0o644
    assert repository.requests == [f"https://mirror.example/maven2/{path}.sha1", f"https://mirror.example/maven2/{path}"]
    assert iceberg_runtime.runtime_jars(spark) == jars and len(repository.requests) == 2  # cached: no new request
    assert [p.name for p in (tmp_path / "jars").iterdir()] == [jars.runtime.name]  # no partial file left


def test_a_runtime_download_that_fails_or_does_not_match_says_what_to_do(tmp_path, monkeypatch):
    import urllib.request

    monkeypatch.setenv("DBT_INCREMENTAL_MV_CACHE", str(tmp_path))
    spark = iceberg_runtime.SparkLine("4.1.1", "2.13")
    path = "org/apache/iceberg/iceberg-spark-runtime-4.1_2.13/1.11.0/iceberg-spark-runtime-4.1_2.13-1.11.0.jar"
    monkeypatch.setattr(urllib.request, "urlopen", FakeRepository({}).urlopen)
    with pytest.raises(IcebergRuntimeError, match=r"iceberg-spark-runtime-4\.1_2\.13:1\.11\.0.*404.*DBT_INCREMENTAL_MV_MAVEN_REPOSITORY"):
        iceberg_runtime.runtime_jars(spark)
    monkeypatch.setattr(urllib.request, "urlopen", FakeRepository({path: b"tampered", path + ".sha1": b"0" * 40}).urlopen)
    with pytest.raises(IcebergRuntimeError, match="does not match its SHA-1"):
        iceberg_runtime.runtime_jars(spark)
    assert not (tmp_path / "jars").exists() or not any((tmp_path / "jars").iterdir())
