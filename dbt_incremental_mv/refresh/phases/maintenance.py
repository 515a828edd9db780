"""The maintenance steps a refresh runs after it has published (compact.py, expire.py): what they
report, and how one that fails leaves the refresh's result standing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dbt_incremental_mv.conflicts import first_line, lost_race
from dbt_incremental_mv.refresh.context import RefreshContext


@dataclass(frozen=True)
class Maintained:
    """What a maintenance step did, for the log line (``line``), and why it failed (``failure``: the
    refresh warns; None when it ran, or lost to a concurrent commit)."""

    line: str
    failure: str | None = None


def run_after_publish(
    ctx: RefreshContext, statements: Sequence[str], skipped: str, failed: str, warning: Callable[[str], str]
) -> Maintained | None:
    """Run ``statements``; None when they ran. A statement that loses to a concurrent commit (another
    refresh of the view) reports ``skipped``, left to the next refresh; any other failure reports
    ``failed`` and the warning ``warning(its first line)``: the view stays as the refresh published it,
    and the model does not fail."""
    try:
        for statement in statements:
            ctx.execute(statement)
    except Exception as exc:
        if lost_race(exc):
            return Maintained(skipped)
        return Maintained(failed, warning(first_line(exc)))
    return None
