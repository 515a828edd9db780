"""Which kind of refresh a ``fast_refresh`` model gets on this run, and why: one function,
``decide_refresh``, from the facts the phases report (``PlanFacts``: what planning read;
``RunFacts``: what the run learned before writing anything). Nothing else turns a refresh into
another kind."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from dbt_incremental_mv.config import FastRefreshConfig, RefreshMethod

if TYPE_CHECKING:
    from dbt_incremental_mv.refresh.cost import Choice
    from dbt_incremental_mv.refresh.phases.clock import Crossing


class RefreshAction(StrEnum):
    """What a run does to the view: build it (first run, --full-refresh, a changed definition),
    recompute it (complete), or apply the changes (fast). Its value is what the log line, the
    refresh history and the materialization read."""

    BUILD = "build"
    COMPLETE = "complete"
    FAST = "fast"
    # a query refused as one view, maintained as its internal states then the query over them
    # (refresh/units.py): each of them is refreshed as a model, with a decision of its own
    IN_STEPS = "in steps"


class FastRefreshUnavailable(RuntimeError):
    """refresh_method='fast' was asked for, but the view cannot be fast refreshed."""


class DefinitionChanged(RuntimeError):
    """The view's definition changed and on_configuration_change='fail'."""


@dataclass(frozen=True)
class RefreshDecision:
    action: RefreshAction
    reason: str
    # why the view cannot be fast refreshed, when that is why it is recomputed (not because it was
    # asked for, or cheaper): the user is warned, so that `dbt run --warn-error` fails on it
    blocker: str | None = None


class CarriesDecision:
    """A plan or a run: the action and the reason of the refresh decision it carries."""

    decision: RefreshDecision

    @property
    def action(self) -> RefreshAction:
        return self.decision.action

    @property
    def reason(self) -> str:
        return self.decision.reason


def _sentence(text: str) -> str:
    """``text`` ending in exactly one full stop: blockers often are sentences already (an analysis
    refusal ends with its hint), and another sentence is appended after them."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else f"{text}."


@dataclass(frozen=True)
class PlanFacts:
    """What planning found (reads only). Each ``str`` says why a fast refresh cannot go on (None:
    nothing stops it); ``out_of_step`` is read only when the other facts allow a fast refresh."""

    existing_type: str | None  # the relation in the warehouse (None: there is none)
    full_refresh: bool = False  # dbt run --full-refresh
    blocker: str | None = None  # the view, its config or its logs cannot be fast refreshed
    definition_change: str | None = None  # the stored view no longer matches the model
    lost_changes: str | None = None  # a log is recreated: the changes it holds are lost
    lacking_columns: str | None = None  # the view lacks hidden columns this version keeps
    out_of_step: str | None = None  # the view's record of its logs does not match them
    clock_moved: str | None = None  # the view reads the clock where a move of it changes more than filters
    crossings_applied: bool = False  # its view class applies rows the time moved across as changes (join)
    in_steps: str | None = None  # refused as one view, it splits into states (analysis/states.py): which
    # the model's query is the same, but the view was written by another shape of refresh (plan.reshaping)
    reshaped: str | None = None


@dataclass(frozen=True)
class RunFacts:
    """What a run learned before it wrote anything (refresh_method='force': the cost model's
    choices, before the capture and after the mark step)."""

    before_capture: Choice | None = None  # a complete one skips the capture
    log_reset: str | None = None  # a log was reset while marking: its changes are lost
    clock_crossed: Crossing | None = None  # rows crossed the view's time boundary since its last refresh
    after_mark: Choice | None = None

    @property
    def cost_choice(self) -> Choice | None:
        """The cost model's last choice (the history keeps why), if it made one."""
        return self.after_mark or self.before_capture


def decide_refresh(
    model_name: str, config: FastRefreshConfig, facts: PlanFacts, run: RunFacts | None = None
) -> RefreshDecision:
    """Build the view (first run, --full-refresh, a changed definition), recompute it
    (complete) or apply the changes (fast), from what planning found and, once the run has
    marked its changes, what the run found (``run``; None: the planned decision).

    Raises FastRefreshUnavailable when refresh_method='fast' cannot be honoured, and
    DefinitionChanged for a changed definition under on_configuration_change='fail'."""
    if config.refresh_method is RefreshMethod.FAST and facts.blocker is not None:
        # as Oracle refuses CREATE MATERIALIZED VIEW ... REFRESH FAST for such a view: fail before
        # anything is built, not at the first refresh
        raise _unavailable(model_name, facts.blocker)
    if facts.in_steps is not None:
        return RefreshDecision(RefreshAction.IN_STEPS, facts.in_steps)
    if facts.existing_type is None:
        return RefreshDecision(RefreshAction.BUILD, "first run: building the view in full")
    if facts.full_refresh:
        return RefreshDecision(RefreshAction.BUILD, "--full-refresh: rebuilding the view in full")
    if facts.existing_type != "table":
        return RefreshDecision(
            RefreshAction.BUILD, f"the existing relation is a {facts.existing_type}: replacing it with the view"
        )
    if facts.definition_change is not None:
        if config.on_configuration_change == "fail":
            raise DefinitionChanged(
                f"Model '{model_name}': {facts.definition_change}, and on_configuration_change='fail'. Run with "
                "--full-refresh to rebuild the view, or set on_configuration_change='apply' to rebuild it "
                "automatically."
            )
        return RefreshDecision(RefreshAction.BUILD, f"{facts.definition_change}: rebuilding the view in full")
    if facts.reshaped is not None:
        return RefreshDecision(RefreshAction.BUILD, facts.reshaped)
    if config.refresh_method is RefreshMethod.COMPLETE:
        return RefreshDecision(RefreshAction.COMPLETE, "refresh_method='complete'")
    run = run or RunFacts()
    planned_stop = (
        facts.blocker or facts.lost_changes or facts.lacking_columns or facts.out_of_step or facts.clock_moved
    )
    if planned_stop is None and run.before_capture is not None and run.before_capture.method == RefreshAction.COMPLETE:
        return RefreshDecision(RefreshAction.COMPLETE, run.before_capture.why)
    stop = planned_stop or run.log_reset
    if stop is not None:
        if config.refresh_method is RefreshMethod.FAST:
            raise _unavailable(model_name, stop)
        return RefreshDecision(RefreshAction.COMPLETE, f"fast refresh impossible: {stop}", blocker=stop)
    if run.clock_crossed is not None and not facts.crossings_applied:  # expected of such a view: no warning
        if config.refresh_method is RefreshMethod.FAST:
            raise _unavailable(model_name, run.clock_crossed.reason)
        return RefreshDecision(RefreshAction.COMPLETE, f"{run.clock_crossed.reason}: recomputed")
    if run.after_mark is not None and run.after_mark.method == RefreshAction.COMPLETE:
        return RefreshDecision(RefreshAction.COMPLETE, run.after_mark.why)
    return RefreshDecision(RefreshAction.FAST, "fast refresh")


def _unavailable(model_name: str, blocker: str) -> FastRefreshUnavailable:
    return FastRefreshUnavailable(
        f"Model '{model_name}' cannot be fast refreshed: {_sentence(blocker)} "
        "Set refresh_method='force' to fall back to a complete refresh, or 'complete' to always "
        "recompute the view."
    )
