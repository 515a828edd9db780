"""The one error view analysis raises, and how it names SQL constructs for people."""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.errors import ErrorLevel

_CONSTRUCT_MAX_CHARS = 120
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class UnsupportedViewError(ValueError):
    """The model's SQL cannot be fast refreshed (or cannot be analysed at all).

    ``construct`` names the offending piece of SQL (as SQL text or a short name such as
    ``"FULL OUTER JOIN"``), ``reason`` says why it blocks an incremental refresh and ``hint``
    what the user can change. ``str(err)`` reads
    ``cannot fast refresh: <construct>: <reason>. <hint>``, which is what the materialization
    shows when it falls back to a complete refresh.
    """

    def __init__(self, construct: str, reason: str, hint: str = "") -> None:
        self.construct = construct
        self.reason = reason.rstrip(". ")
        self.hint = hint.strip()
        super().__init__(self._message())

    def _message(self) -> str:
        message = f"cannot fast refresh: {self.construct}: {self.reason}."
        if self.hint:
            hint = self.hint if self.hint.endswith((".", "!", "?", ")")) else f"{self.hint}."
            message = f"{message} {hint}"
        return message

    def __str__(self) -> str:
        return self._message()

    def __reduce__(self) -> tuple[type[UnsupportedViewError], tuple[str, str, str]]:
        # ValueError pickles its args (the message); rebuild from the three fields instead.
        return (type(self), (self.construct, self.reason, self.hint))


def describe(node: exp.Expr) -> str:
    """Readable SQL for a node in an error message: Spark dialect, function names as written,
    no comments, shortened when long (the construct only has to be recognisable)."""
    node = node.copy()
    for identifier in node.find_all(exp.Identifier):
        if _PLAIN_NAME.match(identifier.name):
            identifier.set("quoted", False)  # resolved names are quoted; people read them bare
    text = node.sql(dialect="spark", normalize_functions=False, comments=False, unsupported_level=ErrorLevel.IGNORE)
    text = " ".join(text.split())
    if len(text) > _CONSTRUCT_MAX_CHARS:
        text = text[: _CONSTRUCT_MAX_CHARS - 3].rstrip() + "..."
    return text
