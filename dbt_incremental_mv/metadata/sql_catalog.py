"""Metadata through SQL statements (thrift, http, odbc): ``describe``, ``show tblproperties``, the
``snapshots`` and ``refs`` metadata tables; ref moves as branch statements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dbt_incremental_mv.conflicts import lost_race
from dbt_incremental_mv.metadata.types import (
    SUMMARY_KEYS,
    WAP_ID,
    Execute,
    LostRace,
    Query,
    Setting,
    Snapshot,
    TableMetadata,
    drop_temp_view_statement,
    retried_metadata_commit,
    setting_statements,
)
from dbt_incremental_mv.sql_text import ident, integer, relation, string


class SqlCatalog:
    """Metadata through SQL statements: works over every connection method."""

    def __init__(self, query: Query, execute: Execute) -> None:
        self.query = query
        self.execute = execute

    def load(self, name: str, columns: Sequence[tuple[str, str]] | None = None) -> TableMetadata | None:
        if columns is None:
            columns = self.columns(name)
        if not columns:
            return None
        properties = {
            str(row[0]): str(row[-1])
            for row in self.query(f"show tblproperties {relation(name)}")
            if row and row[0] is not None
        }
        keys = ", ".join(f"s.summary[{string(k)}]" for k in SUMMARY_KEYS)
        table = relation(name)
        rows = self.query(
            f"select s.snapshot_id, s.parent_id, s.operation, unix_millis(s.committed_at), {keys}, "
            "r.snapshot_id as main_snapshot_id\n"
            f"from {table}.`snapshots` s cross join (select snapshot_id from {table}.`refs` where name = 'main') r"
        )
        snapshots = {}
        for row in rows:
            summary = {k: str(v) for k, v in zip(SUMMARY_KEYS, row[4:-1]) if v is not None}
            parent = None if row[1] is None else int(row[1])
            snapshots[int(row[0])] = Snapshot(
                int(row[0]),
                parent,
                str(row[2]),
                {"operation": str(row[2]), **summary},
                timestamp_ms=None if row[3] is None else int(row[3]),
            )
        main = int(rows[0][-1]) if rows else None
        return TableMetadata(name, tuple(columns), properties, snapshots, main)

    def mains(self, names: Sequence[str]) -> dict[str, int]:
        """Where main is, for several tables in one statement (tables without a snapshot are left out)."""
        parts = [
            f"select {string(name)} as relation_name, snapshot_id from {relation(name)}.`refs` where name = 'main'"
            for name in names
        ]
        return {str(r[0]): int(r[1]) for r in self.query("\nunion all\n".join(parts))}

    def columns(self, name: str) -> list[tuple[str, str]]:
        try:
            rows = self.query(f"describe table {relation(name)}")
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

    def fast_forward(
        self,
        name: str,
        expected_main: int | None,
        *,
        to_snapshot: int | None = None,
        branch: str | None = None,
        properties: Mapping[str, str] | None = None,
        drop_branches: Sequence[str] = (),
    ) -> None:
        """Move main to ``to_snapshot`` (a staged snapshot) or to the head of ``branch`` (then
        dropped). Iceberg's fast_forward fails unless main is an ancestor of the target, so main
        must still be at ``expected_main``, an ancestor of the target. ``properties`` are not
        written over SQL: the readers of these bookkeeping properties then read the log's rows
        instead. ``drop_branches`` are dropped after the move (over SQL, not in the same commit)."""
        if branch is None:
            assert to_snapshot is not None
            branch = f"mv_publish_{to_snapshot}"
            self.create_branch(name, branch, to_snapshot)
        move = f"call spark_catalog.system.fast_forward({string(name)}, 'main', {string(branch)})"
        try:  # Iceberg checks again on each attempt that main is an ancestor of the target
            retried_metadata_commit(lambda: self.execute(move), move)
        except Exception as exc:
            if lost_race(exc):
                raise LostRace(str(exc)) from exc
            raise
        finally:
            for dropped in (branch, *drop_branches):
                self.drop_branch(name, dropped)

    def branch_head(self, name: str, branch: str) -> int | None:
        rows = self.query(f"select snapshot_id from {relation(name)}.`refs` where name = {string(branch)}")
        return int(rows[0][0]) if rows else None

    def create_branch(self, name: str, branch: str, snapshot: int) -> None:
        create = f"alter table {relation(name)} create branch {ident(branch)} as of version {integer(snapshot)}"
        retried_metadata_commit(lambda: self.execute(create), create)

    def drop_branch(self, name: str, branch: str) -> None:
        """Drop a capture's or publish's branch; one left behind by a lost race is harmless."""
        drop = f"alter table {relation(name)} drop branch if exists {ident(branch)}"
        try:
            retried_metadata_commit(lambda: self.execute(drop), drop)
        except Exception as exc:
            if not lost_race(exc):
                raise

    def drop_temp_view(self, view: str) -> None:
        self.execute(drop_temp_view_statement(view))

    def reset_staging(self) -> None:
        self.apply_settings(((WAP_ID, None),))

    def apply_settings(self, settings: Sequence[Setting]) -> None:
        for statement in setting_statements(settings):
            self.execute(statement)

    def spark_version(self) -> str:
        return str(self.query("select version()")[0][0])  # '4.1.1 <git revision>'
