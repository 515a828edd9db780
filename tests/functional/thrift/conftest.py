"""The functional tests of this directory run dbt with ``method: thrift`` against a real Spark
Thrift Server: one per test session, started on 127.0.0.1 on a free port with the embedded
mode's Iceberg setup (dbt_incremental_mv.runtime.thrift_server), and stopped at the end.

Environment (all optional):
- ``DBT_MV_TEST_THRIFT=host:port``: use that running server instead of starting one (it must
  have Iceberg's extensions and an Iceberg ``spark_catalog`` with a ``default`` namespace).
- ``DBT_MV_TEST_THRIFT_MASTER``: the local server's ``--master`` (default ``local[2]``).
- ``DBT_MV_TEST_THRIFT_WORKERS=N``: run the local server on a Spark standalone cluster of a
  master and N one-core workers on 127.0.0.1 instead (adds about 20 s to the start).
"""

import os
import time
from types import SimpleNamespace

import pytest

from dbt_incremental_mv.runtime.thrift_server import DEFAULT_MASTER, start_thrift_server

_timings = {}


@pytest.fixture(scope="session")
def thrift_server(tmp_path_factory):
    external = os.environ.get("DBT_MV_TEST_THRIFT")
    if external:
        host, _, port = external.rpartition(":")
        yield SimpleNamespace(host=host or "127.0.0.1", port=int(port))
        return
    server = start_thrift_server(
        workdir=tmp_path_factory.mktemp("thrift-server"),  # log, warehouse and Derby files stay for debugging
        master=os.environ.get("DBT_MV_TEST_THRIFT_MASTER", DEFAULT_MASTER),
        workers=int(os.environ.get("DBT_MV_TEST_THRIFT_WORKERS") or 0),
        conf={"spark.sql.shuffle.partitions": "4"},
    )
    _timings["server start"] = server.started_in
    try:
        yield server
    finally:
        started = time.time()
        server.stop()
        _timings["stopped"] = time.time()
        _timings["server stop"] = _timings["stopped"] - started


@pytest.fixture(scope="class")
def dbt_profile_target(thrift_server):
    return {
        "type": "spark_mv",
        "method": "thrift",
        "host": thrift_server.host,
        "port": thrift_server.port,
        "threads": 1,
        "connect_retries": 0,
    }


def pytest_runtest_logreport(report):
    if "functional/thrift/" in report.nodeid.replace("\\", "/"):
        _timings["first"] = min(_timings.get("first", report.start), report.start)
        _timings["last"] = max(_timings.get("last", report.stop), report.stop)


def pytest_terminal_summary(terminalreporter):
    if "first" in _timings:
        wall = max(_timings["last"], _timings.get("stopped", 0.0)) - _timings["first"]
        parts = [f"{wall:.1f} s in all"]
        parts += [f"{name} {_timings[name]:.1f} s" for name in ("server start", "server stop") if name in _timings]
        terminalreporter.write_line(f"Spark Thrift Server tests: {', '.join(parts)}")
