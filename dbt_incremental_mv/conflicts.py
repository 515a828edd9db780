"""Concurrent commits that Iceberg refused, told apart from other errors.

Iceberg commits optimistically: of two writers committing to one table at once, the one that
commits second is refused (a commit based on metadata that is no longer current, or a row-level
write whose validation finds files another commit added meanwhile), and nothing of its statement
is applied. With two refreshes of one view, or a refresh and a capture of another process on the
same log, that is the expected outcome for one of them. This module turns Iceberg's refusal into
one line that says so, and lets the engine recognise it (a capture decides again; a publish
reports the other refresh).
"""

from __future__ import annotations

# What Iceberg's refusals of a concurrent commit say (its exception class, or the validation message).
ICEBERG_REFUSALS = (
    "org.apache.iceberg.exceptions.CommitFailedException",
    "Found conflicting files",
    "Found new conflicting delete files",
    "Cannot commit, found new",
)
LOST_RACE = "committed while this one ran"  # in every message of a commit that lost a race


def concurrent_commit_error(text: str) -> str | None:
    """The message for an error whose ``text`` is Iceberg refusing a concurrent commit; None otherwise."""
    for marker in ICEBERG_REFUSALS:
        at = text.find(marker)
        if at >= 0:
            detail = text[at:].strip().splitlines()[0][:300]
            return (
                f"another commit to the same table {LOST_RACE}, so Iceberg refused this statement and applied "
                "nothing of it (of several refreshes or writers committing at once, one wins and the others "
                f"fail like this); rerun to pick up anything newer. Iceberg: {detail}"
            )
    return None


def lost_race(exc: BaseException) -> bool:
    """Whether ``exc`` says a commit lost to a concurrent one (as reported by the connection
    manager, or a fast-forward whose target is no longer an ancestor of the branch)."""
    if getattr(exc, "lost_race", False):
        return True
    text = str(exc)
    return LOST_RACE in text or "ancestor" in text.lower() or concurrent_commit_error(text) is not None


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of ``exc``'s message (its class name when it has none), at most ``limit``
    characters: for a warning about a maintenance step that failed after the refresh published."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:limit]
