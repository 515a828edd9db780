"""How soon a statement longer than the Thrift Server's 5 s long poll is seen as finished:
dbt-spark's PyHive wrapper (sleeps ``poll_interval`` between polls) against the plugin's
(``ThriftConnectionWrapper``: 0.02 s doubling up to ``poll_interval``), ``poll_interval`` 5, on a local
Thrift Server started as the thrift tests start it. Needs PyHive (the ``thrift`` extra).

    .venv/bin/python benchmarks/thrift_polling.py

Last run (2026-11-28, 2 cores): a 7 s statement 10.0-10.2 s vs 7.1 s; a 12 s statement 12.1 s both.
"""

import tempfile
import time

from dbt.adapters.spark.connections import PyhiveConnectionWrapper
from pyhive import hive

from dbt_incremental_mv.adapter.connections import ThriftConnectionWrapper
from dbt_incremental_mv.runtime.thrift_server import start_thrift_server

SLEEP_SQL = "select reflect('java.lang.Thread', 'sleep', cast({ms} as bigint))"


def main() -> None:
    server = start_thrift_server(workdir=tempfile.mkdtemp(prefix="thrift_polling_"))
    try:
        for ms in (7000, 12000):
            for _ in range(2):  # alternated
                for wrapper_class in (PyhiveConnectionWrapper, ThriftConnectionWrapper):
                    wrapper = wrapper_class(hive.connect(host=server.host, port=server.port), poll_interval=5)
                    wrapper.cursor()
                    started = time.perf_counter()
                    wrapper.execute(SLEEP_SQL.format(ms=ms))
                    wrapper.fetchall()
                    print(f"{ms / 1000:.0f} s statement, {wrapper_class.__name__}: {time.perf_counter() - started:.2f} s", flush=True)
                    wrapper.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
