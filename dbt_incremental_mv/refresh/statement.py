"""What a view-class module returns: the one statement that applies the marked changes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RefreshStatement:
    sql: str
    steps_run: tuple[str, ...]  # e.g. "DEL orders", "INS customers"
    steps_skipped: tuple[str, ...]
    # a query counting what ``sql`` will change (config refresh_stats): one row of named counts
    stats_sql: str | None = None
    stats_labels: tuple[str, ...] = ()  # what each column of the stats row counts
