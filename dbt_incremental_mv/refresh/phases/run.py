"""One run of a refresh plan: what the phases learn while they run.

The plan (plan.py) is what was planned before anything changed, and is not edited. The run
record holds the rest: the decision taken once the changes are marked (from the
plan's facts and the run's: decide.py), and what later phases and the history read of earlier ones
(the write branch, the rows the view's own log gets, the published commit's counts, timings, what
the statements read)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dbt_incremental_mv.refresh.phases.decide import CarriesDecision, RefreshDecision, RunFacts, decide_refresh
from dbt_incremental_mv.refresh.phases.execute import PhaseClock
from dbt_incremental_mv.refresh.phases.plan import RefreshPlan


@dataclass
class RefreshRun(CarriesDecision):
    plan: RefreshPlan
    facts: RunFacts | None = None  # what the run learned before writing (None: not decided yet)
    decided: RefreshDecision | None = None  # the decision taken from the plan's facts and those
    write_branch: str | None = None  # the write branch the executor made for the steps (publish drops it)
    changed_rows: Any = None  # own_log.ChangedRows: which rows this fast refresh changes (for the own log)
    pending_log: Any = None  # own_log.PendingLog: its rows for this refresh, published after the view's
    own_log_note: str | None = None  # what was done with the own log, for the log line
    # the groups an aggregate's INSERT found flagged for a recompute (0: it ran without one);
    # None: it has no recompute, or did not run
    recomputed_groups: int | None = None
    fallback: str | None = None  # the fallback that ran in place of a write that stopped, in words (statement.Fallback)
    published_summary: dict[str, str] | None = None  # row counts of the commit publish() put on main
    compaction_failure: str | None = None  # why the compaction after the publish failed (compact.py: a warning)
    expiry_failure: str | None = None  # why expiring old snapshots after the publish failed (expire.py: a warning)
    clock: PhaseClock = field(default_factory=PhaseClock)  # seconds per phase so far (history.py)
    reads: Any = None  # reads.Reads: what the refresh's statements read (session mode), once it finished

    def decide(self, facts: RunFacts) -> RefreshDecision:
        """The decision this run carries out, taken once from the plan's facts and ``facts``."""
        assert self.decided is None, "a run is decided once"
        self.facts = facts
        self.decided = decide_refresh(self.plan.model_name, self.plan.config, self.plan.facts, facts)
        return self.decided

    @property
    def decision(self) -> RefreshDecision:  # type: ignore[override]  # read-only: the run's, else the plan's
        """The decision this run carries out (before it is taken: the plan's)."""
        return self.decided if self.decided is not None else self.plan.decision

    @property
    def timings(self) -> dict[str, float]:
        return self.clock.seconds

    @property
    def cost_choice(self) -> str | None:
        """refresh_method='force': why the cost model chose as it did (the history keeps it)."""
        choice = self.facts.cost_choice if self.facts is not None else None
        return choice.why if choice is not None else None
