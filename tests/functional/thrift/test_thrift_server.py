"""The local Spark Thrift Server launcher (dbt_incremental_mv.runtime.thrift_server)."""

import os
import socket
from pathlib import Path

import pytest

from dbt_incremental_mv.runtime.thrift_server import DEFAULT_MASTER, ThriftServerError, server_command, start_thrift_server

pytestmark = pytest.mark.thrift


def command_lines():
    """(PID, arguments) of every live process."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                arguments = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            yield int(entry.name), arguments


def processes_mentioning(text):
    """PIDs of live processes whose command line contains ``text``."""
    return [pid for pid, arguments in command_lines() if text in " ".join(arguments)]


def test_server_command(tmp_path):
    command = server_command(
        host="127.0.0.1", port=10123, warehouse=tmp_path / "wh", workdir=tmp_path, classpath=["/a.jar", "/b.jar"]
    )
    assert command[0].endswith("/pyspark/bin/spark-submit") and command[-1] == "spark-internal"
    assert "--jars" not in command
    assert command[command.index("--driver-class-path") + 1] == os.pathsep.join(["/a.jar", "/b.jar"])
    assert command[command.index("--master") + 1] == "local[2]"
    java_options = command[command.index("--driver-java-options") + 1]
    assert "-Dlog4j2.configurationFile=file:" in java_options and f"-Dderby.system.home={tmp_path}" in java_options
    conf = dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")
    assert conf["spark.sql.catalog.spark_catalog"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.spark_catalog.type"] == "hadoop"
    assert conf["spark.sql.catalog.spark_catalog.warehouse"] == str(tmp_path / "wh")
    assert conf["spark.sql.extensions"] == "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
    assert str(tmp_path / "metastore_db") in conf["spark.hadoop.javax.jdo.option.ConnectionURL"]
    hiveconf = [command[i + 1] for i, arg in enumerate(command) if arg == "--hiveconf"]
    assert hiveconf == ["hive.server2.thrift.bind.host=127.0.0.1", "hive.server2.thrift.port=10123"]


def test_server_keeps_its_files_in_its_workdir(thrift_server):
    if not hasattr(thrift_server, "workdir"):
        pytest.skip("DBT_MV_TEST_THRIFT: an external server")
    assert thrift_server.running()
    workdir = thrift_server.workdir
    # The Hive metastore HiveThriftServer2 always starts (Derby), confined to the workdir.
    assert (workdir / "metastore_db").is_dir() and (workdir / "derby.log").is_file()
    assert (thrift_server.warehouse / "default").is_dir()  # PyHive's `USE default` needs it
    assert processes_mentioning(str(workdir))


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_a_local_server_serves_file_with_the_plugins_file_system(thrift_server):
    """A server on a local master writes its files without a chmod process per file
    (dbt_incremental_mv/runtime/local_fs.py): the file system's jar on its class path, the setting given."""
    from dbt_incremental_mv.runtime import local_fs

    if not hasattr(thrift_server, "workdir") or int(os.environ.get("DBT_MV_TEST_THRIFT_WORKERS") or 0):
        pytest.skip("an external server, or one on a standalone cluster")
    if not os.environ.get("DBT_MV_TEST_THRIFT_MASTER", DEFAULT_MASTER).startswith("local"):
        pytest.skip("not a local master")
    java = [
        arguments for _, arguments in command_lines()
        if "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2" in arguments
        and str(thrift_server.workdir) in " ".join(arguments)
    ]
    assert java, "no server JVM found"
    arguments = java[0]
    assert f"{local_fs.SCHEME_SETTING.removeprefix('spark.hadoop.')}={local_fs.FILE_SYSTEM}" in " ".join(arguments)
    assert any(local_fs.JAR.stem in argument for argument in arguments)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_failed_start_reports_the_log_and_leaves_no_process(tmp_path):
    with pytest.raises(ThriftServerError) as failure:
        start_thrift_server(workdir=tmp_path, master="no-such-master", timeout=120)
    message = str(failure.value)
    assert "exited with code" in message and "spark-submit" in message
    assert "Master must either be yarn or start with spark" in message  # the log's tail
    assert not processes_mentioning(str(tmp_path))


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_start_timeout_stops_the_server(tmp_path):
    with pytest.raises(ThriftServerError, match="not ready within 1 s"):
        start_thrift_server(workdir=tmp_path, timeout=1)
    assert not processes_mentioning(str(tmp_path))


def test_busy_port_is_refused(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ThriftServerError, match="already in use"):
            start_thrift_server(workdir=tmp_path, port=port)
    assert not os.listdir(tmp_path) or not processes_mentioning(str(tmp_path))
