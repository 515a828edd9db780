"""Which kind of refresh a ``fast_refresh`` model gets on this run, and why."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from dbt_incremental_mv.config import FastRefreshConfig


class RefreshAction(StrEnum):
    """What a run does to the view: build it (first run, --full-refresh, a changed definition),
    recompute it (complete), or apply the changes (fast). Its value is what the log line, the
    refresh history and the materialization read."""

    BUILD = "build"
    COMPLETE = "complete"
    FAST = "fast"


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
    def action(self) -> str:
        return self.decision.action

    @property
    def reason(self) -> str:
        return self.decision.reason


def _sentence(text: str) -> str:
    """``text`` ending in exactly one full stop: blockers often are sentences already (an analysis
    refusal ends with its hint), and another sentence is appended after them."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else f"{text}."


def decide_refresh(
    model_name: str,
    config: FastRefreshConfig,
    *,
    existing_type: str | None,
    full_refresh: bool,
    fast_refresh_blocker: str | None,
    definition_change: str | None = None,
) -> RefreshDecision:
    """Decide between building the view, recomputing it (complete) and a fast refresh.

    ``existing_type`` is the type of the relation already in the warehouse (None when there
    is none); ``fast_refresh_blocker`` says why a fast refresh is impossible (None when it is
    possible); ``definition_change`` why the stored view no longer matches the model (None
    when it does): the view is rebuilt, or the run fails with ``on_configuration_change='fail'``.
    """
    if config.refresh_method == "fast" and fast_refresh_blocker is not None:
        # as Oracle refuses CREATE MATERIALIZED VIEW ... REFRESH FAST for such a view: fail before
        # anything is built, not at the first refresh
        raise FastRefreshUnavailable(
            f"Model '{model_name}' cannot be fast refreshed: {_sentence(fast_refresh_blocker)} "
            "Set refresh_method='force' to fall back to a complete refresh, or 'complete' to always "
            "recompute the view."
        )
    if existing_type is None:
        return RefreshDecision(RefreshAction.BUILD, "first run: building the view in full")
    if full_refresh:
        return RefreshDecision(RefreshAction.BUILD, "--full-refresh: rebuilding the view in full")
    if existing_type != "table":
        return RefreshDecision(
            RefreshAction.BUILD, f"the existing relation is a {existing_type}: replacing it with the view"
        )
    if definition_change is not None:
        if config.on_configuration_change == "fail":
            raise DefinitionChanged(
                f"Model '{model_name}': {definition_change}, and on_configuration_change='fail'. Run with "
                "--full-refresh to rebuild the view, or set on_configuration_change='apply' to rebuild it "
                "automatically."
            )
        return RefreshDecision(RefreshAction.BUILD, f"{definition_change}: rebuilding the view in full")
    if config.refresh_method == "complete":
        return RefreshDecision(RefreshAction.COMPLETE, "refresh_method='complete'")
    if fast_refresh_blocker is None:
        return RefreshDecision(RefreshAction.FAST, "fast refresh")
    return RefreshDecision(
        RefreshAction.COMPLETE, f"fast refresh impossible: {fast_refresh_blocker}", blocker=fast_refresh_blocker
    )
