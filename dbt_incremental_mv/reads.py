"""What a refresh read: the data files and bytes each of its statements scanned, per table.

The figure that does not drift with the machine's load. In session mode every statement a
refresh runs is measured as it runs (adapter/scan_metrics.py): Iceberg's scan metrics of each
table scan in the statement's executed plan (data files planned, data files its filters let
Iceberg skip, their bytes, rows returned), and the bytes the statement's tasks read from storage
(the column chunks actually decoded, after row groups are skipped). Over SQL (Thrift, http) no
plan is available: nothing is measured and the reads are unknown.

Pure values: nothing here talks to Spark.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

MB = 1024 * 1024


@dataclass(frozen=True)
class TableScan:
    """One scan of an Iceberg table in an executed plan (Iceberg's scan metrics)."""

    table: str  # as the plan names it: ``tpch.orders``, a branch as ``tpch.v.branch_x``
    files: int  # data files planned (read)
    skipped_files: int  # data files the scan's filters let Iceberg skip (manifest statistics)
    bytes: int  # the planned data files' size
    rows: int  # rows the scan returned
    delete_files: int = 0  # delete files applied


@dataclass(frozen=True)
class StatementReads:
    """What one statement read."""

    statement: str  # its first words, for people
    scans: tuple[TableScan, ...] = ()
    input_bytes: int | None = None  # bytes its tasks read from storage (None: not known)

    @property
    def files(self) -> int:
        return sum(s.files for s in self.scans)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.scans)


@dataclass(frozen=True)
class TableTotal:
    table: str
    files: int
    skipped_files: int
    bytes: int
    scans: int


@dataclass(frozen=True)
class Reads:
    """What the statements of one refresh read, in total and per table."""

    statements: tuple[StatementReads, ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, statements: Iterable[StatementReads]) -> Reads:
        return cls(tuple(statements))

    @property
    def files(self) -> int:
        return sum(s.files for s in self.statements)

    @property
    def skipped_files(self) -> int:
        return sum(scan.skipped_files for s in self.statements for scan in s.scans)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.statements)

    @property
    def input_bytes(self) -> int | None:
        known = [s.input_bytes for s in self.statements if s.input_bytes is not None]
        return sum(known) if known else None

    def by_table(self) -> list[TableTotal]:
        """Per table scanned, the files and bytes of all its scans (most bytes first)."""
        totals: dict[str, list[int]] = {}
        for statement in self.statements:
            for scan in statement.scans:
                entry = totals.setdefault(scan.table, [0, 0, 0, 0])
                entry[0] += scan.files
                entry[1] += scan.skipped_files
                entry[2] += scan.bytes
                entry[3] += 1
        rows = [TableTotal(t, f, s, b, n) for t, (f, s, b, n) in totals.items()]
        return sorted(rows, key=lambda r: (-r.bytes, r.table))

    def describe(self, tables: int = 3) -> str:
        """``read 12 files (3.4 MB), skipped 40: tpch.lineitem 8 files (3.1 MB), ...``."""
        if not self.statements:
            return ""
        line = f"read {self.files} data file{'s' if self.files != 1 else ''} ({megabytes(self.bytes)})"
        if self.skipped_files:
            line += f", skipped {self.skipped_files}"
        shown = [t for t in self.by_table() if t.files][:tables]
        if shown:
            line += ": " + ", ".join(f"{t.table} {t.files} ({megabytes(t.bytes)})" for t in shown)
        return line


def megabytes(size: int) -> str:
    return f"{size / MB:.1f} MB" if size >= MB / 10 or size == 0 else f"{size / 1024:.0f} KB"
