"""An in-memory stand-in for the Iceberg catalog behind the metadata seam, and for the SQL a
refresh runs: enough to drive the engine through plan, capture, mark, publish and purge without
Spark, and to record every SQL statement and metadata commit it makes.

Tables hold snapshots (id, parent, operation, summary) and refs; a statement that writes a
table (``insert into``, ``merge into`` ...) adds a snapshot to it: on a branch when it names
one, staged when ``spark.wap.id`` is set (its summary then carries the id), on main otherwise.
Log counts (``_mv_op`` / sequence aggregates) are answered from a per-log table of rows.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from dbt_incremental_mv.metadata import (
    ChangedFiles,
    DataFile,
    LostRace,
    Metadata,
    Snapshot,
    TableMetadata,
    drop_temp_view_statement,
    setting_statements,
)

LOG_COLUMNS = [("_mv_op", "string"), ("_mv_commit", "bigint"), ("_mv_time", "timestamp")]


@dataclass
class FakeTable:
    name: str
    columns: list[tuple[str, str]]
    properties: dict[str, str] = field(default_factory=dict)
    snapshots: dict[int, Snapshot] = field(default_factory=dict)
    refs: dict[str, int] = field(default_factory=dict)
    sequence: int = 0
    # a log's rows: (op, sequence, commit)
    rows: list[tuple[str, int, int | None]] = field(default_factory=list)


class FakeIceberg:
    """The catalog (``load``, ``fast_forward``, branches) plus ``query``/``execute`` for SQL."""

    def __init__(self) -> None:
        self.tables: dict[str, FakeTable] = {}
        self.ids = itertools.count(1000)
        self.statements: list[str] = []  # every SQL statement, reads included
        self.settings: list[str] = []  # every session setting made without a statement, as SET/RESET
        self.trace: list[str] = []  # the statements and (marked "[session]") the settings, in order
        self.commits: list[str] = []  # metadata commits (fast-forwards, branches)
        self.wap_id: str | None = None
        self.bounds_read: list[tuple[str, tuple[str, ...]]] = []  # written_since calls: (table, columns)
        self.staged: list[ChangedFiles] = []  # changed files staged for a capture, and not unstaged yet
        self.files_staged: list[tuple[str, int, int]] = []  # every stage_changed_files call: (table, start, end)
        self.spark = "3.5.1"  # what ``select version()`` answers: the Spark line decides some statements

    # ------------------------------------------------------------ building a warehouse
    def table(self, name: str, columns: list[tuple[str, str]], properties: dict[str, str] | None = None) -> FakeTable:
        table = FakeTable(name, columns, {"format-version": "2", **(properties or {})})
        self.tables[name] = table
        self.commit(name, "append")
        return table

    def commit(
        self, name: str, operation: str, *, branch: str | None = "main", summary: dict | None = None, on: str | None = None,
    ) -> int:
        """A snapshot on ``branch`` (None: staged, made on ``on`` or main)."""
        table = self.tables[name]
        snapshot_id = next(self.ids)
        parent = table.refs.get(branch or on or "main")
        table.sequence += 1
        sizes = {"total-files-size": str(1024 * len(table.rows))} if name.split(".")[-1].startswith("mlog_") else {}
        table.snapshots[snapshot_id] = Snapshot(
            snapshot_id, parent, operation, {"operation": operation, "total-records": "0", **sizes, **(summary or {})},
            table.sequence,
            schema_id=0,
        )
        if branch is not None:
            table.refs[branch] = snapshot_id
        return snapshot_id

    def log_rows(self, name: str, *ops: str, commit: int | None = None) -> None:
        table = self.tables[name]
        table.rows += [(op, table.sequence, commit) for op in ops]

    # ------------------------------------------------------------ the catalog side of the seam
    def load(self, name: str, columns=None) -> TableMetadata | None:
        table = self.tables.get(name)
        if table is None:
            return None
        branches = {ref: snapshot for ref, snapshot in table.refs.items() if ref != "main"}
        return TableMetadata(
            name, tuple(table.columns), dict(table.properties), dict(table.snapshots), table.refs.get("main"), branches
        )

    def columns(self, name: str) -> list[tuple[str, str]]:
        table = self.tables.get(name)
        return list(table.columns) if table else []

    def fast_forward(self, name, expected_main, *, to_snapshot=None, branch=None, properties=None, drop_branches=()) -> None:
        table = self.tables[name]
        if table.refs.get("main") != expected_main:
            raise LostRace(f"main of {name} moved: another commit committed while this one ran")
        if branch is not None:
            to_snapshot = table.refs.pop(branch)
        for dropped in drop_branches:
            table.refs.pop(dropped, None)
        table.refs["main"] = to_snapshot
        table.properties.update(properties or {})
        self.commits.append(f"fast_forward {name} -> {to_snapshot}")

    def branch_head(self, name: str, branch: str) -> int | None:
        return self.tables[name].refs.get(branch)

    def create_branch(self, name: str, branch: str, snapshot: int) -> None:
        self.tables[name].refs[branch] = snapshot
        self.commits.append(f"create branch {branch} on {name}")

    def drop_branch(self, name: str, branch: str) -> None:
        self.tables[name].refs.pop(branch, None)

    def data_files(self, name: str, upper_bound_of: str | None = None) -> list[DataFile]:
        """A log's rows as files: per commit (sequence number), one of changes and one of markers,
        as a capture's append writes them."""
        files: dict[str, list[str]] = {}
        for op, sequence, _ in self.tables[name].rows:
            files.setdefault(f"{sequence}-{'marks' if op in ('W', 'R') else 'changes'}", []).append(op)
        return [
            DataFile(path, int(path.split("-")[0]), max(ops) if upper_bound_of else None)
            for path, ops in sorted(files.items())
        ]

    def written_since(self, name: str, snapshot: int, columns, after_sequence: int):
        from dbt_incremental_mv.metadata import WrittenSince

        self.bounds_read.append((name, tuple(columns)))
        return WrittenSince(0, {})  # the fake keeps no file statistics

    def delete_data_files(self, name: str, paths) -> None:
        table = self.tables[name]
        gone = set(paths)
        table.rows = [r for r in table.rows if f"{r[1]}-{'marks' if r[0] in ('W', 'R') else 'changes'}" not in gone]
        self.commit(name, "delete")
        self.commits.append(f"delete_files {name} {sorted(gone)}")

    def stage_changed_files(self, name: str, start: int, end: int) -> ChangedFiles:
        self.files_staged.append((name, start, end))
        token = len(self.files_staged)
        changed = ChangedFiles(f"mv_files_removed_{token}", f"mv_files_added_{token}", 1, 2, f"mv_files_added_{token}", 2)
        self.staged.append(changed)
        return changed

    def stage_appended_files(self, name: str, snapshot: int) -> ChangedFiles | None:
        if self.tables[name].snapshots[snapshot].operation != "append":
            return None
        self.files_staged.append((name, snapshot, snapshot))
        changed = ChangedFiles(None, f"mv_files_appended_{len(self.files_staged)}", 0, 1, f"mv_files_appended_{len(self.files_staged)}", 1)
        self.staged.append(changed)
        return changed

    def unstage_changed_files(self, changed: ChangedFiles) -> None:
        self.staged.remove(changed)

    def drop_temp_view(self, view: str) -> None:  # through the session, as the Java API's catalog: no statement
        self.trace.append(f"[session] {drop_temp_view_statement(view)}")

    def scan_size(self, name: str, snapshot: int | None, range_filter: tuple) -> int | None:
        return None  # the fake keeps no file statistics: a pruned read's size is not known

    def reset_staging(self) -> None:
        self.wap_id = None

    def apply_settings(self, settings) -> None:
        """Through the session, as the Java API's catalog makes them: no statement (kept apart,
        as the statements they stand for)."""
        for (key, value), statement in zip(settings, setting_statements(settings)):
            self.settings.append(statement)
            self.trace.append(f"[session] {statement}")
            if key == "spark.wap.id":
                self.wap_id = value

    def spark_version(self) -> str:
        return self.spark


    def metadata(self) -> Metadata:
        metadata = Metadata(self)  # type: ignore[arg-type]
        metadata.__class__ = _JvmLikeMetadata
        return metadata

    # ------------------------------------------------------------ SQL
    def query(self, sql: str) -> list[tuple]:
        self.statements.append(sql)
        self.trace.append(sql)
        if "as request" in sql:
            return [self._log_stats(int(m.group(1)), block) for m, block in _stats_blocks(sql)]
        if "as snapshot_id, count_if(" in sql:  # staleness counts: nothing unconsumed, one watermark
            return [(int(s), 0, 1) for s in re.findall(r"select (\d+) as snapshot_id", sql)]
        raise AssertionError(f"unexpected query: {sql[:200]}")

    def execute(self, sql: str) -> None:
        self.statements.append(sql)
        self.trace.append(sql)
        text = sql.strip().lower()
        if text.startswith("set spark.wap.id="):
            self.wap_id = sql.strip().split("=", 1)[1]
            return
        if text.startswith("reset spark.wap.id"):
            self.wap_id = None
            return
        target = re.match(r"(?:insert into|merge into|delete from|insert overwrite)\s+`([^`]+)`\.`([^`]+)`(?:\.`branch_([^`]+)`)?", text)
        if target:
            name, branch = f"{target.group(1)}.{target.group(2)}", target.group(3)
            operation = "append" if text.startswith("insert into") else "overwrite"
            if self.wap_id is not None:  # staged: on the branch it names, or on main
                self.commit(name, operation, branch=None, summary={"wap.id": self.wap_id, "added-records": "1"}, on=branch)
            else:
                snapshot = self.commit(name, operation, branch=branch or "main")
                if name.split(".")[1].startswith("mlog_") and operation == "append":
                    watermark = re.search(r"'w', (\d+), current_timestamp", text)
                    self.log_rows(name, "I", "D")
                    self.log_rows(name, "W", commit=int(watermark.group(1)) if watermark else snapshot)
                purge = ("consumed_row" in text) if text.startswith("merge into") else "where `_row_id` in (select" in text
                if purge:  # consumed rows go
                    table = self.tables[name]
                    table.rows = [r for r in table.rows if r[0] == "W"][-1:] + [r for r in table.rows if r[0] != "W" and r[1] >= table.sequence]

    def _log_stats(self, request: int, block: str) -> tuple:
        name = re.search(r"from `([^`]+)`\.`([^`]+)` version as of", block)
        table = self.tables[f"{name.group(1)}.{name.group(2)}"]
        consumed = int(re.search(r"`_last_updated_sequence_number` > (\d+)", block).group(1))
        changes = [r for r in table.rows if r[0] in ("I", "D")]
        marks = [r for r in table.rows if r[0] in ("W", "R")]
        inserts = sum(1 for r in changes if r[0] == "I" and r[1] > consumed)
        deletes = sum(1 for r in changes if r[0] == "D" and r[1] > consumed)
        newest_mark = max(marks, key=lambda r: r[1]) if marks else None
        resume_at = re.search(r"`_mv_commit` = (\d+)\) as resume_sequence", block)
        resume = max((r[1] for r in marks if resume_at and r[2] == int(resume_at.group(1))), default=None)
        return (
            request, table.name, max((r[1] for r in table.rows), default=None), inserts, deletes,
            newest_mark[2] if newest_mark else None,
            len(marks), newest_mark[1] if newest_mark else None, None, min((r[1] for r in changes), default=None),
            resume, None, None, None, None, None, None,  # no images nor key probe: the fake keeps no column values
        )


class _JvmLikeMetadata(Metadata):
    @property
    def in_jvm(self) -> bool:  # the fake answers like the Java API: metadata without SQL
        return True


def _stats_blocks(sql: str):
    parts = sql.split("\nunion all\nselect ")
    for i, part in enumerate(parts):
        block = part if i == 0 else "select " + part
        yield re.match(r"select (\d+) as request", block), block


KINDS = (
    ("call spark_catalog.system.create_changelog_view", "capture: changelog of {master}"),
    ("insert into `shop`.`mlog_", "capture: append to {log}"),
    ("select 0 as request", "mark: log counts"),
    ("set spark.wap.id", "stage"),
    ("merge into `shop`.`v`.`branch_mv_write", "write on branch: merge"),
    ("insert into `shop`.`v`.`branch_mv_write", "write on branch: insert"),
    ("delete from `shop`.`v`.`branch_mv_write", "write on branch: delete"),
    ("merge into `shop`.`v`", "write: merge"),
    ("insert into `shop`.`v`", "write: insert"),
    ("delete from `shop`.`v`", "write: delete"),
    ("insert overwrite `shop`.`v`", "write: overwrite"),
    ("reset spark.wap.id", "unstage"),
    ("set spark.sql.", "cache: set"),  # the CACHE TABLEs planned in the session (publish.CACHE_PLANNING)
    ("reset spark.sql.", "cache: reset"),
    ("cache table `mv_write_", "cache: {what}"),
    ("cache lazy table `mv_write_", "cache lazily: {what}"),
    ("drop view if exists `mv_write_", "uncache: {what}"),
    ("merge into `shop`.`mlog_", "purge {log}"),
    ("delete from `shop`.`mlog_", "purge {log}"),
    ("create or replace table shop.v", "create view"),
)


def statement_kinds(statements: list[str]) -> list[str]:
    """What each statement is, in a word or two (the pinned tests compare these)."""
    found = []
    for sql in statements:
        text = " ".join(sql.split())
        kind = next((label for prefix, label in KINDS if text.startswith(prefix)), f"other: {text[:60]}")
        log = re.search(r"`shop`\.`(mlog_\w+)`", text)
        master = re.search(r"table => 'shop\.(\w+)'", text)
        what = re.search(r"`mv_write_\w*?_([a-z]+)`", text)
        found.append(kind.format(
            log=log.group(1) if log else "?", master=master.group(1) if master else "?", what=what.group(1) if what else "?",
        ))
    return found
