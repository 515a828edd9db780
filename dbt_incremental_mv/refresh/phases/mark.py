"""Mark: fix what this refresh consumes from each log (the rows after the view's position, up to
the newest sequence in the log snapshot read) and which master snapshot it reflects.

A log that provably gained no row since the view's position (no commit since but compactions
and the plugin's purges) is not read; the others are counted in one statement. In session mode
the range of the marked keys comes with them, from the statistics of the log files written after
the position (metadata only): the writes add it to their filters, so that Iceberg reads only the
files of the masters and of the view that can hold those keys.

A fast refresh also reads, in the same statement, what its writes restrict the masters and the
view by (see marked.py): the view's net images (an update changing no column the view reads is
skipped) and their keys, as literals when few, else as ranges of the first key column."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbt_incremental_mv import environment
from dbt_incremental_mv.analysis.model import ViewDefinition
from dbt_incremental_mv.analysis.patching import patching
from dbt_incremental_mv.analysis.relevance import relevant_rows
from dbt_incremental_mv.logs import properties as log_properties
from dbt_incremental_mv.logs.contract import INSERT, LogSpec, normalize_type
from dbt_incremental_mv.logs.sql import KEY_BUCKETS, LITERAL_KEYS, KeyProbe
from dbt_incremental_mv.metadata import EPOCH, Bound
from dbt_incremental_mv.refresh.context import RefreshContext, StatsRequest
from dbt_incremental_mv.refresh.marked_log import KeyValues, MarkedLog
from dbt_incremental_mv.refresh.phases.decide import RefreshAction
from dbt_incremental_mv.refresh.phases.plan import RefreshPlan
from dbt_incremental_mv.refresh.state import staleness
from dbt_incremental_mv.refresh.state.bookkeeping import LogPosition, ViewState

INTEGER_TYPES = frozenset({"tinyint", "smallint", "int", "integer", "bigint", "byte", "short", "long"})
LITERAL_TYPES = INTEGER_TYPES | {"string", "date"}
MAX_RANGES = 16  # disjoint ranges of the first key column, at most (an OR Iceberg evaluates per file)
# The images are listed to the mark step when they hold at most this many values. Netting them
# here costs ~15 us an image (113,000 lineitem images at TPC-H scale factor 10 added 2.2 s to a
# 2.3 s counting statement); netted in SQL, the counting statement took about as long (2.3 s)
# and nothing was added: listing pays while they are few.
LISTED_VALUES = 200_000
# Tuning and test knobs: how many keys at most become literals (0: none, the logs are read for
# them), how many values the images listed to the mark step hold at most (0: netted in SQL).


def _limit(variable: environment.EnvironmentVariable, default: int) -> int:
    try:
        return max(0, int(variable.value() or default))
    except ValueError:
        return default


def literal_keys() -> int:
    """At most this many marked keys become literals (default LITERAL_KEYS: Iceberg's IN limit)."""
    return min(_limit(environment.LITERAL_KEYS, LITERAL_KEYS), LITERAL_KEYS)


def listed_values() -> int:
    return _limit(environment.LISTED_VALUES, LISTED_VALUES)


def nothing_to_refresh(ctx: RefreshContext, plan: RefreshPlan, state: ViewState) -> bool:
    """Nothing to capture, mark or write (see staleness.positions_current): metadata only."""
    specs = list(plan.logs.values())
    positions = [(s.capture, s.master_relation, s.log_relation, state.logs.get(s.log_relation)) for s in specs]
    relations = sorted({s.master_relation if s.capture else s.log_relation for s in specs})
    return bool(relations) and staleness.positions_current(positions, ctx.metadata.mains(relations))


@dataclass(frozen=True)
class Marked:
    """What the mark step fixed: the marked rows of every log of the view, by master relation;
    and, for a fast refresh, why it cannot go on (a log reset: its changes are lost; None: it can)."""

    logs: dict[str, MarkedLog]
    log_reset: str | None = None


def mark_logs(
    ctx: RefreshContext,
    plan: RefreshPlan,
    state: ViewState | None,
    uncaptured: frozenset[str] = frozenset(),
    action: str | None = None,
) -> Marked:
    """The marked rows of every log of the view, by master relation, for a refresh carrying out
    ``action`` (default: the plan's). A fast refresh whose log was reset (the master's history
    rewritten before capture) cannot go on (``Marked.log_reset`` says why: decide.py).

    ``uncaptured``: the masters of capture-managed logs this (complete) refresh did not capture:
    the view reflects their current snapshot, past the log (LogPosition.uncaptured). A view whose
    position is such resumes at the log's watermark at that snapshot (a capture stops there); if
    a capture went past it in one piece, the changes on either side cannot be told apart, and the
    view is recomputed."""
    meta = ctx.metadata
    action = action or plan.action
    specs = list(plan.logs.values())
    log_snapshots = meta.mains([s.log_relation for s in specs])
    master_snapshots = meta.mains(
        [s.master_relation for s in specs if not s.capture or s.master_relation in uncaptured]
    )
    requests: dict[str, StatsRequest] = {}
    unchanged: set[str] = set()
    for spec in specs:
        position = state.logs.get(spec.log_relation) if state else None
        log = meta.table(spec.log_relation)
        if spec.master_relation in uncaptured or (
            position is not None
            and not position.commits
            and log is not None
            and log_properties.no_rows_added_since(log, position.log_snapshot)
        ):
            unchanged.add(spec.master_relation)  # (a log not captured: what it holds is not consumed yet)
            continue
        resume_at = position.master_snapshot if position is not None and position.uncaptured else None
        requests[spec.master_relation] = StatsRequest(
            spec,
            log_snapshots.get(spec.log_relation),
            position.sequence if position else 0,
            tuple(position.commits) if position else (),
            resume_at=resume_at,
            probe=key_probe(
                ctx,
                plan,
                spec,
                log_snapshots.get(spec.log_relation),
                position.sequence if position else 0,
                action,
            ),
        )
    counted = dict(zip(requests, ctx.stats(*requests.values())))
    resumed, reset = _resume(ctx, requests, counted, action)
    marked = {}
    # read for a view that logs what it deletes only (own_log.py, join_view._deleted_rows)
    logs_deletes = plan.own_log is not None
    for spec in specs:
        position = state.logs.get(spec.log_relation) if state else None
        consumed = position.sequence if position else 0
        skipped = spec.master_relation in uncaptured
        if spec.master_relation in unchanged:
            if spec.capture and not skipped:
                assert position is not None
                master_snapshot = position.master_snapshot
            else:  # the master as it is now: an ingestion log's, or one this refresh did not capture
                master_snapshot = master_snapshots.get(spec.master_relation)
            marked[spec.master_relation] = MarkedLog(
                spec=spec,
                log_snapshot=log_snapshots.get(spec.log_relation, 0),
                consumed=consumed,
                upto=consumed,
                inserts=0,
                deletes=0,
                master_snapshot=master_snapshot if master_snapshot is not None else -1,
                uncaptured=skipped or (position is not None and position.uncaptured),
                previous_master_snapshot=previous_snapshot(ctx, spec, position, master_snapshot)
                if logs_deletes and not skipped
                else None,
            )
            continue
        stats = counted[spec.master_relation]
        if spec.master_relation in resumed:
            consumed, stats = resumed[spec.master_relation]
        if (
            reset is None
            and action == RefreshAction.FAST
            and stats["reset_sequence"] is not None
            and stats["reset_sequence"] > consumed
        ):
            reset = f"the history of {spec.master_name} was rewritten or expired before it was captured"
        master_snapshot = stats["captured_through"] if spec.capture else master_snapshots.get(spec.master_relation)
        probe = requests[spec.master_relation].probe
        marked[spec.master_relation] = MarkedLog(
            **{
                "spec": spec,
                "log_snapshot": log_snapshots.get(spec.log_relation, 0),
                "consumed": consumed,
                "upto": max(stats["max_sequence"], consumed),
                "inserts": int(stats["inserts"]),
                "deletes": int(stats["deletes"]),
                "master_snapshot": master_snapshot if master_snapshot is not None else -1,
                "excluded": tuple(position.commits if position else ()),
                "logged": tuple(plan.logged_columns.get(spec.log_relation, ())),
                "previous_master_snapshot": previous_snapshot(ctx, spec, position, master_snapshot)
                if logs_deletes and spec.master_relation not in resumed
                else None,
                **probed(stats, probe, key_types(plan, spec)),  # the view's net counts replace the log's
            }
        )
    return Marked(with_unreferenced_keys(ctx, plan, marked), reset)


def with_unreferenced_keys(
    ctx: RefreshContext, plan: RefreshPlan, marked: dict[str, MarkedLog]
) -> dict[str, MarkedLog]:
    """``marked`` with the keys of a patched master (analysis/patching.py) that have an after
    image, are no patched update and that no row of the master holding its key can hold, by that
    master's file statistics at the marked snapshot (a scan plan filtered by the keys: manifests
    only, session mode): a new customer whose key no data file of the orders spans has no order,
    so no view row, and its INS step, which would read the orders whole, is not needed."""
    view = plan.definition
    found = dict(marked)
    for master, log in marked.items():
        if view is None or log.patch_key_values is None or log.insert_key_values is None:
            continue
        left = [k for k in log.insert_key_values if k not in set(log.patch_key_values)]
        patched = patching(view, master)
        link = patched.link if patched is not None else None
        if not left or link is None or len(link.columns) != 1:
            continue
        holder = marked[view.occurrence(link.target).master.name]
        if holder.master_snapshot < 0:  # (no snapshot: not known)
            continue
        points = tuple(("range", link.columns[0].lower(), k[0], k[0]) for k in left if k[0] is not None)
        held = (
            ctx.metadata.scan_size(
                holder.spec.master_relation, holder.master_snapshot, points[0] if len(points) == 1 else ("or", points)
            )
            if points
            else 0
        )
        if held == 0:
            found[master] = dataclasses.replace(log, unreferenced_key_values=tuple(left))
    return found


def previous_snapshot(
    ctx: RefreshContext, spec: LogSpec, position: LogPosition | None, master_snapshot: int | None
) -> int | None:
    """The master snapshot the view reflected before this refresh (MarkedLog.previous_master_snapshot),
    when it reflects exactly that one and a query can read it as the view read it: a log the plugin
    captures (its position is the master snapshot it was captured through; a log written by
    ingestion may lag behind its master), consumed whole (no commit applied on commit, not
    uncaptured), the snapshot still in the master's history and written with the schema of the one
    this refresh reads (the view's query reads the same columns there; schema ids are read through
    the Java API only, so over SQL the master's metadata is not loaded for it). None otherwise."""
    if (
        not ctx.metadata.in_jvm
        or not spec.capture
        or position is None
        or position.commits
        or position.uncaptured
        or position.master_snapshot is None
        or master_snapshot is None
    ):
        return None
    table = ctx.metadata.table(spec.master_relation)
    if table is None:
        return None
    previous, current = table.snapshots.get(position.master_snapshot), table.snapshots.get(master_snapshot)
    if previous is None or current is None or previous.schema_id is None or previous.schema_id != current.schema_id:
        return None
    return position.master_snapshot


def key_types(plan: RefreshPlan, spec: LogSpec) -> tuple[str | None, ...]:
    """The Spark types of the master's key columns (None: not known)."""
    occurrence = (
        next((o for o in plan.definition.occurrences if o.master.name == spec.master_relation), None)
        if plan.definition is not None
        else None
    )
    types = {c.casefold(): normalize_type(t) for c, t in occurrence.master.columns} if occurrence is not None else {}
    return tuple(types.get(k.casefold()) for k in spec.key)


def netted_columns(view: ViewDefinition, spec: LogSpec) -> tuple[str, ...]:
    """The columns ``view`` reads of ``spec``'s master (every occurrence of it), its key among
    them, in name order: what the mark step nets the images by (an update that changes none of
    them changes nothing in the view), when the log carries them all."""
    read: dict[str, str] = {}
    for occurrence in view.occurrences:
        if occurrence.master.name == spec.master_relation:
            for column in sorted(view.referenced_columns[occurrence.alias]):
                read.setdefault(column.casefold(), column)
    for column in spec.key:
        read.setdefault(column.casefold(), column)
    return tuple(sorted(read.values(), key=str.casefold))


def netting_columns(plan: RefreshPlan, spec: LogSpec) -> tuple[str, ...] | None:
    """What the view's marked images of ``spec``'s log are netted by (netted_columns: the
    columns it reads of the master), when the log carries them all; None: each image counts."""
    assert plan.definition is not None
    read = netted_columns(plan.definition, spec)
    logged = {c.casefold() for c in plan.logged_columns.get(spec.log_relation, ())}
    return read if logged and {c.casefold() for c in read} <= logged else None


def key_probe(
    ctx: RefreshContext,
    plan: RefreshPlan,
    spec: LogSpec,
    log_snapshot: int | None,
    consumed: int,
    action: str | None = None,
) -> KeyProbe | None:
    """What a fast refresh reads of the log's marked images besides their counts (logs/sql.py):
    netted by the columns the view reads of the master (when the log carries them all). When the
    log's files written since the view's position hold few rows (session mode: their statistics),
    the images are listed by the counting statement and netted here; otherwise netted in SQL,
    with their keys (when their types allow literals) and the occupied buckets of an integer or
    date first key over the span those files' statistics give."""
    if (action or plan.action) != RefreshAction.FAST or plan.definition is None or log_snapshot is None:
        return None
    if not any(o.master.name == spec.master_relation for o in plan.definition.occurrences):
        return None
    netted = netting_columns(plan, spec)
    relevant = relevant_images(plan, spec)
    types = key_types(plan, spec)
    literal_key = all(t in LITERAL_TYPES for t in types)
    written = ctx.metadata.written_since(spec.log_relation, log_snapshot, spec.key[:1], consumed)
    patch_by = plan_patched_by(plan, spec)
    if written is not None and written.records * (len(spec.key) + len(netted or ())) <= listed_values():
        return KeyProbe(tuple(spec.key), netted, listed=True, relevant=relevant, patch_by=patch_by)
    bounds = written.bounds.get(spec.key[0]) if written is not None else None
    return KeyProbe(
        tuple(spec.key),
        netted,
        literal_key=literal_key and written is not None,
        buckets=_buckets(types[0] if types else None, bounds),
        relevant=relevant,
        patch_by=patch_by,
    )


def plan_patched_by(plan: RefreshPlan, spec: LogSpec) -> tuple[str, ...] | None:
    """What the view's fast refresh compares an update's images of ``spec``'s master by to patch
    it in place (patched_by), or None: none of its updates are patched, nor any of a view that
    reads the clock (its rows before the refresh may hold rows the time has moved out)."""
    if plan.definition is None or plan.now is not None:
        return None
    return patched_by(plan.definition, spec, netting_columns(plan, spec), relevant_images(plan, spec))


def patched_by(
    view: ViewDefinition, spec: LogSpec, netted: tuple[str, ...] | None, relevant: str | None
) -> tuple[str, ...] | None:
    """What the mark step compares an update's images by to tell whether the view patches it in
    place (analysis/patching.py; KeyProbe.patch_by), or None: it patches none of this master's.
    The images must have been tested by the master's filters (``relevant``: the before image
    passing them says the view holds the row's slice) and, to compare join columns outside the
    key, netted by the columns the view reads."""
    patched = patching(view, spec.master_relation)
    if patched is None or (patched.filters and relevant is None) or (patched.join_columns and netted is None):
        return None
    return patched.join_columns


def relevant_images(plan: RefreshPlan, spec: LogSpec) -> str | None:
    """The predicate the images of ``spec``'s log that can change the view meet: its filters of
    the master's rows alone (analysis/relevance.py), read from the log's columns (those the view
    reads: None when the log lacks one, as its images are then not netted either). None for a
    view that reads the clock: its filters give another answer as the time moves, and the rows
    they no longer keep are found by the time (refresh/phases/clock.py), not by their images."""
    if plan.definition is None or plan.now is not None or netting_columns(plan, spec) is None:
        return None
    return relevant_rows(plan.definition, spec.master_relation)


def _buckets(spark_type: str | None, bounds: tuple[Bound, Bound] | None) -> tuple[str, float, float] | None:
    """(kind, lowest value, width) of KEY_BUCKETS buckets over the first key column's ``bounds``."""
    if bounds is None:
        return None
    low, high = bounds
    if spark_type in INTEGER_TYPES and isinstance(low, int) and isinstance(high, int):
        kind, first, last = "integer", low, high
    elif spark_type == "date" and isinstance(low, datetime.date) and isinstance(high, datetime.date):
        kind, first, last = "date", (low - EPOCH).days, (high - EPOCH).days
    else:
        return None
    return kind, float(first), max((last - first + 1) / KEY_BUCKETS, 1.0)


def probed(stats: Mapping[str, Any], probe: KeyProbe | None, types: tuple[str | None, ...]) -> dict[str, Any]:
    """The MarkedLog fields the probe's reads give: the view's net counts and the updates it
    skips, the images to net downstream (when some cancelled out and the keys are not listed),
    the columns they were netted by, the keys as literals, their ranges."""
    if probe is None:
        return {}
    raw = int(stats["inserts"] or 0) + int(stats["deletes"] or 0)
    # the images the view's filters keep (analysis/relevance.py); the others are dropped
    kept = raw if stats.get("relevant_images") is None else int(stats["relevant_images"])
    dropped = {"outside": raw - kept, "relevant": probe.relevant}
    if stats.get("images") is not None:
        return listed(stats["images"], probe, types, kept) | dropped
    if stats.get("net_inserts") is None:
        return {}
    inserts, deletes = int(stats["net_inserts"] or 0), int(stats["net_deletes"] or 0)
    skipped = max(0, kept - inserts - deletes) // 2
    keys, insert_keys, patch_keys = marked_keys(stats.get("marked_keys"), types)
    return dropped | {
        "inserts": inserts,
        "deletes": deletes,
        "skipped": skipped,
        "consolidated": probe.consolidate_by if skipped else None,
        "netted_by": probe.consolidate_by,
        "key_values": keys,
        "insert_key_values": insert_keys,
        "patch_key_values": patch_keys if probe.patch_by is not None else None,
        "key_ranges": key_ranges(stats.get("key_buckets"), probe.buckets),
        "key_range_values": occupied_buckets(stats.get("key_buckets"), probe.buckets),
    }


def listed(text: str, probe: KeyProbe, types: tuple[str | None, ...], raw: int) -> dict[str, Any]:
    """The MarkedLog fields from the listed images (log_sql.log_stats, ``images``): netted per key
    by the values of the columns the view reads (each image counts when they are not known), the
    keys left as literals when at most LITERAL_KEYS and their types allow, the exact ranges of an
    integer or date first key; the images netted downstream too unless the listed keys drop all
    that cancelled out."""
    by_key: dict[tuple, Counter] = defaultdict(Counter)
    raw_images: Counter = Counter()  # key -> its images before netting
    key_fields = [(f"k{i}", t) for i, t in enumerate(types)]
    value_fields = [f"v{i}" for i in range(len(probe.consolidate_by or ()))]
    for image in json.loads(text):
        found_key = image.get("k") or {}
        key = tuple(_value(found_key.get(field), t) for field, t in key_fields)
        if probe.consolidate_by is None:  # not netted: every image counts
            values: tuple = (len(by_key[key]),)
        else:
            found = image.get("v") or {}
            values = tuple(_hashable(found.get(field)) for field in value_fields)
        by_key[key][values] += 1 if image.get("o") == INSERT else -1
        raw_images[key] += 1
    inserts = deletes = 0
    changed: dict[tuple, bool] = {}  # key -> whether it has an after image
    patched: set[tuple] = set()  # keys of the updates the view patches in place (KeyProbe.patch_by)
    agreeing = _positions(probe.consolidate_by or (), probe.patch_by or ())
    transient = False  # a changed key also has images that cancelled out (a row's passing state)
    for key, counts in by_key.items():
        after = sum(n for n in counts.values() if n > 0)
        before = -sum(n for n in counts.values() if n < 0)
        if after or before:
            changed[key] = after > 0
            transient = transient or raw_images[key] > after + before
        if probe.patch_by is not None and after == 1 and before == 1 and agreeing is not None:
            images = [values for values, n in counts.items() if n]
            if len({tuple(values[i] for i in agreeing) for values in images}) == 1:
                patched.add(key)
        inserts, deletes = inserts + after, deletes + before
    skipped = max(0, raw - inserts - deletes) // 2
    literal = all(t in LITERAL_TYPES for t in types) and len(changed) <= literal_keys()
    ordered = sorted(changed, key=_order)
    first = types[0] if types else None
    bounded = first in INTEGER_TYPES or first == "date"
    firsts = [k[0] for k in ordered if k[0] is not None] if bounded else []  # the first key column's values
    return {
        "inserts": inserts,
        "deletes": deletes,
        "skipped": skipped,
        # netted downstream when the listed keys do not drop every image that cancelled out: a
        # row's passing state is never evaluated by the view's expressions (with ANSI on a value
        # no longer in the master could fail a cast the defining query never sees)
        "consolidated": probe.consolidate_by if skipped and (transient or not literal) else None,
        "netted_by": probe.consolidate_by,
        "key_values": tuple(ordered) if literal else None,
        "insert_key_values": tuple(k for k in ordered if changed[k]) if literal else None,
        "patch_key_values": tuple(k for k in ordered if k in patched)
        if literal and probe.patch_by is not None
        else None,
        "key_ranges": exact_ranges(firsts),
        "key_range_values": len(set(firsts)),
    }


def exact_ranges(values: list) -> tuple[tuple[Bound, Bound], ...]:
    """Sorted distinct integer or date ``values`` as at most MAX_RANGES disjoint ranges holding
    them all: split only at the widest gaps between consecutive values."""
    distinct = sorted(set(values))
    if not distinct:
        return ()

    def gap(i: int) -> int:
        low, high = distinct[i - 1], distinct[i]
        return (high - low).days if isinstance(low, datetime.date) else int(high) - int(low)

    cuts = sorted(sorted(range(1, len(distinct)), key=lambda i: (-gap(i), i))[: MAX_RANGES - 1])
    ranges, start = [], 0
    for cut in [*cuts, len(distinct)]:
        ranges.append((distinct[start], distinct[cut - 1]))
        start = cut
    return tuple(ranges)


def _hashable(value: Any) -> Any:
    """A listed image's column value as a dictionary key: its canonical JSON text (as the values
    were compared before: NaN equals NaN, -0.0 is not 0.0) for floats, arrays, maps and structs;
    strings, integers, booleans and NULL as they are (equal exactly when their texts are, within
    one column)."""
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict, float)) else value


def _value(raw: Any, spark_type: str | None) -> Bound | None:
    if raw is None:
        return None
    if spark_type == "date":
        return datetime.date.fromisoformat(str(raw))
    if spark_type in INTEGER_TYPES:
        return int(raw)
    return str(raw)


def _order(key: tuple) -> tuple:
    return tuple((value is None, value if value is not None else 0) for value in key)


def _positions(columns: Sequence[str], wanted: Sequence[str]) -> tuple[int, ...] | None:
    """The positions of ``wanted`` among ``columns`` (case-insensitive), or None when one is missing."""
    folded = [c.casefold() for c in columns]
    found = tuple(folded.index(w.casefold()) for w in wanted if w.casefold() in folded)
    return found if len(found) == len(wanted) else None


def marked_keys(
    text: str | None, types: tuple[str | None, ...]
) -> tuple[KeyValues | None, KeyValues | None, KeyValues | None]:
    """Every marked key, those with an after image and those of an update patched in place
    (``"p"``, KeyProbe.patch_by), sorted (None: more than LITERAL_KEYS, or not read)."""
    if text is None:
        return None, None, None
    rows = json.loads(text)
    if len(rows) > literal_keys():
        return None, None, None
    keyed = sorted(
        (
            (tuple(_value(row.get(f"k{i}"), t) for i, t in enumerate(types)), bool(row.get("i")), bool(row.get("p")))
            for row in rows
        ),
        key=lambda row: _order(row[0]),
    )
    return (
        tuple(k for k, _, _ in keyed),
        tuple(k for k, inserted, _ in keyed if inserted),
        tuple(k for k, _, patched in keyed if patched),
    )


def occupied_buckets(text: str | None, buckets: tuple[str, float, float] | None) -> int:
    """How many buckets of the first key column hold a marked key (each at least one distinct
    value; 0: not counted)."""
    if text is None or buckets is None:
        return 0
    return len({int(b) for b in json.loads(text) if b is not None})


def key_ranges(text: str | None, buckets: tuple[str, float, float] | None) -> tuple[tuple[Bound, Bound], ...]:
    """The occupied buckets of the first key column as at most MAX_RANGES disjoint ranges holding
    every marked key: adjacent buckets merged, then split only at the widest gaps."""
    if text is None or buckets is None:
        return ()
    kind, low, width = buckets
    occupied = sorted({int(b) for b in json.loads(text) if b is not None})
    if not occupied:
        return ()
    spans: list[list[int]] = []
    for bucket in occupied:
        first, last = math.floor(low + bucket * width), math.ceil(low + (bucket + 1) * width)
        if spans and first <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], last)
        else:
            spans.append([first, last])
    gaps = sorted(range(1, len(spans)), key=lambda i: (-(spans[i][0] - spans[i - 1][1]), i))
    cuts = sorted(gaps[: MAX_RANGES - 1])
    ranges, start = [], 0
    for cut in [*cuts, len(spans)]:
        ranges.append((spans[start][0], spans[cut - 1][1]))
        start = cut
    if kind == "date":
        return tuple((EPOCH + datetime.timedelta(days=a), EPOCH + datetime.timedelta(days=b)) for a, b in ranges)
    return tuple(ranges)


def _resume(
    ctx: RefreshContext,
    requests: dict[str, StatsRequest],
    counted: dict[str, dict],
    action: str,
) -> tuple[dict[str, tuple[int, dict]], str | None]:
    """Where a view whose position is uncaptured resumes in each such log, and its counts from
    there (one more count statement, on the first refresh after such a complete refresh only);
    or why a fast refresh cannot resume."""
    if action != RefreshAction.FAST:
        return {}, None
    resumed: dict[str, tuple[int, dict]] = {}
    again: dict[str, StatsRequest] = {}
    for master, request in requests.items():
        if request.resume_at is None:
            continue
        resume = counted[master]["resume_sequence"]
        if resume is None:
            return {}, (
                f"the change log of {request.spec.master_name} was captured past master snapshot {request.resume_at}, "
                "which the view reflects since a complete refresh, in one piece: the changes before and after it "
                "cannot be told apart"
            )
        consumed = max(int(resume), request.consumed)
        again[master] = StatsRequest(
            request.spec, request.log_snapshot, consumed, request.excluded, probe=request.probe
        )
    for (master, request), stats in zip(again.items(), ctx.stats(*again.values())):
        resumed[master] = (request.consumed, stats)
    return resumed, None
