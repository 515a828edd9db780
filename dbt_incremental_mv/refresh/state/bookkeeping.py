"""What a view has consumed, recorded in the Iceberg commit that changes the view.

Every write to a view is staged with ``spark.wap.id`` set to an encoded :class:`ViewState`
and then published by fast-forwarding the view's main branch to the staged snapshot (which
fails unless main is still the staged snapshot's parent; see FastRefreshEngine.publish). The
view's data and what it consumed thus change in one atomic commit: a crash between any two
statements of a refresh never loses nor double-applies a change, and of two refreshes of one
view racing each other only one can publish.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

PREFIX = "dbt-incremental-mv:1:"


@dataclass(frozen=True)
class LogPosition:
    """How far a view has consumed one change log."""

    sequence: int  # log rows with _last_updated_sequence_number <= sequence are consumed
    master_snapshot: int | None  # the master snapshot the view reflects
    commits: tuple[int, ...] = ()  # also consumed: these commits' rows (on-commit refreshes)
    log_snapshot: int | None = None  # the log snapshot read through ``sequence`` (staleness checks)
    # a complete refresh that did not capture (force chose it by cost): the view reflects
    # ``master_snapshot``, which the log is not captured through yet; the rows a later capture
    # appends up to its watermark at that snapshot are consumed too (see refresh/phases/capture.py: a
    # capture stops at such a snapshot, so that its changes are told apart from later ones)
    uncaptured: bool = False


@dataclass(frozen=True)
class ViewState:
    logs: dict[str, LogPosition] = field(default_factory=dict)  # by log relation
    method: str = "complete"  # how the commit was made: build, complete or fast
    base: int | None = None  # the view snapshot the commit was made on
    # this refresh run, so that two refreshes racing from the same state stage distinct wap.ids
    # (each finds and publishes its own staged snapshot, never the other's)
    run: str | None = None
    # the time the view's rows reflect, for a view that reads the clock (analysis/clock.py)
    clock: str | None = None
    # a view maintained in steps (refresh/units.py): the relations of its internal states, which
    # consume its masters' logs for it (what every reader of a log consumed counts their positions)
    states: tuple[str, ...] = ()
    # a join view that could keep an indexed join state (refresh/indexed_choice.py): what its last
    # fast refreshes changed, oldest first, a letter each (indexed_choice.Changed)
    changes: str = ""

    def encode(self) -> str:
        payload = {
            "base": self.base,
            "method": self.method,
            **({"run": self.run} if self.run is not None else {}),
            **({"clock": self.clock} if self.clock is not None else {}),
            **({"states": list(self.states)} if self.states else {}),
            **({"changes": self.changes} if self.changes else {}),
            "logs": {
                name: [pos.sequence, pos.master_snapshot, sorted(pos.commits)]
                + ([pos.log_snapshot] if pos.log_snapshot is not None or pos.uncaptured else [])
                + ([1] if pos.uncaptured else [])
                for name, pos in sorted(self.logs.items())
            },
        }
        raw = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
        return PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, wap_id: str | None) -> ViewState | None:
        """The state in a snapshot's ``wap.id``; None when it holds none (not made by us)."""
        if not wap_id or not wap_id.startswith(PREFIX):
            return None
        encoded = wap_id[len(PREFIX) :]
        try:
            payload = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
            logs = {
                name: LogPosition(
                    sequence=int(entry[0]),
                    master_snapshot=None if entry[1] is None else int(entry[1]),
                    commits=tuple(int(c) for c in (entry[2] if len(entry) > 2 else ())),
                    log_snapshot=int(entry[3]) if len(entry) > 3 and entry[3] is not None else None,
                    uncaptured=len(entry) > 4 and bool(entry[4]),
                )
                for name, entry in payload["logs"].items()
            }
            base = payload.get("base")
            run = payload.get("run")
            clock = payload.get("clock")
            states = tuple(str(s) for s in payload.get("states") or ())
            changes = str(payload.get("changes") or "")
            return cls(
                logs=logs,
                method=str(payload["method"]),
                base=None if base is None else int(base),
                run=None if run is None else str(run),
                clock=None if clock is None else str(clock),
                states=states,
                changes=changes,
            )
        except (ValueError, KeyError, TypeError):
            return None
