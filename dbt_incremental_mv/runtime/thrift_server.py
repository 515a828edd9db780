"""A local Spark Thrift Server with the same Iceberg setup as the embedded session.

For tests and for trying ``method: thrift`` without a cluster: starts PySpark's own
``spark-submit`` with ``HiveThriftServer2`` on one host and port, waits until it accepts
connections and stops it again (the whole process group, so no JVM is left behind).

The Iceberg catalog is the embedded mode's: ``spark_catalog`` is an Iceberg Hadoop catalog
(``org.apache.iceberg.spark.SparkCatalog``, ``type=hadoop``) in a warehouse directory.
``HiveThriftServer2`` itself always starts a Hive metastore client (it forces
``spark.sql.catalogImplementation=hive``); nothing of ours is stored there, and its Derby
files (``metastore_db``, ``derby.log``), Hive's scratch and resource directories and Spark's
local directories all go to a work directory instead of the current directory or ``/tmp``.

Settings that matter (verified with PySpark 3.5.9 and Iceberg 1.10.2):

- the Iceberg jars go on ``--driver-class-path``, i.e. on the driver's system classpath, which is
  where ``spark.sql.extensions`` and the catalog are loaded from (a ``--jars``-only server was once
  seen failing with ``NoClassDefFoundError: org/apache/iceberg/spark/PathIdentifier``; with this
  configuration ``--jars`` worked too). With a non-local master they are also shipped to the
  executors with ``spark.jars``: executors without them fail every write with
  ``ClassNotFoundException: org.apache.iceberg.spark.source.SparkWrite$WriterFactory``;
- the Hadoop catalog needs a ``default`` namespace (a directory in the warehouse): PyHive,
  hence dbt-spark's ``method: thrift``, runs ``USE `default``` when it connects.

Importing this module is cheap (dbt imports every ``dbt_*`` module): it starts nothing.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dbt_incremental_mv.runtime import local_fs
from dbt_incremental_mv.runtime.embedded import LOG4J_CONFIG, STATUS_RETENTION
from dbt_incremental_mv.runtime.iceberg_runtime import runtime_jars, uses_http_client

THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
DEFAULT_HOST = "127.0.0.1"
CLUSTER_HOST = "127.0.0.1"  # where a local standalone cluster's master and workers listen
DEFAULT_MASTER = "local[2]"
DEFAULT_START_TIMEOUT = 180.0
STOP_TIMEOUT = 30.0


class ThriftServerError(RuntimeError):
    """The Spark Thrift Server could not be started."""


def spark_home() -> Path:
    """PySpark's package directory: it ships ``bin/spark-submit`` and every Spark jar."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ThriftServerError("pyspark is not installed: pip install 'dbt-incremental-mv'")
    return Path(spec.origin).parent


def free_port(host: str = DEFAULT_HOST) -> int:
    """A TCP port nobody listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def accepts_connections(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def server_settings(*, warehouse: Path, workdir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Spark settings of the server: Iceberg as in the embedded session, all files in workdir."""
    settings = {
        "spark.app.name": "dbt-incremental-mv-thrift-server",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "2g",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.spark_catalog": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.spark_catalog.type": "hadoop",
        "spark.sql.catalog.spark_catalog.warehouse": str(warehouse),
        "spark.sql.catalog.spark_catalog.cache-enabled": "false",
        # The Hive metastore the Thrift server insists on: unused by Iceberg, kept in workdir.
        "spark.sql.warehouse.dir": str(workdir / "spark-warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={workdir / 'metastore_db'};create=true",
        "spark.local.dir": str(workdir / "tmp"),
        **STATUS_RETENTION,  # a server lives long: Spark's defaults keep 1,000 executions' plans
    }
    settings.update(extra or {})
    return settings


def server_command(
    *,
    host: str,
    port: int,
    warehouse: Path,
    workdir: Path,
    master: str = DEFAULT_MASTER,
    classpath: Sequence[str] | None = None,
    conf: Mapping[str, str] | None = None,
) -> list[str]:
    """The ``spark-submit`` command line that starts the server (``classpath``: the Iceberg jars)."""
    if classpath is None:
        classpath = runtime_jars(http_client=uses_http_client(conf or {})).classpath
    java_options = " ".join(
        [
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}",
            f"-Dderby.system.home={workdir}",  # derby.log
            f"-Djava.io.tmpdir={workdir / 'tmp'}",  # Hive's <session>_resources, operation logs, scratch
        ]
    )
    command = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master",
        master,
        "--class",
        THRIFT_SERVER_CLASS,
        "--driver-class-path",
        os.pathsep.join(classpath),
        "--driver-java-options",
        java_options,
    ]
    for key, value in server_settings(warehouse=warehouse, workdir=workdir, extra=conf).items():
        command += ["--conf", f"{key}={value}"]
    command += [
        "--hiveconf",
        f"hive.server2.thrift.bind.host={host}",
        "--hiveconf",
        f"hive.server2.thrift.port={port}",
        "spark-internal",
    ]
    return command


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the child gets SIGTERM if the process that started it dies (even by SIGKILL)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _spawn(command: Sequence[str], *, cwd: Path, env: Mapping[str, str], log: Path) -> subprocess.Popen:
    """Start a JVM launcher script in its own session (process group), output to ``log``."""
    with open(log, "ab") as log_file:
        return subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )


def stop_process_group(process: subprocess.Popen, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM the process group ``process`` leads, SIGKILL it if it is still there after timeout."""
    pgid = process.pid  # started with start_new_session: it leads its own group
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        gone = False
        while time.monotonic() < deadline:
            process.poll()  # reap the leader, or the group never disappears
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                gone = True
                break
            time.sleep(0.2)
        if gone:
            break
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL was sent: wait no longer
        process.wait(timeout=5)


def _tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:]) or "(the log is empty)"


@dataclass
class ThriftServer:
    """A running (or stopped) local Spark Thrift Server (and its standalone cluster, if any)."""

    host: str
    port: int
    warehouse: Path
    workdir: Path
    command: list[str]
    process: subprocess.Popen
    log_path: Path
    master: str = DEFAULT_MASTER
    started_in: float = 0.0
    cluster: list[subprocess.Popen] = field(default_factory=list, repr=False)
    _cleanup: list = field(default_factory=list, repr=False)

    def log_tail(self, lines: int = 60) -> str:
        return _tail(self.log_path, lines)

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop the server, then the cluster's workers and master; remove a temporary workdir."""
        stop_process_group(self.process, timeout)
        for process in reversed(self.cluster):
            stop_process_group(process, timeout)
        self.cluster.clear()
        for cleanup in self._cleanup:
            cleanup()
        self._cleanup.clear()

    def __enter__(self) -> ThriftServer:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def _wait_until(ready, *, what: str, processes: Sequence[tuple[subprocess.Popen, Path]], timeout: float, details: str):
    """Poll ``ready()`` until true; raise ThriftServerError with log tails if a process exits or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        for process, log in processes:
            if process.poll() is not None:
                raise ThriftServerError(
                    f"{what}: a process exited with code {process.returncode} before it was ready.\n{details}\n"
                    f"Last lines of its log ({log}):\n{_tail(log)}"
                )
        if ready():
            return
        if time.monotonic() > deadline:
            tails = "\n".join(f"Last lines of {log}:\n{_tail(log)}" for _, log in processes)
            raise ThriftServerError(f"{what}: not ready within {timeout:.0f} s.\n{details}\n{tails}")
        time.sleep(0.5)


def _alive_workers(host: str, webui_port: int) -> int:
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{host}:{webui_port}/json/", timeout=2) as response:
            return int(json.load(response).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


def start_standalone_cluster(
    *, host: str, workdir: Path, env: Mapping[str, str], workers: int, timeout: float, memory: str = "1g"
) -> tuple[str, list[subprocess.Popen]]:
    """A Spark standalone master and ``workers`` one-core workers on ``host``; returns (master URL, processes)."""
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, webui = free_port(host), free_port(host)
    url = f"spark://{host}:{port}"
    processes: list[subprocess.Popen] = []
    logs: list[Path] = []
    try:
        log = workdir / "spark-master.log"
        master_cmd = [spark_class, "org.apache.spark.deploy.master.Master", "--host", host, "--port", str(port)]
        processes.append(_spawn([*master_cmd, "--webui-port", str(webui)], cwd=workdir, env=env, log=log))
        logs.append(log)
        for index in range(workers):
            work = workdir / f"worker-{index}"
            work.mkdir(exist_ok=True)
            log = workdir / f"spark-worker-{index}.log"
            worker_cmd = [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", host, "--cores", "1"]
            worker_cmd += ["--memory", memory, "--webui-port", str(free_port(host)), "--work-dir", str(work), url]
            processes.append(_spawn(worker_cmd, cwd=workdir, env=env, log=log))
            logs.append(log)
        _wait_until(
            lambda: _alive_workers(host, webui) >= workers,
            what=f"The Spark standalone cluster at {url}",
            processes=list(zip(processes, logs)),
            timeout=timeout,
            details=f"Waiting for {workers} workers to register with the master.",
        )
    except BaseException:
        for process in reversed(processes):
            stop_process_group(process)
        raise
    return url, processes


def start_thrift_server(
    *,
    host: str = DEFAULT_HOST,
    port: int | None = None,
    warehouse: str | os.PathLike | None = None,
    workdir: str | os.PathLike | None = None,
    master: str = DEFAULT_MASTER,
    workers: int = 0,
    conf: Mapping[str, str] | None = None,
    classpath: Sequence[str] | None = None,
    timeout: float = DEFAULT_START_TIMEOUT,
) -> ThriftServer:
    """Start the server and return once it accepts connections on host:port.

    ``workdir`` (default: a new temporary directory, removed by ``stop()``) receives the
    server log (``thrift-server.log``), the Derby metastore and every temporary file;
    ``warehouse`` (default ``<workdir>/warehouse``) is the Iceberg warehouse; ``port``
    defaults to a free port. With ``workers`` > 0 the server runs on a Spark standalone
    cluster started on 127.0.0.1 first (a master and that many one-core workers; ``master``
    is then ignored). With any master but ``local``, the Iceberg jars are also shipped to the
    executors (``spark.jars``).

    Raises ThriftServerError, with the tail of the log, if the server (or the cluster) exits
    or is not ready within ``timeout`` seconds; everything started is stopped then.
    """
    cleanup: list = []
    if workdir is None:
        temp = tempfile.TemporaryDirectory(prefix="dbt-mv-thrift-")
        cleanup.append(temp.cleanup)
        work = Path(temp.name)
    else:
        work = Path(workdir).resolve()
    cluster: list[subprocess.Popen] = []
    try:
        if port and not port_is_free(host, port):
            # Otherwise whatever listens there would pass for the server.
            raise ThriftServerError(f"Cannot start the Spark Thrift Server: {host}:{port} is already in use.")
        port = port or free_port(host)
        (work / "tmp").mkdir(parents=True, exist_ok=True)
        house = Path(warehouse).resolve() if warehouse is not None else work / "warehouse"
        # PyHive connects with `USE default`; in a Hadoop catalog a namespace is a directory.
        (house / "default").mkdir(parents=True, exist_ok=True)
        if classpath is None:
            classpath = runtime_jars(http_client=uses_http_client(conf or {})).classpath
        env = {**os.environ, "SPARK_HOME": str(spark_home())}
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        settings = dict(conf or {})
        started = time.monotonic()
        if workers > 0:
            java_options = f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()} -Djava.io.tmpdir={work / 'tmp'}"
            env.update(
                SPARK_LOCAL_IP=CLUSTER_HOST,
                SPARK_LOCAL_DIRS=str(work / "tmp"),
                SPARK_DAEMON_JAVA_OPTS=java_options,
            )
            master, cluster = start_standalone_cluster(
                host=CLUSTER_HOST, workdir=work, env=env, workers=workers, timeout=timeout
            )
            settings = {
                "spark.executor.extraJavaOptions": java_options,
                "spark.executor.memory": "1g",
                "spark.executor.cores": "1",
                "spark.cores.max": str(workers),
                "spark.driver.host": CLUSTER_HOST,
                **settings,
            }
        if not master.startswith("local"):
            # Executors read and write Iceberg data files: ship them the jars too (--jars).
            settings = {"spark.jars": ",".join(classpath), **settings}
        elif local_fs.SCHEME_SETTING not in settings and (jar := local_fs.cached_jar()) is not None:
            # one JVM writes every file: no chmod process per file (runtime/local_fs.py)
            classpath = [*classpath, str(jar)]
            settings[local_fs.SCHEME_SETTING] = local_fs.FILE_SYSTEM
        command = server_command(
            host=host, port=port, warehouse=house, workdir=work, master=master, classpath=classpath, conf=settings
        )
        log = work / "thrift-server.log"
        process = _spawn(command, cwd=work, env=env, log=log)
    except BaseException:
        for started_process in reversed(cluster):
            stop_process_group(started_process)
        for cleanup_step in cleanup:
            cleanup_step()
        raise
    server = ThriftServer(
        host=host,
        port=port,
        warehouse=house,
        workdir=work,
        command=command,
        process=process,
        log_path=log,
        master=master,
        cluster=cluster,
        _cleanup=cleanup,
    )
    try:
        _wait_until(
            lambda: accepts_connections(host, port),
            what=f"The Spark Thrift Server on {host}:{port}",
            processes=[(process, log)],
            timeout=max(timeout - (time.monotonic() - started), 1.0),
            details=f"Command: {shlex.join(command)}",
        )
    except BaseException:
        server.stop()
        raise
    server.started_in = time.monotonic() - started
    return server
