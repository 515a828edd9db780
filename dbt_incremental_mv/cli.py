"""``dbt-incremental-mv`` command line: helpers around the plugin (not needed for dbt runs)."""

from __future__ import annotations

import argparse
import signal
import sys

from dbt_incremental_mv.runtime.iceberg_runtime import IcebergRuntimeError, runtime_jars


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (docs/reference.md lists its commands and options from it)."""
    parser = argparse.ArgumentParser(prog="dbt-incremental-mv")
    commands = parser.add_subparsers(dest="command", required=True)
    prepare = commands.add_parser(
        "prepare-jars",
        help="prepare the Iceberg runtime of the installed Spark (cached: bundled on Spark 3.5, downloaded once from Maven Central on Spark 4) and print the jars for spark.jars / --driver-class-path",
    )
    prepare.add_argument(
        "--rest",
        action="store_true",
        help="for an Iceberg REST catalog: the complete runtime from Maven Central on Spark 3.5 too (the bundled one lacks the HTTP client)",
    )
    commands.add_parser(
        "jvm-archive",
        help="build (once, cached) the class-data-sharing archive that makes the embedded session's JVM start faster",
    )
    server = commands.add_parser(
        "thrift-server",
        help="run a local Spark Thrift Server with Iceberg (spark_catalog = Iceberg Hadoop catalog) until Ctrl-C",
    )
    server.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    server.add_argument("--port", type=int, default=10000, help="port to listen on (default 10000; 0: a free one)")
    server.add_argument("--warehouse", default="warehouse", help="Iceberg warehouse directory (default ./warehouse)")
    server.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    server.add_argument(
        "--workers",
        type=int,
        default=0,
        help="run on a local Spark standalone cluster of a master and N one-core workers on 127.0.0.1 (overrides --master)",
    )
    server.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting (repeatable)"
    )
    server.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for the server to listen")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "thrift-server":
        return _thrift_server(args)
    if args.command == "jvm-archive":
        return _jvm_archive()
    if args.command == "prepare-jars":
        try:
            jars = runtime_jars(http_client=args.rest)
        except IcebergRuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(",".join(jars.classpath))
    return 0


def _jvm_archive() -> int:
    """The archive for a profile with default settings (the embedded session with the bundled jars)."""
    from pathlib import Path

    from dbt_incremental_mv.runtime import jvm_archive
    from dbt_incremental_mv.runtime.embedded import profile_settings

    settings = profile_settings(warehouse=Path("warehouse").resolve(), user_params={})
    if not jvm_archive.enabled(settings):
        print(f"off ({jvm_archive.SWITCH} is set)")
        return 0
    archive = jvm_archive.archive_path(settings)
    if jvm_archive.build(settings, archive):
        print(archive)
        return 0
    print(f"not built: another build of {archive} is running, or this JVM cannot dump archives", file=sys.stderr)
    return 1


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _thrift_server(args: argparse.Namespace) -> int:
    from dbt_incremental_mv.runtime.thrift_server import ThriftServerError, start_thrift_server

    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"error: --conf {item!r} is not KEY=VALUE", file=sys.stderr)
            return 2
        conf[key.strip()] = value
    signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM stops the server like Ctrl-C does
    try:
        server = start_thrift_server(
            host=args.host,
            port=args.port or None,
            warehouse=args.warehouse,
            master=args.master,
            workers=args.workers,
            conf=conf,
            timeout=args.timeout,
        )
    except (ThriftServerError, IcebergRuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # while starting: start_thrift_server stopped what it started
        return 130
    print(
        f"Spark Thrift Server listening on {server.host}:{server.port} (started in {server.started_in:.0f} s)\n"
        f"  Spark master: {server.master}\n"
        f"  Iceberg warehouse: {server.warehouse}\n"
        f"  log: {server.log_path}\n"
        f"  profile: type: spark_mv, method: thrift, host: {server.host}, port: {server.port}\n"
        "Ctrl-C stops it.",
        flush=True,
    )
    try:
        code = server.process.wait()
        print(f"error: the server exited with code {code}:\n{server.log_tail()}", file=sys.stderr)
        server.stop()
        return 1
    except KeyboardInterrupt:
        print("stopping the Spark Thrift Server", file=sys.stderr)
        server.stop()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
