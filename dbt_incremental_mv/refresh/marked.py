"""What one refresh consumes from the change log of each master (the result of the mark step)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dbt_incremental_mv.logs import sql as log_sql
from dbt_incremental_mv.logs.contract import DELETE, INSERT, LogSpec, may_have_been_widened, normalize_type
from dbt_incremental_mv.metadata import Bound
from dbt_incremental_mv.sql_text import between, ident, idents, integer, relation, string


@dataclass(frozen=True)
class MarkedLog:
    """The marked rows of one log: images with sequence in (consumed, upto], read at log_snapshot."""

    spec: LogSpec
    log_snapshot: int
    consumed: int | None  # the view's previous position (None: from the start of the log)
    upto: int  # the sequence this refresh consumes through
    inserts: int  # marked after images
    deletes: int  # marked before images
    master_snapshot: int  # the master snapshot the refreshed view reflects
    excluded: tuple[int, ...] = ()  # commits the view already consumed on commit
    only: tuple[int, ...] | None = None  # on-commit refresh: just these commits
    logged: tuple[str, ...] = ()  # the master columns the log's images carry (empty: not known)
    # (key column, lowest, highest value) of the marked images, from the log files' statistics
    key_bounds: tuple[tuple[str, Bound, Bound], ...] = ()
    # a complete refresh that did not capture the log: the view reflects master_snapshot, past
    # the log (recorded as LogPosition.uncaptured)
    uncaptured: bool = False

    @property
    def has_changes(self) -> bool:
        return bool(self.inserts or self.deletes)

    @property
    def kind(self) -> str:
        if not self.has_changes:
            return "none"
        if not self.deletes:
            return "insert-only"
        if not self.inserts:
            return "delete-only"
        return "mixed"

    def master_as_of(self) -> str:
        """The master, read at the snapshot this refresh reflects."""
        return f"{relation(self.spec.master_relation)} version as of {integer(self.master_snapshot)}"

    def master_as_of_current_types(self, columns: Mapping[str, str]) -> str:
        """The master at the snapshot this refresh reflects, its ``columns`` (name -> the master's
        current Spark type) cast to their current types where a type may have been widened.

        Iceberg reads a snapshot with the schema it was written with, and widening a column
        (``ALTER COLUMN ... TYPE``: int to bigint, float to double, a wider decimal) makes no
        snapshot: a view built from the snapshot would keep the narrower type, and the next
        changes, logged with the wider one, could overflow it."""
        casts = {c: normalize_type(t) for c, t in columns.items() if may_have_been_widened(t)}
        if not casts:
            return self.master_as_of()
        listed = ", ".join(
            f"cast({ident(c)} as {casts[c]}) as {ident(c)}" if c in casts else ident(c) for c in sorted(columns)
        )
        return f"(select {listed} from {self.master_as_of()})"

    def changed_keys(self, images: str = "all") -> str:
        """Distinct keys of the marked images: ``all``, or only after images (``inserts``)."""
        rows = log_sql.marked_changes(
            self.spec, self.log_snapshot, self.consumed, self.upto, self.spec.key, self.excluded, self.only
        )
        if images == "inserts":
            rows += " and `_mv_op` = 'I'"
        return f"select distinct {', '.join(f'`{k}`' for k in self.spec.key)} from (\n{rows}\n)"

    def key_range(self, names: Sequence[str] | None = None) -> str | None:
        """``k BETWEEN lowest AND highest`` for each key column whose marked values are bounded
        (named ``names``, in key order, e.g. the view's hidden key columns), or None.

        Redundant with an ``IN`` of the changed keys, but Spark pushes it down to the scan, where
        Iceberg skips the data files whose statistics are outside it: when changes cluster
        (recent rows), the master or the view is read a few files at a time."""
        renamed = dict(zip(self.spec.key, names or self.spec.key))
        parts = [
            between(ident(renamed[column]), low, high)
            for column, low, high in self.key_bounds
            if column in renamed
        ]
        return " and ".join(parts) or None

    def logs_columns(self, columns: tuple[str, ...] | list[str]) -> bool:
        """Whether the log's images carry every one of ``columns`` (master column names)."""
        have = {c.casefold() for c in self.logged}
        return bool(columns) and all(c.casefold() in have for c in columns)

    def signed_images(self, columns: tuple[str, ...] | list[str], sign: str = "_mv_sign", invert: bool = False) -> str:
        """The marked images' ``columns`` and their sign, named ``sign``: an after image counts +1
        and a before image -1 (the other way round with ``invert``)."""
        positive, negative = (DELETE, INSERT) if invert else (INSERT, DELETE)
        case = f"case {ident('_mv_op')} when {string(positive)} then 1 when {string(negative)} then -1 end"
        return f"select {idents(columns)}, {case} as {ident(sign)} from (\n{self.images(columns)}\n)"

    def images(self, columns: tuple[str, ...] | list[str], op: str | None = None) -> str:
        """The marked images' ``columns`` and ``_mv_op`` (only ``op`` images when given)."""
        rows = log_sql.marked_changes(
            self.spec, self.log_snapshot, self.consumed, self.upto, columns, self.excluded, self.only
        )
        if op is not None:
            rows += f" and `_mv_op` = {string(op)}"
        return rows

