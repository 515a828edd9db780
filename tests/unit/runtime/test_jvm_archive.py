"""The JVM class-data-sharing archive: which archive a session maps, and when one is built."""

import os
import time

import pytest

from dbt_incremental_mv.runtime import jvm_archive

BASE = {"spark.jars": "/j/runtime.jar,/j/jackson.jar", "spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=x"}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DBT_INCREMENTAL_MV_CACHE", str(tmp_path))
    monkeypatch.delenv(jvm_archive.SWITCH, raising=False)
    return tmp_path


def test_the_archive_is_keyed_by_the_classpath():
    same = jvm_archive.archive_path(dict(BASE))
    assert same == jvm_archive.archive_path(dict(BASE, **{"spark.app.name": "other"}))  # not a classpath setting
    assert same.parent.name == "jvm" and same.suffix == ".jsa"
    for key, value in [("spark.jars", "/j/runtime.jar"), ("spark.jars.packages", "g:a:1"), ("spark.driver.extraClassPath", "/x")]:
        assert jvm_archive.archive_path(dict(BASE, **{key: value})) != same, key


def test_a_rewritten_jar_gets_a_new_archive(tmp_path):
    jar = tmp_path / "extra.jar"
    jar.write_bytes(b"one")
    before = jvm_archive.archive_path(dict(BASE, **{"spark.jars": str(jar)}))
    jar.write_bytes(b"three")
    assert jvm_archive.archive_path(dict(BASE, **{"spark.jars": str(jar)})) != before


def test_pyspark_reinstalled_at_the_same_path_gets_a_new_archive(tmp_path, monkeypatch):
    import pyspark

    jars = tmp_path / "pyspark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"one")
    monkeypatch.setattr(pyspark, "__file__", str(tmp_path / "pyspark" / "__init__.py"))
    before = jvm_archive.archive_path(BASE)
    (jars / "spark-core.jar").write_bytes(b"rebuilt")  # same name, another file
    assert jvm_archive.archive_path(BASE) != before


def test_an_existing_archive_is_mapped_quietly_after_the_users_options():
    archive = jvm_archive.archive_path(BASE)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    options = jvm_archive.session_options(BASE, build=False)["spark.driver.extraJavaOptions"]
    assert options.startswith("-Dlog4j2.configurationFile=x ")
    assert f"-XX:SharedArchiveFile={archive}" in options
    assert "-Xlog:cds=off" in options  # a JVM that cannot use it says nothing


def test_no_archive_yet_leaves_the_settings_alone_and_starts_one_build(monkeypatch):
    started = []
    monkeypatch.setattr(jvm_archive, "start_build", lambda settings, archive: started.append(archive))
    assert jvm_archive.session_options(BASE) == BASE
    assert started == [jvm_archive.archive_path(BASE)]
    assert jvm_archive.session_options(BASE, build=False) == BASE and len(started) == 1


@pytest.mark.parametrize("options", ["-Xshare:off", "-XX:SharedArchiveFile=/mine.jsa", "-XX:ArchiveClassesAtExit=/a.jsa"])
def test_a_users_own_class_sharing_choice_is_left_alone(options, monkeypatch):
    monkeypatch.setattr(jvm_archive, "start_build", lambda *a: pytest.fail("no build for a user's own choice"))
    settings = dict(BASE, **{"spark.driver.extraJavaOptions": options})
    assert not jvm_archive.enabled(settings)
    assert jvm_archive.session_options(settings) == settings


def test_the_switch_turns_it_off(monkeypatch):
    monkeypatch.setenv(jvm_archive.SWITCH, "off")
    monkeypatch.setattr(jvm_archive, "start_build", lambda *a: pytest.fail("switched off"))
    assert jvm_archive.session_options(BASE) == BASE


def test_one_build_at_a_time_and_a_dead_builds_lock_is_taken_over():
    archive = jvm_archive.archive_path(BASE)
    archive.parent.mkdir(parents=True)
    assert jvm_archive._take_lock(archive)
    assert not jvm_archive._take_lock(archive)  # a build is running
    assert not jvm_archive.build(BASE, archive)
    old = time.time() - jvm_archive.BUILD_TIMEOUT_S - 60
    os.utime(jvm_archive._lock(archive), (old, old))
    assert jvm_archive._take_lock(archive)  # that build died long ago


def test_a_build_publishes_the_archive_only_when_the_jvm_wrote_it(monkeypatch):
    archive = jvm_archive.archive_path(BASE)
    written = []

    def workload(settings, warehouse, partial):
        written.append(partial)
        if len(written) == 2:
            partial.write_bytes(b"classes")

    monkeypatch.setattr(jvm_archive, "_run_workload", workload)
    assert not jvm_archive.build(BASE, archive)  # the JVM wrote nothing: no archive, no lock left
    assert not archive.exists() and not jvm_archive._lock(archive).exists()
    monkeypatch.setattr(jvm_archive.subprocess, "Popen", lambda *a, **k: pytest.fail("a failed build is not retried at once"))
    jvm_archive.start_build(BASE, archive)
    assert jvm_archive.build(BASE, archive)  # the foreground command tries anyway
    assert archive.read_bytes() == b"classes" and not written[1].exists()


def test_old_archives_of_other_classpaths_are_dropped(cache):
    folder = cache / "jvm"
    folder.mkdir()
    now = time.time()
    for age in range(5):
        path = folder / f"spark-old{age}.jsa"
        path.write_bytes(b"x")
        os.utime(path, (now - 100 * (age + 1), now - 100 * (age + 1)))
    keep = folder / "spark-new.jsa"
    keep.write_bytes(b"x")
    jvm_archive._drop_old_archives(keep)
    assert sorted(p.name for p in folder.iterdir()) == ["spark-new.jsa", "spark-old0.jsa", "spark-old1.jsa"]


def test_a_jvm_that_cannot_start_leaves_no_archive_and_no_lock(monkeypatch):
    archive = jvm_archive.archive_path(BASE)

    def unrecognized_option(settings, warehouse, partial):
        raise RuntimeError("Java gateway process exited before sending its port number")

    monkeypatch.setattr(jvm_archive, "_run_workload", unrecognized_option)
    assert not jvm_archive.build(BASE, archive)
    assert not archive.exists() and not jvm_archive._lock(archive).exists()
    assert jvm_archive._failed(archive)
