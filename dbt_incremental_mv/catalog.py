"""Reading table metadata through SQL (works the same in session, thrift, http and odbc mode)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dbt_incremental_mv.bookkeeping import ViewState
from dbt_incremental_mv.sql_text import relation, string

Query = Callable[[str], Sequence[Sequence]]


def table_columns(query: Query, name: str) -> list[tuple[str, str]]:
    """(lowercase column name, Spark type) in table order; [] when the table does not exist."""
    try:
        rows = query(f"describe table {relation(name)}")
    except Exception as exc:  # noqa: BLE001 - the table is missing or unreadable
        if "TABLE_OR_VIEW_NOT_FOUND" in str(exc) or "not found" in str(exc).lower():
            return []
        raise
    columns = []
    for col_name, data_type, *_ in rows:
        if not col_name or col_name.startswith("#"):
            break
        columns.append((col_name.lower(), data_type))
    return columns


def table_properties(query: Query, name: str, keys: Sequence[str]) -> dict[str, str | None]:
    """Several table properties in one statement (None: not set)."""
    found = {str(row[0]): row[-1] for row in query(f"show tblproperties {relation(name)}") if row and row[0] is not None}
    return {key: None if found.get(key) is None else str(found[key]) for key in keys}


def table_property(query: Query, name: str, key: str) -> str | None:
    """A table property's value; None when it is not set."""
    rows = query(f"show tblproperties {relation(name)} ({string(key)})")
    for row in rows:
        value = row[-1]
        if value is None or (isinstance(value, str) and value.startswith("Table ") and "does not have property" in value):
            return None
        return str(value)
    return None


def format_version(query: Query, name: str) -> int | None:
    value = table_property(query, name, "format-version")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class SnapshotRow:
    snapshot_id: int
    parent_id: int | None
    operation: str
    wap_id: str | None


def snapshots_with_main(name: str, columns: Sequence[str]) -> str:
    """A table's snapshots (``columns`` of its ``snapshots`` metadata table), each row ending with
    the snapshot its main branch is at, in one statement (no row: the table has no snapshot)."""
    table = relation(name)
    listed = ", ".join(f"s.{column}" for column in columns)
    return (
        f"select {listed}, r.snapshot_id as main_snapshot_id\n"
        f"from {table}.`snapshots` s cross join (select snapshot_id from {table}.`refs` where name = 'main') r"
    )


def view_state(query: Query, name: str) -> ViewState | None:
    """What the view consumed, from the newest snapshot that changed its data.

    Compaction (``replace`` snapshots) does not change data, so it is looked through.
    """
    return view_state_at(query, name)[0]


def view_state_at(query: Query, name: str) -> tuple[ViewState | None, int | None]:
    """The view's state and the snapshot of its main branch it was read from (None: no table or
    no snapshot). An incremental refresh applies its changes on exactly that snapshot, or not at all."""
    rows = query(snapshots_with_main(name, ("snapshot_id", "parent_id", "operation", "summary['wap.id']")))
    if not rows:
        return None, None
    by_id = {r[0]: SnapshotRow(r[0], r[1], r[2], r[3]) for r in rows}
    current = rows[0][4]
    cursor = by_id.get(current)
    while cursor is not None and cursor.operation == "replace":
        cursor = by_id.get(cursor.parent_id) if cursor.parent_id is not None else None
    return (ViewState.decode(cursor.wap_id) if cursor is not None else None), int(current)


SUMMARY_KEYS = ("added-records", "deleted-records", "added-position-deletes", "added-equality-deletes")


def snapshot_summary(query: Query, name: str) -> dict[str, str]:
    """Row counts of the current snapshot's summary (selected key by key: thrift returns maps as text)."""
    table = relation(name)
    columns = ", ".join(f"summary[{string(k)}]" for k in SUMMARY_KEYS)
    rows = query(
        f"select {columns} from {table}.`snapshots` where snapshot_id = "
        f"(select snapshot_id from {table}.`refs` where name = 'main')"
    )
    return {k: v for k, v in zip(SUMMARY_KEYS, rows[0]) if v is not None} if rows else {}
