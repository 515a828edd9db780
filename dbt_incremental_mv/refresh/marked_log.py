"""What one refresh consumes from the change log of each master (the result of the mark step).

Besides the counts, the mark step reads what the view's writes restrict the masters and the
view by (logs/sql.py, ``key_probe``):

- **the net images**: images netted by the columns the view reads, so that an update changing
  none of them (before and after images agree on each) is dropped (``skipped``), like Oracle's
  change vectors; the statements then read the images of the keys left (listed as literals), or
  the netted images (``consolidated``);
- **the marked keys**: every distinct key when there are at most ``LITERAL_KEYS`` (and the key's
  types can be literals), written into the statements as an ``IN`` list of literals: Spark
  pushes it to each scan, Iceberg skips the data files (and with bloom filters the row groups)
  that hold none of them, and no statement reads the log for its keys; more keys are read from
  the log, within the **ranges** of the first key column that hold them (several disjoint ranges
  from the occupied buckets of its marked span: changes at the oldest and the newest keys prune
  both ends, not the whole table between them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from dbt_incremental_mv.logs import sql as log_sql
from dbt_incremental_mv.logs.contract import DELETE, INSERT, LogSpec, may_have_been_widened, normalize_type
from dbt_incremental_mv.metadata import Bound
from dbt_incremental_mv.sql_text import between, broadcast, ident, idents, integer, literal, relation, string

KeyValues = tuple[tuple[Bound | None, ...], ...]  # distinct keys, each a tuple in key order (None: a NULL)


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
    # a complete refresh that did not capture the log: the view reflects master_snapshot, past
    # the log (recorded as LogPosition.uncaptured)
    uncaptured: bool = False
    # the images netted by these columns (those the view reads): some cancelled out (see above)
    consolidated: tuple[str, ...] | None = None
    skipped: int = 0  # updates dropped: their images agree on every column the view reads
    # images dropped before they were netted: they fail the view's filters of the master's rows
    # alone, which ``relevant`` states over the log's columns (analysis/relevance.py); every read
    # of the marked images applies it
    outside: int = 0
    relevant: str | None = None
    # what the marked images are netted by (phases/mark.py: netted_columns), when the log carries it all: then
    # an INS step may read its master's rows from the after images (inserted_rows)
    netted_by: tuple[str, ...] | None = None
    key_values: KeyValues | None = None  # every marked key, when few (see above); None: not known
    insert_key_values: KeyValues | None = None  # ... those with an after image
    # ... those of an update the view patches in place (analysis/patching.py); None: not known
    patch_key_values: KeyValues | None = None
    # ... those with an after image that no row of the master the view finds their rows in can
    # hold, by its files' statistics (a new customer, no order of it): in no view row
    unreferenced_key_values: KeyValues = ()
    # disjoint ranges of the first key column holding every marked key (empty: not known)
    key_ranges: tuple[tuple[Bound, Bound], ...] = ()
    # how many distinct values of the first key column those ranges hold, at least (the occupied
    # buckets the log's count found, or the listed keys' values; 0: not known)
    key_range_values: int = 0
    # the master snapshot the view reflected before this refresh, when it reflects exactly that one
    # (a log the plugin captures, consumed through that snapshot; phases/mark.py): the view's rows
    # then are its query over the masters at these snapshots. None: not known (or not read: the view
    # keeps no log of its own, the only reader)
    previous_master_snapshot: int | None = None

    @property
    def has_changes(self) -> bool:
        return bool(self.inserts or self.deletes)

    @property
    def inserts_patched(self) -> bool:
        """Whether every marked key with an after image is an update the view patches in place
        (analysis/patching.py) or in no view row (``unreferenced_key_values``): the change reads
        none of the other masters (False: not known)."""
        if self.patch_key_values is None or self.insert_key_values is None:
            return False
        return set(self.insert_key_values) <= set(self.patch_key_values) | set(self.unreferenced_key_values)

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

    def previous_master_as_of(self) -> str:
        """The master, read at the snapshot the view reflected before this refresh (which must be known)."""
        assert self.previous_master_snapshot is not None
        return f"{relation(self.spec.master_relation)} version as of {integer(self.previous_master_snapshot)}"

    def master_as_of_current_types(self, columns: Mapping[str, str]) -> str:
        """The master at the snapshot this refresh reflects, its ``columns`` (name -> the master's
        current Spark type) cast to their current types where a type may have been widened.

        Iceberg reads a snapshot with the schema it was written with, and widening a column
        (``ALTER COLUMN ... TYPE``: int to bigint, float to double, a wider decimal) makes no
        snapshot: a view built from the snapshot would keep the narrower type, and the next
        changes, logged with the wider one, could overflow it."""
        listed = as_current_types({c: columns[c] for c in sorted(columns)})
        if listed is None:
            return self.master_as_of()
        return f"(select {listed} from {self.master_as_of()})"

    def changed_keys(self, images: str = "all") -> str:
        """Distinct keys of the marked images: ``all``, or only after images (``inserts``)."""
        rows = self.images(self.spec.key, INSERT if images == "inserts" else None)
        return f"select distinct {idents(self.spec.key)} from (\n{rows}\n)"

    def known_keys(self, images: str = "all") -> KeyValues | None:
        """The marked keys as values (``all``, or those with an after image), when known."""
        return self.key_values if images == "all" else self.insert_key_values

    def key_condition(self, columns: Sequence[str], images: str = "all", *, ranged: bool = True) -> str:
        """``columns`` (holding this log's key, in key order: rendered column references) among
        the marked keys (``all``, or those with an after image): an ``IN`` list of literals when
        the keys are known, else an ``IN`` of the log's keys (broadcast) within their ranges
        (``ranged=False``: not repeated where the ranges are already a conjunct)."""
        known = self.known_keys(images)
        if known is not None:
            return literal_in(columns, known)
        exact = f"({', '.join(columns)}) in ({broadcast(self.changed_keys(images))})"
        prefilter = self.key_prefilter(columns) if ranged else None
        return f"({prefilter} and {exact})" if prefilter else exact

    def key_in(self, names: Sequence[str], images: str = "all") -> str:
        """The columns ``names`` (quoted here; holding this log's key, in key order) among the
        marked keys (``all``, or those with an after image): key_condition."""
        return self.key_condition([ident(n) for n in names], images)

    def key_prefilter(self, columns: Sequence[str]) -> str | None:
        """What Spark pushes to a scan of ``columns`` (rendered, in key order) for the marked
        keys: the literals, or the ranges of the first column; None: nothing."""
        if self.key_values is not None:
            return literal_in(columns, self.key_values)
        if not self.key_ranges:
            return None
        ranges = [between(columns[0], low, high) for low, high in self.key_ranges]
        return ranges[0] if len(ranges) == 1 else f"({' or '.join(ranges)})"

    def key_range(self, names: Sequence[str] | None = None) -> str | None:
        """The marked keys' prefilter over the columns ``names`` (quoted here; default the key)."""
        return self.key_prefilter([ident(n) for n in (names or self.spec.key)])

    def logs_columns(self, columns: tuple[str, ...] | list[str]) -> bool:
        """Whether the log's images carry every one of ``columns`` (master column names)."""
        have = {c.casefold() for c in self.logged}
        return bool(columns) and all(c.casefold() in have for c in columns)

    def inserted_rows(self, types: Mapping[str, str]) -> str:
        """The master rows of the marked keys with an after image, read from the log, not the
        master: each such key's net after image, with the columns its images are netted by
        (``netted_by``, which must be set), cast to their current Spark types in the master
        (``types``, by case-folded name) where a type may have been widened (see
        ``master_as_of_current_types``).

        A master key is unique and each image of a row is followed by the one that replaced it,
        so once the images are netted by the columns the view reads (as the mark step netted
        them: the same keys are marked) a key keeps at most its last after image: its row in the
        master at the snapshot the log reaches. A key with a NULL is left out, as a restriction
        to the marked keys leaves it out of the master (an ``IN`` matches no NULL)."""
        assert self.netted_by is not None
        names = list(self.netted_by)
        rows = log_sql.net_marked_changes(
            self.spec,
            self.log_snapshot,
            self.consumed,
            self.upto,
            names,
            names,
            self.excluded,
            self.only,
            self.relevant,
        )
        listed = as_current_types({c: types.get(c.casefold(), "") for c in names}) or idents(names)
        keyed = " and ".join(f"{ident(k)} is not null" for k in self.spec.key)
        return f"(select {listed} from (\n{rows}\n)\nwhere `_mv_op` = {string(INSERT)} and {keyed})"

    def signed_images(self, columns: tuple[str, ...] | list[str], sign: str = "_mv_sign", invert: bool = False) -> str:
        """The marked images' ``columns`` and their sign, named ``sign``: an after image counts +1
        and a before image -1 (the other way round with ``invert``)."""
        positive, negative = (DELETE, INSERT) if invert else (INSERT, DELETE)
        case = f"case {ident('_mv_op')} when {string(positive)} then 1 when {string(negative)} then -1 end"
        return f"select {idents(columns)}, {case} as {ident(sign)} from (\n{self.images(columns)}\n)"

    def images(self, columns: tuple[str, ...] | list[str] | Sequence[str], op: str | None = None) -> str:
        """The marked images' ``columns`` and ``_mv_op`` (only ``op`` images when given): netted
        by the view's columns when some cancelled out (``consolidated``)."""
        if self.consolidated is not None:
            rows = log_sql.net_marked_changes(
                self.spec,
                self.log_snapshot,
                self.consumed,
                self.upto,
                columns,
                self.consolidated,
                self.excluded,
                self.only,
                self.relevant,
            )
        elif self.skipped and self.key_values is not None:  # the listed keys left: the others cancelled out
            read = list(dict.fromkeys([*columns, *self.spec.key]))
            rows = log_sql.marked_changes(
                self.spec,
                self.log_snapshot,
                self.consumed,
                self.upto,
                read,
                self.excluded,
                self.only,
                relevant=self.relevant,
            )
            kept = literal_in([ident(k) for k in self.spec.key], self.key_values)
            rows = f"select {idents([*columns, '_mv_op'])} from (\n{rows}\n) where {kept}"
        else:
            rows = log_sql.marked_changes(
                self.spec,
                self.log_snapshot,
                self.consumed,
                self.upto,
                columns,
                self.excluded,
                self.only,
                relevant=self.relevant,
            )
        if op is not None:
            rows = f"select * from (\n{rows}\n) where `_mv_op` = {string(op)}"
        return rows


def as_current_types(columns: Mapping[str, str]) -> str | None:
    """A select list of ``columns`` (name -> the master's current Spark type, in list order),
    each cast to its type where the type may have been widened (``master_as_of_current_types``);
    None when no column's may have."""
    casts = {c: normalize_type(t) for c, t in columns.items() if t and may_have_been_widened(t)}
    if not casts:
        return None
    return ", ".join(f"cast({ident(c)} as {casts[c]}) as {ident(c)}" if c in casts else ident(c) for c in columns)


def _no_null(key: tuple[Bound | None, ...]) -> TypeGuard[tuple[Bound, ...]]:
    return all(v is not None for v in key)


def literal_in(columns: Sequence[str], keys: KeyValues) -> str:
    """``columns`` (rendered) among ``keys`` (tuples of literal values): ``c in (..)``, or for a
    key of several columns the first one's values (what Iceberg prunes by) and the tuples. A
    key with a NULL matches nothing (as with an IN of a subquery). ``false`` for no key. The
    tuples are compared as structs named as Spark names a literal tuple's fields (col1, col2,
    ...): a tuple of columns would be named by them, and Spark widens no struct to another whose
    fields are named otherwise (a BIGINT key among INT literals failed)."""
    complete = tuple(k for k in keys if _no_null(k))
    if not complete:
        return "false"
    if len(columns) == 1:
        return f"{columns[0]} in ({', '.join(literal(k[0]) for k in complete)})"
    first = ", ".join(literal(v) for v in dict.fromkeys(k[0] for k in complete))
    tuples = ", ".join("(" + ", ".join(literal(v) for v in k) + ")" for k in complete)
    named = ", ".join(f"'col{n}', {column}" for n, column in enumerate(columns, 1))
    return f"({columns[0]} in ({first}) and named_struct({named}) in ({tuples}))"
