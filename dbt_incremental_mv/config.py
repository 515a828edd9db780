"""Validation of a ``fast_refresh`` model's configuration.

Runs before the materialization touches anything: a bad value fails the model with a
message that names the config, the value given and the values allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class RefreshMethod(StrEnum):
    """The model config ``refresh_method``, as the user writes it."""

    FORCE = "force"  # the cheaper of fast and complete by estimated cost; complete when fast is impossible
    FAST = "fast"  # fail when a fast refresh is impossible
    COMPLETE = "complete"  # always recompute the whole view


REFRESH_METHODS = tuple(RefreshMethod)


class IndexedState(StrEnum):
    """The model config ``indexed_state``: whether a join view keeps an indexed join state."""

    AUTO = "auto"  # kept while the view's recent refreshes say it pays (refresh/indexed_choice.py)
    ON = "true"  # always kept (when the view has a dimension to index)
    OFF = "false"  # never kept


FILE_FORMAT = "iceberg"

ON_CONFIGURATION_CHANGE = ("apply", "fail")
"""dbt's config, for a changed definition: ``apply`` rebuilds the view, ``fail`` fails the model."""


@dataclass(frozen=True)
class ConfigKey:
    """One model config the materialization reads, as the reference page lists it."""

    name: str
    values: str  # the values allowed, as the user writes them
    default: str  # what applies when the config is not set
    meaning: str


MODEL_CONFIGS = (
    ConfigKey(
        "refresh_method",
        "`force`, `fast`, `complete`",
        "`force`",
        "`force`: the cheaper of a fast and a complete refresh by estimated cost, a complete refresh when a "
        "fast one is impossible (the log line says why); `fast`: fail when a fast refresh is impossible (the "
        "view is left unchanged; a view that could never be fast refreshed is not even built); `complete`: "
        "always recompute.",
    ),
    ConfigKey(
        "refresh_history",
        "`true`, `false`",
        "`true`",
        "Append one row per refresh to `<history_schema>.mv_refresh_history`.",
    ),
    ConfigKey(
        "history_schema",
        "a schema name",
        "the model's schema",
        "Where the refresh history table is; project-wide: `+history_schema: ops` under `models:`.",
    ),
    ConfigKey(
        "mv_log",
        "`true`, `false`",
        "`false`",
        "Each fast refresh appends the rows it changed to the view's own change log (a declared source whose "
        "`meta.mv_log.master` is this model), for the `fast_refresh` models built on this one. `true` "
        "without a declared log fails the model before anything runs.",
    ),
    ConfigKey(
        "refresh_stats",
        "`true`, `false`",
        "`false`",
        "Aggregate views: count the groups a fast refresh inserts, updates, deletes and recomputes (one "
        "extra query) and print them in the log line.",
    ),
    ConfigKey(
        "rewrite_rows",
        "a whole number, 0 or more",
        "`100000`",
        "A fast refresh of an aggregate view of at most this many rows rewrites it whole in one statement "
        "instead of deleting and inserting its changed groups; `0`: never.",
    ),
    ConfigKey(
        "indexed_state",
        "`auto`, `true`, `false`",
        "`auto`",
        "Join views: keep the join of the view's other tables sorted by a dimension's key (an internal "
        "state), so that a change of that dimension finds its rows by file pruning instead of reading the "
        "facts whole; every fact change then also refreshes that state (its write and its log). `auto`: "
        "kept once the view's last refreshes show that the dimension's changes cost more than the state "
        "would (a price of each, from the facts' size and which tables changed), and dropped when they "
        "no longer do; each switch rebuilds the view once. `explain_fast_refresh` says why. See *How a "
        "refresh works*.",
    ),
    ConfigKey(
        "auto_compact",
        "`true`, `false`",
        "`true`",
        "After a fast refresh that leaves the view (or an internal state) with many more files than a rewrite "
        "would (delete files, and small data files: 8 for a view of at most 16 MB, else 16 plus 16 for each 64 MB of "
        "the view), or (over 64 MB) a tenth of its rows deleted, the refresh compacts it: its small data files "
        "rewritten (Iceberg's `rewrite_data_files` of the files under a sixteenth of the view, at most 8 MB) where "
        "they are what makes it due, its delete files merged (`rewrite_position_delete_files`) where those are, else "
        "`rewrite_data_files` of the files with deletes and the small ones; sorted as the view was built. "
        "`false`: never (compact with `mv_compact`, which `mv_status` "
        "recommends). `refresh_method='force'` prices the compaction with the fast refresh.",
    ),
    ConfigKey(
        "on_configuration_change",
        "`apply`, `fail`",
        "`apply`",
        "When the model's SQL or configuration changed since the view was built: `apply` rebuilds it, "
        "`fail` fails the model.",
    ),
    ConfigKey(
        "file_format",
        "`iceberg`",
        "`iceberg`",
        "A fast-refreshed view is always an Iceberg table; any other value is refused.",
    ),
    ConfigKey(
        "partition_by",
        "columns or Iceberg transforms (`days(ts)`)",
        "none",
        "The view's table is partitioned by them, on every build and rebuild.",
    ),
    ConfigKey(
        "clustered_by + buckets",
        "column names + a positive whole number",
        "none",
        "Each column becomes an Iceberg `bucket(n, column)` partition after the `partition_by` ones (Iceberg "
        "has no Hive bucketing). One without the other is refused.",
    ),
    ConfigKey(
        "tblproperties",
        "a map",
        "merge-on-read deletes and updates, `write.metadata.delete-after-commit.enabled`",
        "Set on the view's table; the plugin's own `write.wap.enabled` and `dbt_incremental_mv.*` properties win. "
        "`history.expire.max-snapshot-age-ms` (default a day) and `history.expire.min-snapshots-to-keep` set which "
        'old snapshots a refresh expires, `gc.enabled=false` none ([Operations](operations.md), "Snapshots and '
        'storage").',
    ),
    ConfigKey(
        "location_root",
        "a path",
        "the catalog's location",
        "The table is (re)built at `<root>/<alias>`. Iceberg's Hadoop catalog (the embedded default) "
        "refuses custom locations: use it with a Hive, REST or JDBC catalog.",
    ),
    ConfigKey(
        "persist_docs",
        "`relation`, `columns`",
        "none",
        "The model's description becomes the table comment when the table is (re)built; column "
        "descriptions become column comments after every run.",
    ),
    ConfigKey(
        "contract",
        "`{enforced: true}` with columns' `data_type`",
        "not enforced",
        "dbt checks the query's column names and types before anything is created; the hidden `_mv_*` "
        "columns are not part of the contract.",
    ),
    ConfigKey(
        "pre_hook / post_hook",
        "SQL",
        "none",
        "Run before and after every build, fast refresh and complete refresh.",
    ),
    ConfigKey(
        "grants",
        "as in dbt-spark",
        "none",
        "Applied after each run where Spark has table access control (Databricks); refused before "
        "anything is created on a Spark without a `GRANT` statement.",
    ),
)
"""Every model config the fast_refresh materialization reads (docs/reference.md is generated from
this; the validated ones are FastRefreshConfig's fields, with the same defaults)."""


class ConfigError(ValueError):
    """A model's fast_refresh configuration is invalid."""


@dataclass(frozen=True)
class FastRefreshConfig:
    refresh_method: RefreshMethod = RefreshMethod.FORCE
    refresh_stats: bool = False  # count the groups/rows a fast refresh changes (one extra query)
    on_configuration_change: str = "apply"  # dbt's config: rebuild on a definition change, or fail
    refresh_history: bool = True  # append a row per refresh to <history_schema>.mv_refresh_history
    history_schema: str | None = None  # None: the model's schema
    mv_log: bool = False  # the refresh appends what it changed to the view's declared change log
    # a fast refresh of an aggregate view of at most this many rows rewrites it whole, in one statement
    rewrite_rows: int = 100_000
    # a join view keeps its facts' join sorted by a dimension's key, as a state (analysis/indexed.py)
    indexed_state: IndexedState = IndexedState.AUTO
    # a fast refresh compacts the view when its files are due (refresh/phases/compact.py)
    auto_compact: bool = True

    def __post_init__(self) -> None:  # (written as the user writes it: the enum member)
        object.__setattr__(self, "refresh_method", RefreshMethod(self.refresh_method))
        object.__setattr__(self, "indexed_state", IndexedState(self.indexed_state))

    @classmethod
    def from_model_config(cls, model_name: str, config: Mapping[str, Any]) -> FastRefreshConfig:
        refresh_method = config.get("refresh_method")
        if refresh_method is None:
            refresh_method = "force"
        if not isinstance(refresh_method, str) or refresh_method.strip().lower() not in REFRESH_METHODS:
            allowed = ", ".join(f"'{m}'" for m in REFRESH_METHODS)
            raise ConfigError(
                f"Model '{model_name}': refresh_method={refresh_method!r} is not supported. "
                f"Allowed values: {allowed} (default 'force': the cheaper of fast and complete, by estimated cost)."
            )
        file_format = config.get("file_format")
        if file_format is not None and str(file_format).lower() != FILE_FORMAT:
            raise ConfigError(
                f"Model '{model_name}': file_format={file_format!r} is not supported by the fast_refresh "
                "materialization: a fast-refreshed view is always an Iceberg table. Remove the file_format "
                "config or set it to 'iceberg'."
            )
        refresh_stats = config.get("refresh_stats", False)
        if not isinstance(refresh_stats, bool):
            raise ConfigError(f"Model '{model_name}': refresh_stats={refresh_stats!r} must be true or false.")
        on_change = config.get("on_configuration_change") or "apply"
        if not isinstance(on_change, str) or on_change.strip().lower() not in ON_CONFIGURATION_CHANGE:
            raise ConfigError(
                f"Model '{model_name}': on_configuration_change={on_change!r} is not supported by fast_refresh. "
                "Allowed values: 'apply' (default: rebuild the view when its definition changed), 'fail'."
            )
        refresh_history = config.get("refresh_history", True)
        if not isinstance(refresh_history, bool):
            raise ConfigError(f"Model '{model_name}': refresh_history={refresh_history!r} must be true or false.")
        history_schema = config.get("history_schema")
        if history_schema is not None and (
            not isinstance(history_schema, str)
            or not history_schema.strip()
            or "." in history_schema
            or "`" in history_schema
        ):
            raise ConfigError(
                f"Model '{model_name}': history_schema={history_schema!r} must name one schema (no dots or "
                "backticks), e.g. history_schema='ops'."
            )
        mv_log = config.get("mv_log", False)
        if not isinstance(mv_log, bool):
            raise ConfigError(
                f"Model '{model_name}': mv_log={mv_log!r} must be true or false (true: each refresh appends the "
                "rows it changed to the view's change log, for the fast_refresh models built on this one)."
            )
        rewrite_rows = config.get("rewrite_rows", 100_000)
        if isinstance(rewrite_rows, bool) or not isinstance(rewrite_rows, int) or rewrite_rows < 0:
            raise ConfigError(
                f"Model '{model_name}': rewrite_rows={rewrite_rows!r} must be a whole number of rows, 0 or more "
                "(an aggregate view of at most that many rows is rewritten whole by one statement when fast "
                "refreshed; 0: never)."
            )
        indexed_state = _indexed_state(model_name, config.get("indexed_state"))
        auto_compact = config.get("auto_compact", True)
        if not isinstance(auto_compact, bool):
            raise ConfigError(
                f"Model '{model_name}': auto_compact={auto_compact!r} must be true or false (true: a fast refresh "
                "that leaves the view with many delete files or small files compacts it)."
            )
        return cls(
            auto_compact=auto_compact,
            indexed_state=indexed_state,
            mv_log=mv_log,
            rewrite_rows=rewrite_rows,
            refresh_method=RefreshMethod(refresh_method.strip().lower()),
            refresh_stats=refresh_stats,
            on_configuration_change=on_change.strip().lower(),
            refresh_history=refresh_history,
            history_schema=history_schema.strip().lower() if history_schema else None,
        )


def _indexed_state(model_name: str, value: Any) -> IndexedState:
    if value is None:
        return IndexedState.AUTO
    if isinstance(value, bool):
        return IndexedState.ON if value else IndexedState.OFF
    if isinstance(value, str) and value.strip().lower() in tuple(IndexedState):
        return IndexedState(value.strip().lower())
    raise ConfigError(
        f"Model '{model_name}': indexed_state={value!r} must be 'auto', true or false (true: a join view keeps "
        "its facts' join sorted by a dimension's key, so that the dimension's changes do not read the facts "
        "whole; 'auto', the default: kept while the view's recent refreshes show it pays)."
    )


# How a Spark without table access control answers SHOW GRANTS (open-source Spark 3.5 cannot parse
# it; some builds say the operation is not allowed or not supported).
_NO_GRANTS = ("parse_syntax_error", "operation not allowed", "not supported", "unsupported")


def grants_unsupported_error(model_name: str, probe_error: str) -> ConfigError | None:
    """The error for a model with ``grants`` on a Spark that has no GRANT statement, judged from
    the error of a ``show grants`` probe; None when the probe failed for another reason (e.g. the
    view does not exist yet on a Spark that does support grants)."""
    text = probe_error.lower()
    if not any(marker in text for marker in _NO_GRANTS):
        return None
    return ConfigError(
        f"Model '{model_name}': grants are configured, but this Spark has no GRANT statement (open-source "
        "Spark has no table access control; dbt-spark's grants work on Databricks). Remove the grants "
        "config for this target (e.g. set it only in the targets that support it)."
    )
