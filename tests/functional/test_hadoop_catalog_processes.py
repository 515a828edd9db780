"""The embedded session's ``file:`` file system never renames a file onto an existing one.

Iceberg's Hadoop catalog (the embedded default) commits a table by renaming its new metadata file
to the next version's name after checking, under a lock of its own JVM only, that the name is free.
Hadoop's local file system renames by POSIX rename, which replaces an existing file: two processes
committing the same table at once could both write version N+1, and one commit reported successful
was lost (a window of two system calls: rare, real). The plugin's file system (runtime/local_fs.py,
java/dbtmv/hadoop/LocalFileSystemWithoutForks.java) renames a file by a hard link that fails when
the name exists, as Hadoop's FileSystem contract asks: the loser's commit fails and Iceberg retries
it. Asked of the session's own ``file:`` file system, and of Hadoop's for contrast.
"""

import pytest


@pytest.fixture
def jvm(project):
    """The embedded session's JVM and Hadoop configuration (the project fixture started the session)."""
    from pyspark.sql import SparkSession

    from tests.functional.catalogs import catalog_kind

    if catalog_kind() != "hadoop":
        pytest.skip("the embedded Hadoop catalog's file system")
    spark = SparkSession.getActiveSession()
    return spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()


def write(jvm, fs, path, text):
    out = fs.create(jvm.org.apache.hadoop.fs.Path(path), True)
    out.write(bytearray(text.encode()))
    out.close()


def read(path):
    with open(path) as f:
        return f.read()


def test_a_rename_never_replaces_a_file_so_one_of_two_commits_fails(jvm, tmp_path):
    jvm, conf = jvm
    Path = jvm.org.apache.hadoop.fs.Path
    fs = Path(tmp_path.as_uri()).getFileSystem(conf)
    assert fs.getClass().getName() == "dbtmv.hadoop.LocalFileSystemWithoutForks"
    write(jvm, fs, str(tmp_path / "v2.metadata.json"), "first")
    write(jvm, fs, str(tmp_path / "mine.metadata.json"), "second")
    # the second commit of version 2 fails; the first stays
    assert not fs.rename(Path(str(tmp_path / "mine.metadata.json")), Path(str(tmp_path / "v2.metadata.json")))
    assert read(tmp_path / "v2.metadata.json") == "first" and (tmp_path / "mine.metadata.json").exists()
    # a free name: renamed, the old name gone, checksums (.crc) along
    assert fs.rename(Path(str(tmp_path / "mine.metadata.json")), Path(str(tmp_path / "v3.metadata.json")))
    assert read(tmp_path / "v3.metadata.json") == "second" and not (tmp_path / "mine.metadata.json").exists()
    assert (tmp_path / ".v3.metadata.json.crc").exists() and not (tmp_path / ".mine.metadata.json.crc").exists()
    # directories keep Hadoop's rename
    (tmp_path / "d").mkdir()
    assert fs.rename(Path(str(tmp_path / "d")), Path(str(tmp_path / "e"))) and (tmp_path / "e").is_dir()
    # Hadoop's own local file system replaced the first commit's file
    hadoop = jvm.org.apache.hadoop.fs.LocalFileSystem()
    hadoop.initialize(jvm.java.net.URI("file:///"), conf)
    write(jvm, hadoop, str(tmp_path / "theirs.metadata.json"), "third")
    assert hadoop.rename(Path(str(tmp_path / "theirs.metadata.json")), Path(str(tmp_path / "v3.metadata.json")))
    assert read(tmp_path / "v3.metadata.json") == "third"
