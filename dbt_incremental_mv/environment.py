"""The environment variables the plugin reads: one definition each (name, default, meaning).

Every production read of an environment variable goes through one of these, so the reference
page (docs/reference.md, generated from this module) lists them all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvironmentVariable:
    name: str
    default: str  # what applies when the variable is unset or empty, as the user would read it
    meaning: str

    def value(self) -> str | None:
        """The variable's value, None when unset or empty."""
        return os.environ.get(self.name) or None


CACHE = EnvironmentVariable(
    "DBT_INCREMENTAL_MV_CACHE",
    "`$XDG_CACHE_HOME/dbt-incremental-mv` (`~/.cache/dbt-incremental-mv`)",
    "Directory of the plugin's caches: the Iceberg runtime jars and the JVM class archives.",
)
MAVEN_REPOSITORY = EnvironmentVariable(
    "DBT_INCREMENTAL_MV_MAVEN_REPOSITORY",
    "`https://repo1.maven.org/maven2`",
    "Maven repository (a mirror's URL) the Iceberg runtime is downloaded from, once, when it is not "
    "bundled (Spark 4, or a REST catalog on Spark 3.5).",
)
JVM_ARCHIVE = EnvironmentVariable(
    "DBT_INCREMENTAL_MV_JVM_ARCHIVE",
    "on",
    "`off` (or `0`, `false`, `no`): the embedded session's JVM starts without the plugin's class-data "
    "sharing archive (neither used nor built).",
)
CALIBRATION = EnvironmentVariable(
    "DBT_INCREMENTAL_MV_CALIBRATION",
    "the package's prices",
    "Path of a JSON file of cost-model prices measured on your cluster (a copy of the package's "
    "`calibration.json` with your prices); `refresh_method='force'` compares fast and complete refreshes with them.",
)
METADATA = EnvironmentVariable(
    "DBT_INCREMENTAL_MV_METADATA",
    "the Java API in the embedded session, SQL otherwise",
    "`sql`: read and write table metadata (snapshots, properties, branches) through SQL statements even "
    "in the embedded session, e.g. for a catalog Iceberg's Java API cannot load there.",
)
LITERAL_KEYS = EnvironmentVariable(
    "DBT_INCREMENTAL_MV_LITERAL_KEYS",
    "200 (the longest `IN` list Iceberg prunes files by)",
    "At most this many changed keys of a master are written into a refresh's statements as literals "
    "(`IN (...)`); more are read from the log. `0`: always from the log. Larger values are capped.",
)
LISTED_VALUES = EnvironmentVariable(
    "DBT_INCREMENTAL_MV_LISTED_VALUES",
    "200000",
    "At most this many values of changed rows are listed to the driver when the mark step nets a log; "
    "`0`: netted in SQL.",
)

NOW = EnvironmentVariable(
    "DBT_INCREMENTAL_MV_NOW",
    "the session's clock",
    "The time (`YYYY-MM-DD HH:MM:SS`, the Spark session's time zone) a build or refresh reads the "
    "`current_date()`, `current_timestamp()`, `now()` and `localtimestamp()` of its views as: "
    "reproducible runs and backfills.",
)

USER_FACING = (CACHE, MAVEN_REPOSITORY, JVM_ARCHIVE, CALIBRATION, METADATA, LITERAL_KEYS, LISTED_VALUES, NOW)
