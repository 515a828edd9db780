"""One run of a refresh plan: what the phases learn while they run.

The plan (plan.py) is what was decided before anything changed, and is not edited. The run
record holds the rest: the refresh's I/O, the decision when the run changed it (a log reset while
marking, or refresh_method='force' choosing a recompute by cost), and what later phases and the
history read of earlier ones (the write branch, the rows the view's own log gets, the published
commit's counts, timings, what the statements read)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dbt_incremental_mv.refresh.context import RefreshContext
from dbt_incremental_mv.refresh.phases.decide import CarriesDecision, RefreshAction, RefreshDecision
from dbt_incremental_mv.refresh.phases.plan import RefreshPlan


@dataclass
class RefreshRun(CarriesDecision):
    plan: RefreshPlan
    context: RefreshContext | None = field(default=None, repr=False, compare=False)  # the refresh's I/O
    changed_decision: RefreshDecision | None = None  # what the run turned the plan's decision into (None: kept)
    cost_choice: str | None = None  # refresh_method='force': the estimate that chose (history.py)
    write_branch: str | None = None  # the branch a refresh of several writes stages them on (publish drops it)
    changed_rows: Any = None  # own_log.ChangedRows: which rows this fast refresh changes (for the own log)
    pending_log: Any = None  # own_log.PendingLog: its rows for this refresh, published after the view's
    own_log_note: str | None = None  # what was done with the own log, for the log line
    published_summary: dict[str, str] | None = None  # row counts of the commit publish() put on main
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase so far (history.py)
    phase_ended: float | None = None  # perf_counter when its last timed phase ended (the writes run between)
    reads: Any = None  # reads.Reads: what the refresh's statements read (session mode), once it finished

    def record_choice(self, method: str, why: str) -> None:
        """refresh_method='force' chose ``method`` (fast or complete) because ``why``: kept for the
        history; a complete refresh is then what this run carries out."""
        self.cost_choice = why
        if method == RefreshAction.COMPLETE:
            self.changed_decision = RefreshDecision(RefreshAction.COMPLETE, why)

    @property
    def decision(self) -> RefreshDecision:  # type: ignore[override]  # read-only: derived from the plan's
        """The decision this run carries out: the plan's, unless the run changed it."""
        return self.changed_decision if self.changed_decision is not None else self.plan.decision
