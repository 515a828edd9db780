"""Every statement (and session setting) of whole refreshes (capture, mark, propagate, publish, purge; a build, fast
refreshes after changes of either master, an idle run, a complete refresh) of each view class in
the unit tests' warehouse, compared with the committed text in ``golden/refresh_trace.txt``: a
restructuring of the pipeline must leave the SQL it runs unchanged (issue 64). The random parts
(a refresh's run id, temporary view and branch names) are replaced by placeholders. After a
change meant to alter the SQL, rewrite the file with ``DBT_MV_UPDATE_GOLDEN=1 pytest
tests/unit/refresh/test_refresh_trace_golden.py`` and review its diff."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

from tests.unit.warehouse import VIEWS, Warehouse

GOLDEN = Path(__file__).parent / "views" / "golden" / "refresh_trace.txt"
WAP_ID = re.compile(r"dbt-incremental-mv:(\d+):([A-Za-z0-9+/=_-]+)")
TOKENS = [
    (re.compile(r"(mv_write_)\d{13}_[0-9a-f]{8}"), r"\1<ms>_<token>"),
    (re.compile(r"(_)[0-9a-f]{16}\b"), r"\1<token>"),
    (re.compile(r"(mv_capture_)[0-9a-f]+"), r"\1<token>"),
]


def _state(match: re.Match) -> str:
    """A staged commit's record, decoded, its run id replaced."""
    state = json.loads(base64.urlsafe_b64decode(match.group(2) + "=" * (-len(match.group(2)) % 4)))
    state["run"] = "<run>"
    return f"dbt-incremental-mv:{match.group(1)}:{json.dumps(state, sort_keys=True)}"


def normalized(text: str) -> str:
    text = WAP_ID.sub(_state, text)
    for pattern, replacement in TOKENS:
        text = pattern.sub(replacement, text)
    return text


def trace() -> str:
    parts = []
    for view in VIEWS:
        warehouse = Warehouse(view)
        stages = [("build", None), ("orders changed", "orders"), ("customers changed", "customers"),
                  ("nothing changed", None), ("complete", "orders")]
        for title, master in stages:
            if master is not None:
                warehouse.change(master)
            if title == "complete":
                warehouse.model["config"]["refresh_method"] = "complete"
            warehouse.fake.trace.clear()
            line = warehouse.refresh()
            parts.append(f"=== {view}: {title}\n-- {line}\n" + "\n;\n".join(warehouse.fake.trace))
    return normalized("\n\n".join(parts)) + "\n"


def test_the_statements_of_whole_refreshes_are_unchanged():
    text = trace()
    if os.environ.get("DBT_MV_UPDATE_GOLDEN"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8"), "the refresh trace changed (see the module's docstring)"


def test_the_trace_is_deterministic_once_normalized():
    assert trace() == trace()
