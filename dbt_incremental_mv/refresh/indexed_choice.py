"""Whether a join view keeps an indexed join state (analysis/indexed.py), under ``indexed_state='auto'``.

The state pays where the view's dimension changes: without it a refresh reads the facts whole to
find the changed dimension keys' rows; with it, one file of the state. It costs where the facts
change: the state's own refresh runs first (its statements, its DELETE reading the key columns of
every state file, its log), and switching either way rebuilds (the state's sorted write; the view).
Which of the two a view sees is in its own record: each fast refresh's commit keeps what the last
refreshes changed (``ViewState.changes``, a letter per refresh: the dimension, the facts, or
both; a dimension whose updates were all patched in place from the view, analysis/patching.py, or
deleted, read no fact and counts as unchanged), and the choice prices that record with the cost
model's prices (cost.Calibration):

- a refresh that changed the dimension saves, with the state, the facts' read
  (``seconds_per_gb_read`` per GB of the facts' data files: read and joined);
- a refresh that changed the facts costs, with the state, the state's refresh: ``STATE_STATEMENTS``
  statements, its DELETE scanning the state's files, the facts' changes joined to the other facts
  and shuffled into the state's order (per GB of the facts, the state taken as large:
  ``seconds_per_gb_scanned`` + ``seconds_per_gb_read`` + ``seconds_per_gb_shuffled``; at TPC-H
  scale factor 10 this prices the state's refresh at 27.8 s, measured 28.8 s);
- every refresh costs, with the state, the state's unit (``fast_fixed_seconds``: planned, found idle);
- a switch costs its rebuild: on, the state's sorted write and the view's (``seconds_per_gb_rebuilt``
  per GB of the facts and of the view); off, the facts read and the view written.

The net saving per refresh of the record, over the next ``HORIZON`` refreshes, must pay for the
switch; the record must hold ``MIN_RECORDED`` refreshes first. That is the hysteresis: a view
does not switch back and forth on a record that is about even. Pure Python: the plan phase
reads the facts (the sizes, the record) and calls ``choose`` once.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import StrEnum

from dbt_incremental_mv.config import IndexedState
from dbt_incremental_mv.refresh.cost import GB, Calibration

# the refreshes a view's record keeps (the newest), and those it needs before ``auto`` switches
WINDOW = 16
MIN_RECORDED = 6
# the refreshes a switch must pay for itself within (a day of refreshes every 15 minutes; at TPC-H
# scale factor 10, customers changing alone: ~9.2 s saved per refresh against a ~220 s switch)
HORIZON = 100
# the statements of the state's own refresh a fact change adds (mark, delete, insert, publish)
STATE_STATEMENTS = 4


class Changed(StrEnum):
    """What one fast refresh of a view that could keep an indexed state changed (a letter each)."""

    DIMENSION = "d"  # only the dimension
    FACTS = "f"  # only the other tables (or, kept, the state)
    BOTH = "b"


def recorded(previous: str, changed_logs: Iterable[str], dimension_logs: Collection[str]) -> str:
    """The record after a fast refresh that marked changes in ``changed_logs`` (unchanged when it
    marked none, or when the view has no dimension to record: ``dimension_logs`` empty): ``previous``
    with this refresh's letter, the newest WINDOW kept."""
    changed = set(changed_logs)
    if not changed or not dimension_logs:
        return previous[-WINDOW:]
    dimension = bool(changed & set(dimension_logs))
    facts = bool(changed - set(dimension_logs))
    letter = Changed.BOTH if dimension and facts else Changed.DIMENSION if dimension else Changed.FACTS
    return (previous + letter.value)[-WINDOW:]


@dataclass(frozen=True)
class IndexedChoice:
    """The choice, and why, in words (explain_fast_refresh prints it)."""

    keep: bool
    reason: str


def _count(record: str, *letters: Changed) -> int:
    return sum(record.count(letter.value) for letter in letters)


def choose(
    setting: IndexedState,
    kept: bool,
    record: str,
    dimension: str,
    fact_bytes: int | None,
    view_bytes: int | None,
    prices: Calibration,
) -> IndexedChoice:
    """Keep the indexed state or not: ``setting`` (the config), ``kept`` (the view's last commit
    reads one), ``record`` (ViewState.changes), ``dimension`` (its table, for the words), the
    bytes of the facts' and of the view's data files (None: not known)."""
    if setting is IndexedState.ON:
        return IndexedChoice(True, "indexed_state=true")
    if setting is IndexedState.OFF:
        return IndexedChoice(False, "indexed_state=false")
    held = "kept" if kept else "not kept"
    if fact_bytes is None:
        return IndexedChoice(kept, f"indexed_state=auto: the state is {held} (the facts' size is not known)")
    record = record[-WINDOW:]
    if len(record) < MIN_RECORDED:
        return IndexedChoice(
            kept,
            f"indexed_state=auto: the state is {held} until {MIN_RECORDED} fast refreshes are recorded "
            f"({len(record)} so far)",
        )
    fact_gb, view_gb = fact_bytes / GB, (view_bytes or 0) / GB
    rebuilt = prices.rebuilt_per_gb
    dimension_refreshes = _count(record, Changed.DIMENSION, Changed.BOTH)
    fact_refreshes = _count(record, Changed.FACTS, Changed.BOTH)
    saved = fact_gb * prices.seconds_per_gb_read
    paid = STATE_STATEMENTS * prices.seconds_per_statement + fact_gb * (
        prices.seconds_per_gb_scanned + prices.seconds_per_gb_read + prices.seconds_per_gb_shuffled
    )
    # ... less the state's own unit, planned and found idle or not at every refresh
    per_refresh = (dimension_refreshes * saved - fact_refreshes * paid) / len(record) - prices.fast_fixed_seconds
    switch = (fact_gb + view_gb) * rebuilt if not kept else fact_gb * prices.seconds_per_gb_read + view_gb * rebuilt
    keep = per_refresh * HORIZON > switch if not kept else -per_refresh * HORIZON <= switch
    why = (
        f"of the last {len(record)} fast refreshes {dimension_refreshes} changed {dimension} (without the state "
        f"each reads the facts, {fact_gb:.2f} GB: ~{saved:.1f} s) and {fact_refreshes} the facts (with it "
        f"each refreshes the state first: ~{paid:.1f} s), ~{abs(per_refresh):.1f} s per refresh "
        f"{'saved' if per_refresh >= 0 else 'lost'} by the state; a switch rebuilds, ~{switch:.0f} s"
    )
    verdict = {
        (False, False): "not kept",
        (False, True): "built now",
        (True, True): "kept",
        (True, False): "dropped now",
    }[(kept, keep)]
    return IndexedChoice(keep, f"indexed_state=auto: the state is {verdict}: {why}")
