"""``dbt-incremental-mv`` command line: helpers around the plugin (not needed for dbt runs)."""

from __future__ import annotations

import argparse
import sys

from dbt_incremental_mv.iceberg_runtime import ICEBERG_PACKAGE, IcebergRuntimeError, prepare_offline_jars


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dbt-incremental-mv")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "prepare-jars",
        help="prepare the offline Iceberg runtime (cached) and print the jars for spark.jars / --driver-class-path",
    )
    args = parser.parse_args(argv)
    if args.command == "prepare-jars":
        try:
            jars = prepare_offline_jars()
        except IcebergRuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            print(f"With network access, use spark.jars.packages={ICEBERG_PACKAGE} instead.", file=sys.stderr)
            return 1
        print(",".join(jars.classpath))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
