"""SQL for change logs: create, capture from Iceberg history, read marked changes, purge."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dbt_incremental_mv.layout import METADATA_CLEANUP
from dbt_incremental_mv.logs.contract import (
    COMMIT_COLUMN,
    DELETE,
    INSERT,
    OP_COLUMN,
    RESET,
    SEQUENCE_COLUMN,
    TIME_COLUMN,
    WATERMARK,
    LogEvolution,
    LogSpec,
    normalize_type,
)
from dbt_incremental_mv.sql_text import broadcast, ident, idents, integer, relation, string


def create_log(spec: LogSpec, master_columns: Sequence[tuple[str, str]]) -> str:
    """``create materialized view log on <master> with primary key including new values``."""
    columns = [f"{ident(name)} {spark_type}" for name, spark_type in master_columns]
    columns += [f"{ident(OP_COLUMN)} string", f"{ident(COMMIT_COLUMN)} bigint", f"{ident(TIME_COLUMN)} timestamp"]
    body = ",\n  ".join(columns)
    return (
        f"create table if not exists {relation(spec.log_relation)} (\n  {body}\n)\nusing iceberg\n"
        f"tblproperties ('format-version'='3', 'write.delete.mode'='copy-on-write', {string(METADATA_CLEANUP)}='true')"
    )


def evolve_log(spec: LogSpec, evolution: LogEvolution) -> list[str]:
    """The statements that make a capture-managed log match its master again (Iceberg schema
    changes, no data rewritten); a log that cannot be evolved in place is dropped, for capture to
    create it anew."""
    log = relation(spec.log_relation)
    if evolution.recreate:
        return [f"drop table if exists {log}"]
    statements = [
        f"alter table {log} alter column {ident(c)} type {normalize_type(new)}" for c, _, new in evolution.widened
    ]
    statements += [f"alter table {log} drop column {ident(c)}" for c in evolution.dropped]
    return statements


def log_target(spec: LogSpec, branch: str | None = None) -> str:
    """The log as a write target: its main branch, or ``branch`` (``<log>.branch_<name>``)."""
    target = relation(spec.log_relation)
    return f"{target}.{ident('branch_' + branch)}" if branch else target


def watermark_row(
    spec: LogSpec, logged: Sequence[str], master_snapshot: int | None, reset: bool = False, branch: str | None = None
) -> str:
    """A capture watermark: the log holds every change of the master up to this snapshot.

    A reset watermark (``reset=True``) also says that changes before it are incomplete.
    """
    return (
        f"insert into {log_target(spec, branch)} ({idents([*logged, OP_COLUMN, COMMIT_COLUMN, TIME_COLUMN])})\n"
        + _watermark_select(logged, master_snapshot, RESET if reset else WATERMARK)
    )


def changelog_view(spec: LogSpec, view_name: str, start: int | None, end: int) -> str:
    """Iceberg's changelog scan of the master between two snapshots (copy-on-write masters)."""
    options = [string("end-snapshot-id"), string(str(end))]
    if start is not None:
        options = [string("start-snapshot-id"), string(str(start)), *options]
    return (
        "call spark_catalog.system.create_changelog_view(\n"
        f"  table => {string(spec.master_relation)},\n"
        f"  options => map({', '.join(options)}),\n"
        f"  changelog_view => {string(view_name)}\n)"
    )


def capture_from_changelog(
    spec: LogSpec, logged: Sequence[str], view_name: str, end: int, branch: str | None = None
) -> str:
    """Append the changelog's rows (and the new watermark) to the log, in one commit."""
    op = f"case when _change_type in ('INSERT', 'UPDATE_AFTER') then {string(INSERT)} else {string(DELETE)} end"
    return (
        f"insert into {log_target(spec, branch)} ({idents([*logged, OP_COLUMN, COMMIT_COLUMN, TIME_COLUMN])})\n"
        f"select {idents(logged)}, {op}, _commit_snapshot_id, current_timestamp()\nfrom {ident(view_name)}\n"
        f"union all\n{_watermark_select(logged, end)}"
    )


def capture_by_diff(
    spec: LogSpec, logged: Sequence[str], start: int | None, end: int, branch: str | None = None
) -> str:
    """Append the difference between two master snapshots (any master, merge-on-read too).

    Costs a scan of the master at both snapshots, and every change is attributed to the end
    snapshot (per-commit detail is lost): the price of masters with delete files, which
    Iceberg's changelog scan refuses.
    """
    master = relation(spec.master_relation)
    old = f"{master} version as of {integer(start)}" if start is not None else None
    return _capture_difference(spec, logged, old, f"{master} version as of {integer(end)}", end, branch)


def capture_by_files(
    spec: LogSpec,
    logged: Sequence[str],
    removed_view: str | None,
    added_view: str | None,
    end: int,
    branch: str | None = None,
    lineage_since: int | None = None,
    written_view: str | None = None,
    gone_ids_broadcast: bool = False,
) -> str:
    """Append the difference between the rows of the master's data files that changed between
    two snapshots: ``removed_view`` (rows of the files gone since the start snapshot, as they
    were live then) against ``added_view`` (rows of the files new since, live now); a view is
    None when no such file exists. The same difference as :func:`capture_by_diff` (the rows of
    unchanged files are on both sides of it), for a read of the changed files only.

    ``lineage_since`` (the start snapshot's sequence number; the rows have Iceberg v3 row
    lineage): rows are told apart by lineage instead of by value, see :func:`_capture_by_lineage`;
    ``written_view`` (with lineage): the new side's files written since (all of ``added_view``
    on copy-on-write masters; None: none), the only ones read for after images;
    ``gone_ids_broadcast``: the old rows gone are few enough to find by their ids first (see
    :func:`_capture_by_lineage`)."""
    removed = ident(removed_view) if removed_view else None
    added = ident(added_view) if added_view else None
    if lineage_since is not None:
        written = ident(written_view) if written_view else None
        return _capture_by_lineage(
            spec, logged, removed, added, written, lineage_since, end, branch, gone_ids_broadcast
        )
    return _capture_difference(spec, logged, removed, added, end, branch)


def _capture_by_lineage(
    spec: LogSpec,
    logged: Sequence[str],
    old_rows: str | None,
    new_rows: str | None,
    written_rows: str | None,
    since: int,
    end: int,
    branch: str | None,
    gone_ids_broadcast: bool = False,
) -> str:
    """Insert into the log the changes between the rows of the changed files, by row lineage:
    a row of ``written_rows`` (the files of ``new_rows`` written since) written or updated after
    sequence number ``since`` (its ``_last_updated_sequence_number`` is above it) is an after
    image (I); a row of ``old_rows`` whose ``_row_id`` no row of ``new_rows`` carries unchanged
    (at or below ``since``) was deleted or updated: a before image (D). A filter and an anti join
    on one column, where the difference by value groups every row by all its columns;
    duplicates are told apart by their row ids. Rows copied unchanged by a copy-on-write commit
    keep their id and sequence number.

    ``gone_ids_broadcast``: the ids of the gone rows are found first, from the ids alone (the old
    files' ids against the kept ones: two shuffles of one column), and the old rows are then read
    through a broadcast semi join on them, where the plain anti join shuffles and sorts every old
    row with all its columns. Only when the gone rows are known to be few (they are broadcast)."""
    columns = idents(logged)
    stamp = f"{integer(end)}, current_timestamp()"
    updated = ident("_last_updated_sequence_number")
    row_id = ident("_row_id")
    parts = []
    if written_rows is not None:
        parts.append(
            f"select {columns}, {string(INSERT)}, {stamp} from {written_rows} where {updated} > {integer(since)}"
        )
    if old_rows is not None:
        old, kept = ident("_mv_old"), ident("_mv_kept")
        kept_ids = f"(select {row_id} from {new_rows} where {updated} <= {integer(since)}) as {kept}"
        if new_rows is None:
            gone = ""  # no file written since: every old row is gone
        elif gone_ids_broadcast:
            ids, found = ident("_mv_ids"), ident("_mv_gone")
            gone_ids = f"select {ids}.{row_id} from {old_rows} as {ids} left anti join {kept_ids} on {ids}.{row_id} = {kept}.{row_id}"
            gone = f"\nleft semi join ({broadcast(gone_ids)}) as {found} on {old}.{row_id} = {found}.{row_id}"
        else:
            gone = f"\nleft anti join {kept_ids} on {old}.{row_id} = {kept}.{row_id}"
        parts.append(
            f"select {', '.join(f'{old}.{ident(c)}' for c in logged)}, {string(DELETE)}, {stamp} from {old_rows} as {old}{gone}"
        )
    parts.append(_watermark_select(logged, end))
    return (
        f"insert into {log_target(spec, branch)} ({idents([*logged, OP_COLUMN, COMMIT_COLUMN, TIME_COLUMN])})\n"
        + "\nunion all\n".join(parts)
    )


def log_commit(
    spec: LogSpec,
    logged: Sequence[str],
    table_relation: str,
    before: int,
    after: int,
    touched: str,
    branch: str | None = None,
) -> str:
    """Append the changes one commit of the log's master made (``before`` -> ``after``), written by
    the master's own writer, which knows which rows it touched: ``touched`` is a predicate over the
    master's rows (alias ``_mv_v``) that every row the commit deleted or inserted meets. Only those
    rows are read, at both snapshots (the writer's filter pushed to both scans); rows that meet it
    but did not change are on both sides and cancel. Every change is attributed to ``after``, and
    the watermark moves there."""

    def side(snapshot: int) -> str:
        return (
            f"(select {idents(logged)} from {relation(table_relation)} version as of {integer(snapshot)} as `_mv_v`\n"
            f"where {touched})"
        )

    return _capture_difference(spec, logged, side(before), side(after), after, branch)


def log_changes(
    spec: LogSpec,
    logged: Sequence[str],
    deleted: str | None,
    inserted: str | None,
    after: int,
    branch: str | None = None,
) -> str:
    """Append the changes of the master's commit ``after`` given as the rows it deleted and the
    rows it inserted (queries of the logged columns; None: none), compared so that a row deleted
    and inserted again with the same values is not logged; the watermark moves to ``after``."""
    return _capture_difference(
        spec, logged, f"({deleted})" if deleted else None, f"({inserted})" if inserted else None, after, branch
    )


def _capture_difference(
    spec: LogSpec,
    logged: Sequence[str],
    old_rows: str | None,
    new_rows: str | None,
    end: int,
    branch: str | None,
) -> str:
    """Insert into the log: rows of ``new_rows`` not in ``old_rows`` (I), rows of ``old_rows``
    not in ``new_rows`` (D), as multisets, and the watermark at ``end``.

    Both ways in one aggregate (each row counted +1 on the new side, -1 on the old; a row with a
    net count n != 0 is logged |n| times): each side is read once, where two ``EXCEPT ALL`` would
    read both twice. Rows compare as ``EXCEPT ALL`` compares them (NULLs equal)."""
    columns = idents(logged)
    stamp = f"{integer(end)}, current_timestamp()"
    if old_rows is None or new_rows is None:  # one side only: all its rows, no difference to compute
        parts = [
            f"select {columns}, {string(op)}, {stamp} from {rows}"
            for op, rows in ((INSERT, new_rows), (DELETE, old_rows))
            if rows is not None
        ]
    else:
        sign, net, copies = ident("_mv_sign"), ident("_mv_net"), ident("_mv_copies")
        parts = [
            f"select {columns}, case when {net} > 0 then {string(INSERT)} else {string(DELETE)} end, {stamp} from (\n"
            f"select {columns}, sum({sign}) as {net} from (\n"
            f"select {columns}, 1 as {sign} from {new_rows}\nunion all\nselect {columns}, -1 as {sign} from {old_rows}\n"
            f") group by {columns} having sum({sign}) <> 0\n"
            f") lateral view explode(sequence(1, abs({net}))) {copies} as {ident('_mv_copy')}"
        ]
    parts.append(_watermark_select(logged, end))
    return (
        f"insert into {log_target(spec, branch)} ({idents([*logged, OP_COLUMN, COMMIT_COLUMN, TIME_COLUMN])})\n"
        + "\nunion all\n".join(parts)
    )


def _watermark_select(logged: Sequence[str], end: int | None, op: str = WATERMARK) -> str:
    values = [f"null as {ident(c)}" for c in logged]
    snapshot = "cast(null as bigint)" if end is None else integer(end)
    values += [string(op), snapshot, "current_timestamp()"]
    return f"select {', '.join(values)}"


def _commits(commits: Sequence[int]) -> str:
    return ", ".join(integer(c) for c in commits)


def unconsumed(consumed: int | None, excluded: Sequence[int] = (), only: Sequence[int] | None = None) -> str:
    """Rows a view has not consumed: after its sequence, not of a commit it consumed on commit;
    ``only`` restricts them to given commits (on-commit refresh)."""
    seq = ident(SEQUENCE_COLUMN)
    parts = ["true" if consumed is None else f"{seq} > {integer(consumed)}"]
    if excluded:
        parts.append(f"{ident(COMMIT_COLUMN)} not in ({_commits(excluded)})")
    if only is not None:
        parts.append(f"{ident(COMMIT_COLUMN)} in ({_commits(only) or 'null'})")
    return " and ".join(parts)


def log_stats(
    spec: LogSpec,
    log_snapshot: int,
    consumed: int | None,
    excluded: Sequence[int] = (),
    only: Sequence[int] | None = None,
    resume_at: int | None = None,
    listed: KeyProbe | None = None,
) -> str:
    """What a refresh would consume from a log pinned at ``log_snapshot``, counted by kind;
    ``resume_at``: also the sequence of the watermark at that master snapshot (a view refreshed
    completely without capture resumes there: bookkeeping.LogPosition.uncaptured); ``listed``:
    also every image it would consume, as JSON ``[{"o": op, "k": {"k0": ..}, "v": {"v0": ..}}]``
    (``images``; its key and the probe's columns: see KeyProbe)."""
    seq = ident(SEQUENCE_COLUMN)
    op = ident(OP_COLUMN)
    after = unconsumed(consumed, excluded, only)
    watermark = f"{op} in ({string(WATERMARK)}, {string(RESET)})"
    return (
        f"select {string(spec.log_relation)} as log_relation,\n"
        f"  max({seq}) as max_sequence,\n"
        f"  count_if({op} = {string(INSERT)} and {after}) as inserts,\n"
        f"  count_if({op} = {string(DELETE)} and {after}) as deletes,\n"
        f"  max_by({ident(COMMIT_COLUMN)}, {seq}) filter (where {watermark}) as captured_through,\n"
        f"  count_if({watermark}) as watermarks,\n"
        f"  max({seq}) filter (where {watermark}) as watermark_sequence,\n"
        f"  max({seq}) filter (where {op} = {string(RESET)}) as reset_sequence,\n"
        f"  min({seq}) filter (where not {watermark}) as oldest_change,\n"
        + (
            f"  max({seq}) filter (where {watermark} and {ident(COMMIT_COLUMN)} = {integer(resume_at)}) as resume_sequence,\n"
            if resume_at is not None
            else "  cast(null as bigint) as resume_sequence,\n"
        )
        + f"  {_listed_images(listed, after)} as images,\n"
        + f"  {_relevant_images(listed, after)} as relevant_images\n"
        + f"from {relation(spec.log_relation)} version as of {integer(log_snapshot)}"
    )


def _relevant_images(probe: KeyProbe | None, after: str) -> str:
    """How many of the images a view consumes meet its ``relevant`` predicate, or NULL."""
    if probe is None or probe.relevant is None:
        return "cast(null as bigint)"
    op = ident(OP_COLUMN)
    return f"count_if({op} in ({string(INSERT)}, {string(DELETE)}) and {after} and ({probe.relevant}))"


def _listed_images(probe: KeyProbe | None, after: str) -> str:
    """The images a view consumes as one JSON list (see log_stats), or NULL."""
    if probe is None or not probe.listed:
        return "cast(null as string)"
    op = ident(OP_COLUMN)
    key = ", ".join(f"{ident(k)} as {ident(f'k{i}')}" for i, k in enumerate(probe.key))
    values = ", ".join(f"{ident(c)} as {ident(f'v{i}')}" for i, c in enumerate(probe.consolidate_by or ()))
    image = f"struct({op} as {ident('o')}, struct({key}) as {ident('k')}" + (
        f", struct({values}) as {ident('v')})" if values else ")"
    )
    kept = f" and ({probe.relevant})" if probe.relevant is not None else ""
    return (
        f"to_json(collect_list({image}) filter (where {op} in ({string(INSERT)}, {string(DELETE)}) and {after}{kept}))"
    )


@dataclass(frozen=True)
class KeyProbe:
    """What the mark step reads of a log's marked images for one view, besides their counts.

    ``consolidate_by``: the master columns the view reads (its key among them): images are
    netted by them, so that an update that changed none of them (its before and after images
    agree on every one) cancels out; None: not netted (the log lacks a column the view reads).

    ``listed``: the marked images are few (the log files written since the view's position say
    so): each one's op, key and ``consolidate_by`` values are listed by the counting statement
    itself (``log_stats``: same scan, no shuffle), and the mark step nets them (refresh/phases/mark.py).
    Otherwise ``key_probe`` nets them in SQL, reading the distinct keys when ``literal_key`` (their
    types can be literals) and, for ``buckets`` (kind, lowest value, width of ``KEY_BUCKETS``
    buckets spanning the first key column's marked values, from the files' statistics), the
    occupied buckets.

    ``relevant``: a predicate over the master's columns that the rows able to take part in the
    view meet (analysis/relevance.py); the images failing it are dropped before they are netted,
    listed or counted as the view's (None: none dropped). It reads only ``consolidate_by``'s
    columns.

    ``patch_by``: the view patches this master's updates in place (analysis/patching.py): each
    listed key also says whether it is such an update (``"p"``: one net after image and one net
    before image, agreeing on these columns, among ``consolidate_by``); None: it does not."""

    key: tuple[str, ...]
    consolidate_by: tuple[str, ...] | None = None
    listed: bool = False
    literal_key: bool = False
    buckets: tuple[str, float, float] | None = None
    relevant: str | None = None
    patch_by: tuple[str, ...] | None = None


LITERAL_KEYS = 200  # Iceberg prunes by an IN list of at most this many values (IN_PREDICATE_LIMIT)
KEY_BUCKETS = 1024
NET = "_mv_net"


def _net_images(rows: str, probe: KeyProbe) -> str:
    """The marked images ``rows`` as (columns, ``_mv_net``): netted by ``probe.consolidate_by``
    (a row of values with its signed count, when not zero), else each image with +1 or -1."""
    sign = f"case when {ident(OP_COLUMN)} = {string(INSERT)} then 1 else -1 end"
    if probe.consolidate_by is None:
        return f"select {idents(probe.key)}, {sign} as {ident(NET)} from (\n{rows}\n)"
    columns = idents(probe.consolidate_by)
    return (
        f"select {columns}, sum({sign}) as {ident(NET)} from (\n{rows}\n)\ngroup by {columns} having sum({sign}) <> 0"
    )


def _double(value: float) -> str:
    return f"cast({string(repr(float(value)))} as double)"


def key_probe(
    spec: LogSpec,
    log_snapshot: int,
    consumed: int | None,
    probe: KeyProbe,
    excluded: Sequence[int] = (),
    only: Sequence[int] | None = None,
) -> str:
    """One row, from one read of the marked images: the view's net counts of after and before
    images (``net_inserts``, ``net_deletes``), the distinct keys of its net images
    (``marked_keys``, JSON: up to LITERAL_KEYS + 1 of ``{"k0": .., "k1": .., "i": <has an after
    image>, "p": <an update patched in place>}``, or NULL) and the occupied buckets of the first key column (``key_buckets``, JSON
    list of bucket numbers, or NULL). See KeyProbe."""
    columns = list(dict.fromkeys([*probe.key, *(probe.consolidate_by or ())]))
    rows = marked_changes(
        spec, log_snapshot, consumed, 0, columns, excluded, only, upto_any=True, relevant=probe.relevant
    )
    n = ident(NET)
    patched = ""
    if probe.patch_by is not None:
        # an update patched in place: one net after and one net before image, agreeing on patch_by
        agree = f" and size(collect_set(struct({idents(probe.patch_by)}))) = 1" if probe.patch_by else ""
        patched = f", (sum(greatest({n}, 0)) = 1 and sum(greatest(-{n}, 0)) = 1{agree}) as {ident('p')}"
    per_key = (
        f"select {idents(probe.key)}, sum(greatest({n}, 0)) as {ident('_mv_ins')}, "
        f"sum(greatest(-{n}, 0)) as {ident('_mv_del')}, max({n} > 0) as {ident('i')}{patched}\n"
        f"from (\n{_net_images(rows, probe)}\n) group by {idents(probe.key)}"
    )
    parts = [f"sum({ident('_mv_ins')}) as net_inserts", f"sum({ident('_mv_del')}) as net_deletes"]
    if probe.literal_key:
        flags = [ident("i"), *([ident("p")] if probe.patch_by is not None else [])]
        listed = ", ".join([*(f"{ident(k)} as {ident(f'k{i}')}" for i, k in enumerate(probe.key)), *flags])
        parts.append(f"to_json(slice(collect_list(struct({listed})), 1, {LITERAL_KEYS + 1})) as marked_keys")
    else:
        parts.append("cast(null as string) as marked_keys")
    if probe.buckets is not None:
        kind, low, width = probe.buckets
        first = ident(probe.key[0])
        value = f"unix_date({first})" if kind == "date" else f"cast({first} as double)"
        bucket = f"cast(floor(({value} - {_double(low)}) / {_double(width)}) as int)"
        parts.append(f"to_json(array_sort(collect_set({bucket}))) as key_buckets")
    else:
        parts.append("cast(null as string) as key_buckets")
    return "select " + ",\n  ".join(parts) + f"\nfrom (\n{per_key}\n)"


def marked_changes(
    spec: LogSpec,
    log_snapshot: int,
    consumed: int | None,
    upto: int,
    columns: Sequence[str],
    excluded: Sequence[int] = (),
    only: Sequence[int] | None = None,
    upto_any: bool = False,
    relevant: str | None = None,
) -> str:
    """The log rows a refresh consumes: images not consumed yet, up to sequence ``upto``
    (``upto_any``: every one in the log snapshot, as the mark step counts them), meeting the
    view's ``relevant`` predicate when given (KeyProbe)."""
    seq = ident(SEQUENCE_COLUMN)
    through = "" if upto_any else f" and {seq} <= {integer(upto)}"
    kept = f" and ({relevant})" if relevant is not None else ""
    return (
        f"select {idents([*columns, OP_COLUMN])} from {relation(spec.log_relation)} version as of {integer(log_snapshot)}\n"
        f"where {ident(OP_COLUMN)} in ({string(INSERT)}, {string(DELETE)}){through}"
        f" and {unconsumed(consumed, excluded, only)}{kept}"
    )


def net_marked_changes(
    spec: LogSpec,
    log_snapshot: int,
    consumed: int | None,
    upto: int,
    columns: Sequence[str],
    consolidate_by: Sequence[str],
    excluded: Sequence[int] = (),
    only: Sequence[int] | None = None,
    relevant: str | None = None,
) -> str:
    """The marked images netted by ``consolidate_by`` (a superset of ``columns`` and of what
    ``relevant`` reads): each row of those values whose after images (+1) and before images (-1)
    do not cancel out, as that many images of its sign, its ``columns`` and ``_mv_op``. An update
    that changed none of the columns is gone; whatever the view reads of the others is exactly as
    the raw images say."""
    rows = marked_changes(spec, log_snapshot, consumed, upto, consolidate_by, excluded, only, relevant=relevant)
    net = _net_images(rows, KeyProbe(key=spec.key, consolidate_by=tuple(consolidate_by)))
    n = ident(NET)
    return (
        f"select {idents(columns)}, case when {n} > 0 then {string(INSERT)} else {string(DELETE)} end as {ident(OP_COLUMN)}\n"
        f"from (\n{net}\n) lateral view explode(sequence(1, abs({n}))) {ident('_mv_copies')} as {ident('_mv_copy')}"
    )


def purge(
    spec: LogSpec,
    positions: Sequence[tuple[int, Sequence[int]]],
    watermark_sequence: int | None,
    *,
    as_delete: bool = False,
) -> str:
    """Delete the rows every dependent view has consumed, and all but the newest watermark.

    ``positions`` holds, per dependent view, its sequence and the commits it consumed on
    commit beyond it: a row is consumed by a view when it is at or before the sequence, or of
    one of those commits. Rows appended meanwhile are never matched, so nothing unconsumed is
    ever deleted.

    The consumed rows are found by their row id, in one of two statements that mean the same:
    Spark 3.5 cannot plan a DELETE whose condition reads Iceberg metadata columns
    (``_last_updated_sequence_number``), so there it is a MERGE whose source reads them; Spark 4.1
    cannot analyse that MERGE on a copy-on-write table (its runtime file filter re-reads the
    source without the metadata columns: ``RESOLVED_ATTRIBUTE_MISSING_FROM_INPUT``), so there
    (``as_delete``) it is a DELETE of the row ids a subquery selects.
    """
    seq = ident(SEQUENCE_COLUMN)
    op = ident(OP_COLUMN)
    watermark = f"{op} in ({string(WATERMARK)}, {string(RESET)})"
    by_all = []
    for sequence, commits in positions:
        consumed = f"{seq} <= {integer(sequence)}"
        if commits:
            consumed = f"({consumed} or {ident(COMMIT_COLUMN)} in ({_commits(commits)}))"
        by_all.append(consumed)
    condition = f"(not {watermark} and {' and '.join(by_all)})"
    if watermark_sequence is not None:
        condition += f"\n   or ({watermark} and {seq} < {integer(watermark_sequence)})"
    log = relation(spec.log_relation)
    if as_delete:
        return f"delete from {log}\nwhere `_row_id` in (select `_row_id` from {log} where {condition})"
    return (
        f"merge into {log} as log\n"
        f"using (select `_row_id` as consumed_row from {log} where {condition}) as consumed\n"
        "on log.`_row_id` = consumed.consumed_row\nwhen matched then delete"
    )
