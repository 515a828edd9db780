"""The change-log contract, and the log declarations read from dbt sources.

A change log is an Iceberg table (format-version 3) declared as a dbt source whose table
``meta`` carries an ``mv_log`` block::

    sources:
      - name: change_logs
        schema: shop
        tables:
          - name: mlog_orders
            meta:
              mv_log:
                master: orders          # a model/seed name (ref), or "source_name.table_name"
                key: [order_id]         # the master's unique key
                capture: true           # filled by the plugin from the master's Iceberg history

Each log row is an *image* of one master row:

=====================  ==========  ======================================================
column                 type        meaning
=====================  ==========  ======================================================
the key columns        as master   the changed row's unique key
any master columns     as master   the row's values in this image ("including new values")
``_mv_op``             string      ``I``: after image (an insert, or the new values of an
                                   update); ``D``: before image (a delete, or the old values
                                   of an update); ``W``/``R``: capture watermark / reset
                                   (internal, written by capture)
``_mv_commit``         bigint      the master commit the change belongs to: its Iceberg
                                   snapshot id when captured, the source transaction id for
                                   CDC-written logs (Oracle's ``xid$$``)
``_mv_time``           timestamp   when the row was logged (optional, informational)
=====================  ==========  ======================================================

Which rows a refresh consumes is decided by Iceberg v3 row lineage: every row carries the
sequence number of the commit that wrote it (``_last_updated_sequence_number``), which grows
with commit order whatever process wrote it. That is why logs must be format-version 3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

OP_COLUMN = "_mv_op"
COMMIT_COLUMN = "_mv_commit"
TIME_COLUMN = "_mv_time"
CONTRACT_COLUMNS = (OP_COLUMN, COMMIT_COLUMN, TIME_COLUMN)
SEQUENCE_COLUMN = "_last_updated_sequence_number"  # Iceberg v3 row lineage
META_KEY = "mv_log"
MIN_FORMAT_VERSION = 3

INSERT, DELETE, WATERMARK, RESET = "I", "D", "W", "R"

LOG_KEYS = {
    "master": "The master table whose changes the log holds: a model or seed name (as in `ref`), or "
    "`source_name.table_name`. Required.",
    "key": "The master's unique key: a column or a list of columns. Required unless the master is a model that "
    "declares it: a `primary_key` constraint (model-level, or on one column), else its `unique_key` config.",
    "capture": "`true`: the plugin fills the log itself from the master's Iceberg commits (every column of "
    "the master logged); `false` (default): your ingestion writes it. A log its master's `logged_merge` "
    "model writes is capture-managed either way.",
}
"""The entries of a change log's ``meta.mv_log`` block (docs/reference.md is generated from this)."""


class LogContractError(ValueError):
    """A change log, its declaration or its master breaks the contract."""


@dataclass(frozen=True)
class LogSpec:
    """One declared change log."""

    source_name: str  # "source_name.table_name", as the user refers to it
    log_relation: str  # "schema.table" of the log
    master_ref: str  # as declared: a ref name or "source_name.table_name"
    master_relation: str  # "schema.table" of the master
    key: tuple[str, ...]
    capture: bool
    key_origin: str = ""  # where the key was declared, for messages about it

    @property
    def master_name(self) -> str:
        """The master as the user wrote it (meta.mv_log.master), with its table where that differs:
        ``shop.orders``, or ``raw.orders (bronze.orders_v2)``."""
        if self.master_ref.lower() == self.master_relation:
            return self.master_ref
        return f"{self.master_ref} ({self.master_relation})"

    def describe(self) -> str:
        return f"change log {self.log_relation} (source '{self.source_name}') of master {self.master_name}"


LOGGED_MERGE = "logged_merge"  # the incremental strategy that writes the model's change log as it merges


def keeps_own_log(node: Mapping[str, Any]) -> bool:
    """Whether a model writes its change log itself: a ``fast_refresh`` model with
    ``mv_log=true``, or an incremental model merged by the ``logged_merge`` strategy."""
    config = node.get("config") or {}
    if config.get("materialized") == "fast_refresh":
        return config.get(META_KEY) is True
    return config.get("materialized") == "incremental" and config.get("incremental_strategy") == LOGGED_MERGE


def _relation_name(node: Mapping[str, Any]) -> str:
    name = node.get("identifier") or node.get("alias") or node["name"]
    return f"{node['schema']}.{name}".lower()


def _master_candidates(graph: Mapping[str, Any], master: str) -> list[Mapping[str, Any]]:
    if "." in master:
        source_name, _, table = master.partition(".")
        return [s for s in graph.get("sources", {}).values() if s["source_name"] == source_name and s["name"] == table]
    return [
        n
        for n in graph.get("nodes", {}).values()
        if n.get("resource_type") in ("model", "seed", "snapshot") and n["name"] == master
    ]


def log_specs_from_graph(graph: Mapping[str, Any]) -> list[LogSpec]:
    """Every source table declared as a change log, validated; sorted by log relation."""
    specs = []
    for source in graph.get("sources", {}).values():
        block = (source.get("meta") or {}).get(META_KEY) or (source.get("config", {}).get("meta") or {}).get(META_KEY)
        if block is None:
            continue
        specs.append(_spec_from_source(graph, source, block))
    return sorted(specs, key=lambda s: s.log_relation)


def _spec_from_source(graph: Mapping[str, Any], source: Mapping[str, Any], block: Any) -> LogSpec:
    where = f"source '{source['source_name']}.{source['name']}'"
    if not isinstance(block, Mapping):
        raise LogContractError(f"{where}: meta.{META_KEY} must be a mapping with 'master' and 'key'.")
    unknown = sorted(set(block) - set(LOG_KEYS))
    if unknown:
        raise LogContractError(
            f"{where}: meta.{META_KEY} has unknown entries {unknown}; allowed: {', '.join(LOG_KEYS)}."
        )
    master = block.get("master")
    if not isinstance(master, str) or not master.strip():
        raise LogContractError(
            f"{where}: meta.{META_KEY}.master is missing. Name the master table: a model or seed name, "
            "or 'source_name.table_name'."
        )
    candidates = _master_candidates(graph, master.strip())
    if len(candidates) != 1:
        problem = "matches no model, seed or source" if not candidates else "is ambiguous"
        raise LogContractError(f"{where}: master '{master}' {problem} in this project.")
    key = block.get("key")
    key_origin = f"meta.{META_KEY}.key of {where}"
    if key is None:
        key, key_origin = declared_key(candidates[0])
    if isinstance(key, str):
        key = [key]
    if not key or not isinstance(key, Sequence) or not all(isinstance(k, str) and k.strip() for k in key):
        raise LogContractError(
            f"{where}: the master '{master}' has no declared unique key. Add meta.{META_KEY}.key: "
            "the list of columns that identify a master row (its primary key), or declare it on the master "
            "model (a primary_key constraint, or unique_key)."
        )
    capture = block.get("capture", False)
    if not isinstance(capture, bool):
        raise LogContractError(f"{where}: meta.{META_KEY}.capture must be true or false, not {capture!r}.")
    # a log its master writes itself is capture-managed too: capture appends what a crash between
    # the master's commit and the log's left out (refresh/phases/own_log.py)
    capture = capture or keeps_own_log(candidates[0])
    return LogSpec(
        source_name=f"{source['source_name']}.{source['name']}",
        log_relation=_relation_name(source),
        master_ref=master.strip(),
        master_relation=_relation_name(candidates[0]),
        key=tuple(k.strip().lower() for k in key),
        capture=capture,
        key_origin=key_origin,
    )


def declared_key(node: Mapping[str, Any]) -> tuple[Any, str]:
    """The unique key a master model declares itself, and where it was read: its ``primary_key``
    constraint (model-level, or one column's), else its ``unique_key`` config; (None, "") when
    it declares none."""
    name = f"{node.get('resource_type', 'model')} '{node.get('name', '?')}'"
    for constraint in node.get("constraints") or ():
        if constraint.get("type") == "primary_key" and constraint.get("columns"):
            return list(constraint["columns"]), f"the primary_key constraint of {name}"
    for column_name, column in (node.get("columns") or {}).items():
        for constraint in column.get("constraints") or ():
            if constraint.get("type") == "primary_key":
                column_name = column.get("name") or column_name
                return [column_name], f"the primary_key constraint on column {column_name} of {name}"
    unique_key = (node.get("config") or {}).get("unique_key")
    if unique_key:
        return unique_key, f"the unique_key of {name}"
    return None, ""


def logs_by_master(specs: Sequence[LogSpec]) -> dict[str, LogSpec]:
    """Map master relation -> its log; a master with two logs is an error."""
    result: dict[str, LogSpec] = {}
    for spec in specs:
        if spec.master_relation in result:
            other = result[spec.master_relation]
            raise LogContractError(
                f"Master {spec.master_name} has two change logs: sources '{other.source_name}' and "
                f"'{spec.source_name}'. Declare one."
            )
        result[spec.master_relation] = spec
    return result


def normalize_type(spark_type: str) -> str:
    return "".join(spark_type.lower().split())


_DECIMAL = "decimal("


def _decimal(spark_type: str) -> tuple[int, int] | None:
    normalized = normalize_type(spark_type)
    if not normalized.startswith(_DECIMAL) or not normalized.endswith(")"):
        return None
    precision, _, scale = normalized[len(_DECIMAL) : -1].partition(",")
    try:
        return int(precision), int(scale or 0)
    except ValueError:
        return None


_PRIMITIVE_PROMOTIONS = (("int", "bigint"), ("float", "double"))


def promotable(from_type: str, to_type: str) -> bool:
    """Whether Iceberg can change a column from ``from_type`` to ``to_type`` in place (its type
    promotions: int to bigint, float to double, a decimal to a wider one of the same scale)."""
    old, new = normalize_type(from_type), normalize_type(to_type)
    if (old, new) in _PRIMITIVE_PROMOTIONS:
        return True
    old_decimal, new_decimal = _decimal(old), _decimal(new)
    return (
        old_decimal is not None
        and new_decimal is not None
        and old_decimal[1] == new_decimal[1]
        and new_decimal[0] >= old_decimal[0]
    )


def may_have_been_widened(spark_type: str) -> bool:
    """Whether a column of this type may be the result of a promotion (see ``promotable``)."""
    normalized = normalize_type(spark_type)
    return normalized in {new for _, new in _PRIMITIVE_PROMOTIONS} or _decimal(normalized) is not None


@dataclass(frozen=True)
class LogEvolution:
    """How a capture-managed log must change to match its master's schema again.

    The plugin owns such a log, so it follows the master rather than failing: logged columns the
    master lost are dropped, widened types are widened in place. A type change Iceberg cannot apply
    in place (the master was replaced by a table of other types) means the log is recreated.
    Columns the master gained are not logged (a capture by snapshot difference reads older master
    snapshots, which do not have them).
    """

    dropped: tuple[str, ...] = ()
    widened: tuple[tuple[str, str, str], ...] = ()  # (column, log type, master type)
    incompatible: tuple[tuple[str, str, str], ...] = ()  # (column, log type, master type)

    @property
    def recreate(self) -> bool:
        return bool(self.incompatible)

    def describe(self) -> str:
        parts = [f"column {c} dropped" for c in self.dropped]
        parts += [f"column {c} changed type from {old} to {new}" for c, old, new in self.widened + self.incompatible]
        return "; ".join(parts)

    def evolved(self, log_columns: Mapping[str, str]) -> dict[str, str]:
        """The log's columns once evolved (name -> type)."""
        if self.recreate:
            return {}
        columns = {c: t for c, t in log_columns.items() if c not in self.dropped}
        columns.update({c: new for c, _, new in self.widened})
        return columns


def log_evolution(log_columns: Mapping[str, str], master_columns: Mapping[str, str]) -> LogEvolution | None:
    """How a capture-managed log no longer matches its master (a logged column dropped from the
    master or changed type since the log was created), or None when it does.
    ``*_columns`` map lowercase column names to Spark types, in table order."""
    logged = {c: t for c, t in log_columns.items() if c not in CONTRACT_COLUMNS}
    dropped = tuple(c for c in logged if c not in master_columns)
    changed = [
        (c, t, master_columns[c])
        for c, t in logged.items()
        if c in master_columns and normalize_type(t) != normalize_type(master_columns[c])
    ]
    widened = tuple(change for change in changed if promotable(change[1], change[2]))
    incompatible = tuple(change for change in changed if not promotable(change[1], change[2]))
    if not (dropped or widened or incompatible):
        return None
    return LogEvolution(dropped, widened, incompatible)


def validate_log_columns(
    spec: LogSpec,
    log_columns: Mapping[str, str],
    master_columns: Mapping[str, str],
    format_version: int | None,
) -> list[str]:
    """Check a log's schema against its master's; return the master columns it logs.

    ``*_columns`` map lowercase column names to Spark type strings.
    """
    problems = []
    origin = f" (the key from {spec.key_origin})" if spec.key_origin else ""
    for column in spec.key:
        if column not in master_columns:
            problems.append(f"key column '{column}'{origin} is not a column of the master")
        elif column not in log_columns:
            problems.append(f"key column '{column}'{origin} is missing")
    for column, expected in ((OP_COLUMN, "string"), (COMMIT_COLUMN, "bigint")):
        actual = log_columns.get(column)
        if actual is None:
            problems.append(f"column '{column}' ({expected}) is missing")
        elif normalize_type(actual) != expected:
            problems.append(f"column '{column}' is {actual}, the contract says {expected}")
    logged = []
    for column, log_type in log_columns.items():
        if column in CONTRACT_COLUMNS:
            continue
        master_type = master_columns.get(column)
        if master_type is None:
            problems.append(f"column '{column}' is not a column of the master")
        elif normalize_type(master_type) != normalize_type(log_type):
            problems.append(f"column '{column}' is {log_type} but {master_type} in the master")
        else:
            logged.append(column)
    if format_version is None or format_version < MIN_FORMAT_VERSION:
        problems.append(
            f"the log is an Iceberg format-version {format_version or '?'} table; the contract needs "
            f"format-version {MIN_FORMAT_VERSION} (row lineage): ALTER TABLE {spec.log_relation} "
            "SET TBLPROPERTIES ('format-version'='3')"
        )
    if problems:
        raise LogContractError(f"The {spec.describe()} breaks the log contract: " + "; ".join(problems) + ".")
    return logged
