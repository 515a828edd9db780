"""The local file system without a chmod process per file (dbt_incremental_mv/runtime/local_fs.py)."""

import zipfile
from pathlib import Path

from dbt_incremental_mv.runtime import local_fs
from dbt_incremental_mv.runtime.embedded import session_settings

REPO = Path(__file__).resolve().parents[3]


def manifest(jar: Path) -> dict[str, str]:
    """The jar's manifest attributes (continuation lines joined)."""
    text = zipfile.ZipFile(jar).read("META-INF/MANIFEST.MF").decode()
    unfolded = text.replace("\r\n", "\n").replace("\n ", "")
    return dict(line.split(": ", 1) for line in unfolded.splitlines() if ": " in line)


def test_the_shipped_jar_is_built_from_the_java_sources_in_the_repository():
    # an edit of java/ without `python scripts/build_jar.py` fails here
    assert local_fs.JAR.is_file()
    assert manifest(local_fs.JAR)[local_fs.SOURCE_DIGEST] == local_fs.source_digest(REPO / "java")
    names = zipfile.ZipFile(local_fs.JAR).namelist()
    assert local_fs.FILE_SYSTEM.replace(".", "/") + ".class" in names


def test_the_source_digest_follows_every_java_file(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "X.java").write_text("class X {}")
    before = local_fs.source_digest(tmp_path)
    (tmp_path / "a" / "X.java").write_text("class X { }")
    edited = local_fs.source_digest(tmp_path)
    (tmp_path / "Y.java").write_text("")
    assert len({before, edited, local_fs.source_digest(tmp_path)}) == 3  # an edit, a new file: each a new digest


def test_the_jar_is_cached_under_a_name_of_its_content(tmp_path, monkeypatch):
    monkeypatch.setenv("DBT_INCREMENTAL_MV_CACHE", str(tmp_path))
    jar = local_fs.cached_jar()
    assert jar is not None and jar.parent == tmp_path / "jars" and jar.read_bytes() == local_fs.JAR.read_bytes()
    assert jar.name.startswith("dbt-incremental-mv-hadoop-") and local_fs.cached_jar() == jar
    assert [p.name for p in (tmp_path / "jars").iterdir()] == [jar.name]  # no partial file left


def test_a_failed_copy_leaves_no_partial_file_and_no_file_system(tmp_path, monkeypatch):
    monkeypatch.setenv("DBT_INCREMENTAL_MV_CACHE", str(tmp_path))

    def full_disk(*_):
        raise OSError("No space left on device")

    monkeypatch.setattr(local_fs.os, "replace", full_disk)
    assert local_fs.cached_jar() is None
    assert list((tmp_path / "jars").iterdir()) == []


def test_no_jar_no_file_system(tmp_path, monkeypatch):
    monkeypatch.setattr(local_fs, "JAR", tmp_path / "missing.jar")
    assert local_fs.cached_jar() is None
    assert local_fs.with_local_file_system({"spark.master": "local[2]"}, None) == {"spark.master": "local[2]"}


JAR = Path("/cache/jars/dbt-incremental-mv-hadoop-0123.jar")


def test_a_local_session_gets_the_file_system_on_its_driver_class_path():
    settings = local_fs.with_local_file_system({"spark.master": "local[2]"}, JAR)
    assert settings[local_fs.SCHEME_SETTING] == local_fs.FILE_SYSTEM
    assert settings[local_fs.CLASSPATH_SETTING] == str(JAR)


def test_the_users_class_path_is_kept_and_their_file_system_wins():
    kept = local_fs.with_local_file_system({local_fs.CLASSPATH_SETTING: "/opt/extra.jar"}, JAR)
    assert kept[local_fs.CLASSPATH_SETTING].split(":") == ["/opt/extra.jar", str(JAR)]
    chosen = {local_fs.SCHEME_SETTING: "org.apache.hadoop.fs.RawLocalFileSystem", local_fs.CLASSPATH_SETTING: "/x.jar"}
    assert local_fs.with_local_file_system(chosen, JAR) == chosen


def test_the_embedded_session_uses_it_unless_the_profile_chooses():
    default = session_settings(warehouse=Path("/wh"), user_params={}, iceberg_jars="bundled", jars=None, file_system_jar=JAR)
    assert default[local_fs.SCHEME_SETTING] == local_fs.FILE_SYSTEM
    theirs = session_settings(
        warehouse=Path("/wh"), user_params={local_fs.SCHEME_SETTING: "org.apache.hadoop.fs.LocalFileSystem"},
        iceberg_jars="bundled", jars=None, file_system_jar=JAR,
    )
    assert theirs[local_fs.SCHEME_SETTING] == "org.apache.hadoop.fs.LocalFileSystem"
    assert local_fs.CLASSPATH_SETTING not in theirs
