"""What every refresh phase works with: SQL statements, the metadata seam, and the log counts read
so far (a log snapshot never changes, so one count serves every phase that needs it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbt_incremental_mv.logs import sql as log_sql
from dbt_incremental_mv.logs.contract import LogSpec
from dbt_incremental_mv.metadata import Metadata, SqlCatalog

Query = Callable[[str], Sequence[Sequence[Any]]]
Execute = Callable[[str], None]

STATS_COLUMNS = (
    "max_sequence",
    "inserts",
    "deletes",
    "captured_through",
    "watermarks",
    "watermark_sequence",
    "reset_sequence",
    "oldest_change",
    "resume_sequence",
    "images",
    "relevant_images",
)
PROBE_COLUMNS = ("net_inserts", "net_deletes", "marked_keys", "key_buckets")  # log_sql.key_probe's
NO_PROBE = (
    "cast(null as bigint) as net_inserts, cast(null as bigint) as net_deletes, "
    "cast(null as string) as marked_keys, cast(null as string) as key_buckets"
)
NO_ROWS = {
    "max_sequence": 0,
    "inserts": 0,
    "deletes": 0,
    "captured_through": None,
    "watermarks": 0,
    "watermark_sequence": None,
    "reset_sequence": None,
    "oldest_change": None,
    "resume_sequence": None,
    "images": None,
    "relevant_images": None,
    "net_inserts": None,
    "net_deletes": None,
    "marked_keys": None,
    "key_buckets": None,
}


@dataclass(frozen=True)
class StatsRequest:
    """The counts of one log at one snapshot, for a view's position in it."""

    spec: LogSpec
    log_snapshot: int | None
    consumed: int
    excluded: tuple[int, ...] = ()
    only: tuple[int, ...] | None = None
    resume_at: int | None = None  # the master snapshot an uncaptured position resumes at
    probe: log_sql.KeyProbe | None = None  # a fast refresh's: its net images and their keys (mark.py)

    @property
    def key(self) -> tuple:
        return (
            self.spec.log_relation,
            self.log_snapshot,
            self.consumed,
            self.excluded,
            self.only,
            self.resume_at,
            self.probe,
        )

    def sql(self) -> str:
        """The counts (log_sql.log_stats, listing the images for a listed probe), and an
        aggregated probe's reads (log_sql.key_probe) or NULLs."""
        log_snapshot = self.log_snapshot
        assert log_snapshot is not None  # RefreshContext.stats reads only the requests of a log with a snapshot
        stats = log_sql.log_stats(
            self.spec,
            log_snapshot,
            self.consumed,
            self.excluded,
            self.only,
            self.resume_at,
            self.probe,
        )
        if self.probe is None or self.probe.listed:
            return f"select *, {NO_PROBE} from (\n{stats}\n)"
        probe = log_sql.key_probe(self.spec, log_snapshot, self.consumed, self.probe, self.excluded, self.only)
        return f"select * from (\n{stats}\n) cross join (\n{probe}\n)"


@dataclass
class RefreshContext:
    query: Query
    execute: Execute
    metadata: Metadata
    _stats: dict[tuple, dict[str, Any]] = field(default_factory=dict)
    statements: int = 0  # SQL statements run through it (the refresh history's count)

    def __post_init__(self) -> None:
        query, execute = self.query, self.execute

        def counted_query(sql: str) -> Any:
            self.statements += 1
            return query(sql)

        def counted_execute(sql: str) -> Any:
            self.statements += 1
            return execute(sql)

        self.query, self.execute = counted_query, counted_execute

    @classmethod
    def over_sql(cls, query: Query, execute: Execute) -> RefreshContext:
        return cls(query, execute, Metadata(SqlCatalog(query, execute)))

    def stats(self, *requests: StatsRequest) -> list[dict[str, Any]]:
        """Log counts (``log_sql.log_stats``) for each request, all not read yet in ONE statement."""
        missing = [r for r in dict.fromkeys(requests) if r.log_snapshot is not None and r.key not in self._stats]
        if missing:
            sql = "\nunion all\n".join(f"select {i} as request, * from (\n{r.sql()}\n)" for i, r in enumerate(missing))
            # one row per request (an aggregate without group by always returns one row)
            for row in self.query(sql):
                request = missing[int(row[0])]
                stats = dict(zip(["log_relation", *STATS_COLUMNS, *PROBE_COLUMNS], row[1:]))
                stats["max_sequence"] = stats["max_sequence"] or 0
                self._stats[request.key] = stats
        return [dict(self._stats[r.key]) if r.log_snapshot is not None else dict(NO_ROWS) for r in requests]

    def stats_at(self, log_relation: str, log_snapshot: int | None) -> dict[str, Any] | None:
        """Counts already read of a log snapshot, for any position (the parts that do not depend
        on a position: oldest change, watermarks), or None."""
        for key, stats in self._stats.items():
            if key[0] == log_relation and key[1] == log_snapshot:
                return dict(stats)
        return None
