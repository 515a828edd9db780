"""The Iceberg catalog the functional tests run on (issue 39, item 2).

``DBT_MV_TEST_CATALOG`` picks it for a whole pytest process (one Spark session per process, its
catalog fixed when the JVM starts):

- ``hadoop`` (default): Iceberg's Hadoop catalog in the embedded warehouse, the plugin's default.
  Its commit is a rename to the next version's name under a lock of one JVM; the plugin's ``file:``
  file system makes that rename fail when the name exists (Hadoop's would replace the file), so
  commits are atomic across processes on the machine's local disk too.
- ``jdbc``: Iceberg's JDBC catalog on a PostgreSQL server started here (Debian's ``postgresql``
  package, ``initdb`` into a temporary directory, trust authentication on 127.0.0.1, a free port),
  with PostgreSQL's JDBC driver downloaded once from Maven Central into the plugin's cache. A
  commit is one conditional ``UPDATE`` of the table's metadata location: atomic across processes.
- ``rest``: an Iceberg REST catalog server started here: Iceberg's own REST test fixture
  (``RESTCatalogServer``, what the ``apache/iceberg-rest-fixture`` image runs: the REST protocol
  in front of a JDBC catalog, here on a SQLite file) in a JVM of its own, its jars downloaded once
  from Maven Central into the plugin's cache (Hadoop's from PySpark). The client is Spark's
  ``type: rest`` catalog, as against Polaris, Nessie, Lakekeeper, Glue's or Unity's endpoints;
  a commit is a REST request with requirements the server checks atomically.
- ``hive``: a Hive Metastore service started here: the standalone metastore in PySpark's own jars
  (``org.apache.hadoop.hive.metastore.HiveMetaStore``, Hive 2.3) on an embedded Derby database, in a
  JVM of its own. Iceberg commits a Hive table under a metastore lock, which needs the metastore's
  transaction tables: a production metastore gets them from ``schematool``; here a first start with
  ``hive.in.test`` creates them (Hive's own test bootstrap), and the service then runs without it
  (that flag also refuses the lock requests Iceberg sends).

The profile differs from the default only in ``server_side_parameters``, as a user's would
(docs/catalogs.md).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from dbt_incremental_mv.runtime.iceberg_runtime import _pyspark_jars_dir, maven_jar

CATALOG_ENV = "DBT_MV_TEST_CATALOG"
CATALOGS = ("hadoop", "jdbc", "rest", "hive")
POSTGRESQL_DRIVER = ("org.postgresql", "postgresql", "42.7.14")
# Iceberg's REST catalog test fixture and its runtime closure (mvn dependency:list of
# iceberg-open-api:1.10.0:test-fixtures, iceberg-core:1.10.0:tests, jetty-servlet 11.0.25 and sqlite-jdbc)
REST_FIXTURE = (
    ("org.apache.iceberg", "iceberg-open-api", "1.10.0", "test-fixtures"),
    ("org.apache.iceberg", "iceberg-core", "1.10.0", "tests"),
    ("org.apache.iceberg", "iceberg-core", "1.10.0", ""),
    ("org.apache.iceberg", "iceberg-api", "1.10.0", ""),
    ("org.apache.iceberg", "iceberg-common", "1.10.0", ""),
    ("org.apache.iceberg", "iceberg-bundled-guava", "1.10.0", ""),
    ("com.fasterxml.jackson.core", "jackson-annotations", "2.19.2", ""),
    ("com.fasterxml.jackson.core", "jackson-core", "2.19.2", ""),
    ("com.fasterxml.jackson.core", "jackson-databind", "2.19.2", ""),
    ("com.github.ben-manes.caffeine", "caffeine", "2.9.3", ""),
    ("commons-codec", "commons-codec", "1.17.0", ""),
    ("commons-io", "commons-io", "2.16.1", ""),
    ("io.airlift", "aircompressor", "0.27", ""),
    ("org.apache.avro", "avro", "1.12.0", ""),
    ("org.apache.commons", "commons-compress", "1.26.2", ""),
    ("org.apache.commons", "commons-lang3", "3.14.0", ""),
    ("org.apache.httpcomponents.client5", "httpclient5", "5.5", ""),
    ("org.apache.httpcomponents.core5", "httpcore5", "5.3.4", ""),
    ("org.apache.httpcomponents.core5", "httpcore5-h2", "5.3.4", ""),
    ("org.roaringbitmap", "RoaringBitmap", "1.3.0", ""),
    ("org.eclipse.jetty.toolchain", "jetty-jakarta-servlet-api", "5.0.2", ""),
    ("org.eclipse.jetty", "jetty-http", "11.0.25", ""),
    ("org.eclipse.jetty", "jetty-io", "11.0.25", ""),
    ("org.eclipse.jetty", "jetty-security", "11.0.25", ""),
    ("org.eclipse.jetty", "jetty-server", "11.0.25", ""),
    ("org.eclipse.jetty", "jetty-servlet", "11.0.25", ""),
    ("org.eclipse.jetty", "jetty-util", "11.0.25", ""),
    ("org.slf4j", "slf4j-api", "2.0.17", ""),
    ("org.slf4j", "slf4j-simple", "2.0.17", ""),
    ("org.xerial", "sqlite-jdbc", "3.50.3.0", ""),
)
# Hadoop's Configuration and file system, from PySpark's own jars
PYSPARK_HADOOP_JARS = ("hadoop-client-api-*.jar", "hadoop-client-runtime-*.jar", "commons-logging-*.jar")


def catalog_kind() -> str:
    kind = os.environ.get(CATALOG_ENV, "hadoop")
    if kind not in CATALOGS:
        raise ValueError(f"{CATALOG_ENV}={kind!r}: one of {', '.join(CATALOGS)}")
    return kind


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    user: str
    database: str = "postgres"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"


def _postgres_bin() -> Path:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    found = candidates[-1] if candidates else shutil.which("initdb")
    if not found:
        raise RuntimeError(
            f"{CATALOG_ENV}=jdbc needs a PostgreSQL server: `apt-get install postgresql` (scripts/test_catalogs.sh does)"
        )
    return Path(found).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def postgres_server(directory: Path):
    """A throwaway PostgreSQL server in ``directory``, stopped at exit (run as root: as the
    ``postgres`` user, PostgreSQL refuses root, in a directory of its own, removed at exit)."""
    binaries = _postgres_bin()
    as_user: list[str] = []
    if os.geteuid() != 0:
        directory.mkdir(parents=True, exist_ok=True)
    else:
        as_user = ["runuser", "-u", "postgres", "--"]
        account = pwd.getpwnam("postgres")
        # the server runs in a directory of its own under /tmp: pytest's temporary directories are
        # 0700 and any other pytest run resets them to that, which took the server's data away
        # mid-run ("could not stat data directory": Permission denied)
        directory = Path(tempfile.mkdtemp(prefix="dbt-mv-postgres-"))
        os.chown(directory, account.pw_uid, account.pw_gid)
    data, port, user = directory / "data", _free_port(), "mv"
    try:
        subprocess.run([*as_user, str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", user,
                        "--no-sync", "-E", "UTF8"], check=True, capture_output=True)
        options = f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        subprocess.run([*as_user, str(binaries / "pg_ctl"), "-D", str(data), "-o", options,
                        "-l", str(directory / "server.log"), "-w", "start"], check=True, capture_output=True)
        try:
            yield PostgresServer("127.0.0.1", port, user)
        finally:
            subprocess.run([*as_user, str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                           capture_output=True)
    finally:
        if as_user:
            shutil.rmtree(directory, ignore_errors=True)


def spark_catalog_parameters(kind: str, uri: str, **options: str) -> dict[str, str]:
    """server_side_parameters that make spark_catalog an Iceberg catalog of type ``kind`` at ``uri``
    (``options``: more of the catalog's properties)."""
    prefix = "spark.sql.catalog.spark_catalog"
    return {f"{prefix}.type": kind, f"{prefix}.uri": uri, **{f"{prefix}.{key}": value for key, value in options.items()}}


def jdbc_catalog_parameters(server: PostgresServer, driver_jar: Path) -> dict[str, str]:
    """server_side_parameters that make spark_catalog Iceberg's JDBC catalog on ``server``."""
    return {
        # V1: the catalog's tables with Iceberg views (dbt's view materialization)
        **spark_catalog_parameters("jdbc", server.jdbc_url, **{"jdbc.user": server.user, "jdbc.password": "",
                                                               "jdbc.schema-version": "V1"}),
        "spark.jars": str(driver_jar),
    }


def postgresql_driver() -> Path:
    return maven_jar(*POSTGRESQL_DRIVER, needed_by="The JDBC catalog's tests need PostgreSQL's JDBC driver")


def rest_fixture_classpath() -> list[str]:
    jars = [str(maven_jar(*coordinate, needed_by="The REST catalog's tests need Iceberg's REST test fixture"))
            for coordinate in REST_FIXTURE]
    pyspark_jars = _pyspark_jars_dir()
    for pattern in PYSPARK_HADOOP_JARS:
        jars += sorted(str(p) for p in pyspark_jars.glob(pattern))[-1:]
    return jars


@contextlib.contextmanager
def rest_catalog_server(directory: Path):
    """Iceberg's REST catalog test fixture on a free port, in a JVM of its own, stopped at exit:
    yields its URI. Its backing JDBC catalog is a SQLite file in ``directory``; its warehouse too."""
    directory.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    env = {**os.environ, "CATALOG_URI": f"jdbc:sqlite:{directory / 'catalog.db'}",
           "CATALOG_WAREHOUSE": str(directory / "warehouse"), "CATALOG_JDBC_SCHEMA__VERSION": "V1",
           "CATALOG_REST_PORT": str(port)}  # CATALOG_A_B__C: the server's property a.b-c
    classpath = os.pathsep.join(rest_fixture_classpath())
    uri = f"http://127.0.0.1:{port}"
    with open(directory / "server.log", "w") as log:
        server = subprocess.Popen(["java", "-Xmx512m", "-cp", classpath, "org.apache.iceberg.rest.RESTCatalogServer"],
                                  env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_for_port(port, server, directory / "server.log", "the REST catalog server")
            with urllib.request.urlopen(f"{uri}/v1/config", timeout=30):
                pass
            yield uri
        finally:
            _stop(server)


def _wait_for_port(port: int, process: subprocess.Popen, log: Path, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start: {log.read_text()[-3000:]}") from None
            time.sleep(0.3)


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def hive_metastore(directory: Path):
    """A Hive Metastore service (PySpark's Hive 2.3 jars, embedded Derby) on a free port, in a JVM
    of its own, stopped at exit: yields its thrift URI."""
    directory.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    command = [
        "java", "-Xmx512m", "-cp", str(_pyspark_jars_dir() / "*"), f"-Dderby.system.home={directory}",
        f"-Dhive.log.dir={directory}", "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(port),
        "--hiveconf", "hive.async.log.enabled=false",
        "--hiveconf", f"javax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={directory / 'metastore_db'};create=true",
        "--hiveconf", "datanucleus.schema.autoCreateAll=true",
        "--hiveconf", "hive.metastore.schema.verification=false",
        "--hiveconf", f"hive.metastore.warehouse.dir={directory / 'warehouse'}",
    ]
    log_path = directory / "server.log"
    with open(log_path, "w") as log:
        # first start: Hive's test bootstrap creates the transaction tables the locks live in
        bootstrap = subprocess.Popen([*command, "--hiveconf", "hive.in.test=true", "--hiveconf", "hive.compactor.initiator.on=true"],
                                     stdout=log, stderr=subprocess.STDOUT, cwd=directory)
        try:
            _wait_for_port(port, bootstrap, log_path, "the Hive Metastore (bootstrap)")
            deadline = time.monotonic() + 60
            hive_log = directory / "hive.log"
            # done when its first transaction handler has created the tables (the configuration it
            # dumps after them, then the next handler starting): stopping it at the first line of that
            # left AUX_TABLE missing on a loaded machine, and every commit's lock failing
            while not _transaction_tables_created(hive_log.read_text() if hive_log.exists() else ""):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Hive Metastore did not create its transaction tables: {log_path}")
                time.sleep(0.3)
            time.sleep(1)
        finally:
            _stop(bootstrap)
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=directory)
        try:
            _wait_for_port(port, server, log_path, "the Hive Metastore")
            yield f"thrift://127.0.0.1:{port}"
        finally:
            _stop(server)


def _transaction_tables_created(log: str) -> bool:
    """Whether the bootstrap metastore's log shows its transaction tables created."""
    done = log.find('END========"new HiveConf()"')
    return done >= 0 and "Hacking in canned values" in log[done:]


@contextlib.contextmanager
def catalog_parameters(directory: Path):
    """The server_side_parameters of the test catalog (started here, stopped at exit)."""
    kind = catalog_kind()
    if kind == "hadoop":
        yield {}
        return
    started = time.monotonic()
    if kind in ("hive", "rest"):
        server = hive_metastore if kind == "hive" else rest_catalog_server
        with server(directory / kind) as uri:
            print(f"{kind} catalog at {uri} (started in {time.monotonic() - started:.1f} s)")
            yield spark_catalog_parameters(kind, uri)
        return
    with postgres_server(directory / "postgres") as server:
        print(f"JDBC catalog on PostgreSQL {server.jdbc_url} (started in {time.monotonic() - started:.1f} s)")
        yield jdbc_catalog_parameters(server, postgresql_driver())
