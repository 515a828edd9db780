"""A view's state (what it consumed from each log, see refresh/state/bookkeeping.py), read from its metadata."""

from __future__ import annotations

from dbt_incremental_mv.metadata import Metadata, TableMetadata
from dbt_incremental_mv.refresh.state.bookkeeping import ViewState


def view_state_at(metadata: Metadata, name: str) -> tuple[ViewState | None, int | None]:
    """The view's state and the snapshot of its main branch it was read from (None: no table or
    no snapshot). The state is in the newest snapshot that changed the view's data: compaction
    (``replace`` snapshots) does not, so it is looked through. An incremental refresh applies its
    changes on exactly that snapshot, or not at all."""
    table = metadata.table(name)
    if table is None or table.main is None:
        return None, None
    depth = state_depth(table)
    if depth is None:
        return None, table.main
    return ViewState.decode(table.ancestry()[depth].summary.get("wap.id")), table.main


def state_depth(table: TableMetadata) -> int | None:
    """Where in main's ancestry (0: main) the snapshot holding the view's state is: the newest that
    changed the view's data (compactions' ``replace`` snapshots come after it); None: none does."""
    return next((depth for depth, s in enumerate(table.ancestry()) if s.operation != "replace"), None)


def view_state(metadata: Metadata, name: str) -> ViewState | None:
    return view_state_at(metadata, name)[0]


def consumer_states(metadata: Metadata, name: str) -> list[ViewState]:
    """What a view reading change logs consumed: its state, and for a view maintained in steps
    (refresh/units.py) the states of its internal states too, which read its masters' logs for
    it. Empty when the view has no state."""
    state = view_state(metadata, name)
    if state is None:
        return []
    found = [state]
    for internal in state.states:
        inner = view_state(metadata, internal)
        if inner is not None:
            found.append(inner)
    return found
