"""Running dbt for the benchmarks, and reading back what each model did.

Shared by ``bench.py`` and ``join_refresh.py``:

- ``write_project``: a dbt project (``dbt_project.yml``, ``profiles.yml`` for the embedded Spark
  session, a ``sources.yml`` and one ``.sql`` file per model);
- ``run_dbt``: one dbt command, through ``dbt_timed.py`` (which times the plugin's phases and
  every SQL statement), with its JSON debug log (``--log-format-file json --log-level-file
  debug``) and ``run_results.json`` in per-step folders; timed as a whole too (wall clock: JVM
  start, dbt parsing and Spark shutdown included);
- ``model_runs``: per model, dbt's ``execution_time``, the plugin's log line(s), every SQL
  statement (its SQL, seconds and phase) and the seconds per phase: plan, capture, mark, write,
  publish, purge, other (``timed_breakdown``). Without timed calls (a plugin whose entry points
  moved) the phases come from the JSON log's statements instead (``statement_breakdown`` and
  ``classify``, which recognise the phases by the SQL).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections import OrderedDict
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIMED_LOG = "timed_calls.jsonl"  # written by dbt_timed.py

# Statement labels, and the phase each is summed into.
PHASES = ("plan", "capture", "mark", "write", "publish", "purge", "other")
PHASE_OF_LABEL = {
    "plan": "plan", "capture": "capture", "mark": "mark", "write": "write", "record": "write",
    "stage": "publish", "unstage": "publish", "publish": "publish", "purge": "purge", "report": "other",
    "dbt": "other",
}


class DbtFailure(RuntimeError):
    """A dbt command exited with an error."""


# ---------------------------------------------------------------------- projects
def write_project(
    root: Path,
    name: str,
    *,
    warehouse: Path,
    schema: str,
    sources_yml: str,
    models: dict[str, str],
    driver_memory: str = "2g",
    threads: int = 1,
    on_run_start: str | None = None,
) -> Path:
    """Write a dbt project ``root/name`` for the embedded session; returns its directory."""
    project = root / name
    (project / "models").mkdir(parents=True, exist_ok=True)
    hooks = f'on-run-start: ["{on_run_start}"]\n' if on_run_start else ""
    (project / "dbt_project.yml").write_text(
        f'name: bench_{name}\nversion: "1.0"\nconfig-version: 2\nprofile: bench\nmodel-paths: ["models"]\n{hooks}'
    )
    (project / "profiles.yml").write_text(textwrap.dedent(f"""\
        bench:
          target: dev
          outputs:
            dev:
              type: spark_mv
              method: session
              schema: {schema}
              warehouse: {warehouse}
              threads: {threads}
              server_side_parameters:
                spark.driver.memory: {driver_memory}
        """))
    (project / "models" / "sources.yml").write_text(sources_yml)
    for model_name, sql in models.items():
        (project / "models" / f"{model_name}.sql").write_text(sql)
    return project


# ---------------------------------------------------------------------- running dbt
def run_dbt(project: Path, step: str, *args: str, command: str = "run") -> dict:
    """Run ``dbt <command> <args>`` in ``project`` (through ``dbt_timed.py``, which times the
    plugin's phases and statements); logs and target go to per-step folders.

    Returns the wall time and, per model (``models``), what ``model_runs`` reads from the
    run's artifacts; the command's output is kept in ``logs/<step>.stdout``. Raises
    ``DbtFailure`` if dbt fails.
    """
    log_dir, target_dir = project / "logs" / step, project / "target" / step
    log_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, str(HERE / "dbt_timed.py"), command, *args,
        "--project-dir", str(project), "--profiles-dir", str(project),
        "--log-path", str(log_dir), "--target-path", str(target_dir),
        "--log-format-file", "json", "--log-level-file", "debug", "--no-partial-parse",
    ]
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1",
           "BENCH_PHASE_LOG": str(log_dir / TIMED_LOG)}
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    output = proc.stdout + proc.stderr
    (project / "logs" / f"{step}.stdout").write_text(output)
    if proc.returncode != 0:
        raise DbtFailure(f"dbt {command} ({project.name}, step {step}) exited {proc.returncode}:\n{output[-5000:]}")
    return {
        "step": step,
        "command": " ".join(["dbt", command, *args]),
        "project": project.name,
        "wall_s": round(wall, 2),
        "models": model_runs(log_dir, target_dir),
    }


def model_runs(log_dir: Path, target_dir: Path) -> dict[str, dict]:
    """Per model name: execution time, status, log lines, statements and phase totals."""
    events = [json.loads(line) for line in (log_dir / "dbt.log").read_text().splitlines() if line.strip()]
    timed_file = log_dir / TIMED_LOG
    timed = [json.loads(line) for line in timed_file.read_text().splitlines()] if timed_file.exists() else []
    run_results = target_dir / "run_results.json"
    results = json.loads(run_results.read_text())["results"] if run_results.exists() else []
    logs = declared_logs(target_dir / "manifest.json")
    out: dict[str, dict] = OrderedDict()
    for result in results:
        unique_id = result["unique_id"]
        if not unique_id.startswith("model."):
            continue
        mine = [e for e in events if _node_id(e) == unique_id]
        calls = _calls_of_node(timed, mine, result.get("thread_id"))
        if any(c["kind"] == "phase" for c in calls):
            breakdown = timed_breakdown(calls, result["execution_time"], view=_relation_name(mine), logs=logs)
        else:
            breakdown = statement_breakdown(mine, logs)
        out[unique_id.split(".")[-1]] = {
            "execution_time_s": round(result["execution_time"], 2),
            "status": result["status"],
            "log_lines": [e["info"]["msg"] for e in mine if e["info"]["name"] == "JinjaLogInfo"],
            **breakdown,
            **reads_of(calls),
        }
    return out


def reads_of(calls: list[dict]) -> dict:
    """What the model's refresh read (``dbt_timed.py``'s ``reads`` event): per statement, and in
    total ``files_read``, ``bytes_read`` (the scanned data files' size) and ``input_bytes``."""
    events = [c for c in calls if c["kind"] == "reads"]
    if not events:
        return {}
    statements = events[-1]["statements"]
    inputs = [s["input_bytes"] for s in statements if s["input_bytes"] is not None]
    return {
        "reads": statements,
        "files_read": sum(t["files"] for s in statements for t in s["scans"]),
        "bytes_read": sum(t["bytes"] for s in statements for t in s["scans"]),
        "input_bytes": sum(inputs) if inputs else None,
    }


def _calls_of_node(timed: list[dict], node_events: list[dict], thread: str | None) -> list[dict]:
    """The timed calls made by the model's thread between its start and finish events."""
    starts = [_ts(e) for e in node_events if e["info"]["name"] == "NodeStart"]
    ends = [_ts(e) for e in node_events if e["info"]["name"] == "NodeFinished"]
    if not starts or not ends or thread is None:
        return []
    return [c for c in timed if c.get("thread") == thread and starts[0] <= c["start"] <= ends[-1]]


# ---------------------------------------------------------------------- statements and phases
PHASE_CALLS = ("plan", "capture", "mark", "publish", "finish", "purge", "report")  # labels of timed calls


def timed_breakdown(calls: list[dict], execution_time: float, *, view: str | None, logs: set[str]) -> dict:
    """Phases from the timed plugin calls (``dbt_timed.py``); each SQL statement with its own
    duration (fetching included) and the phase it ran in.

    plan, capture, publish, purge: the time of those calls; mark: ``fast_refresh_mark`` less the
    capture inside it; write: the statements the materialization runs between mark and publish
    (``set``/``reset spark.wap.id`` around them count as publish); other: the rest of the model's
    execution time (compiling, the report of ``fast_refresh_finish``, dbt's own statements).
    """
    phase_calls = [c for c in calls if c["kind"] == "phase"]
    sql_calls = [c for c in calls if c["kind"] == "sql"]

    def total(name: str) -> float:
        return sum((c["end"] - c["start"] for c in phase_calls if c["name"] == name), 0.0)

    sqls = [_strip_comment(c["sql"]) for c in sql_calls]
    fallback = classify(sqls, plan_count=0, view=view, logs=logs)
    statements = []
    for call, sql, label in zip(sql_calls, sqls, fallback):
        inside = _innermost(phase_calls, call["start"])
        if inside:
            label = {"finish": "report"}.get(inside, inside)
        elif label not in ("write", "record", "stage", "unstage"):
            label = "dbt"  # dbt's own statements (relation cache, grants, docs)
        statements.append({"label": label, "phase": PHASE_OF_LABEL.get(label, "other"),
                           "seconds": round(call["end"] - call["start"], 3), "sql": sql})
    outside = {p: sum((s["seconds"] for s in statements if s["phase"] == p and s["label"] not in PHASE_CALLS), 0.0)
               for p in ("write", "publish")}  # the materialization's own statements
    phases = OrderedDict([
        ("plan", total("plan")), ("capture", total("capture")), ("mark", total("mark") - total("capture")),
        ("write", outside["write"]), ("publish", total("publish") + outside["publish"]), ("purge", total("purge")),
    ])
    phases["other"] = max(execution_time - sum(phases.values()), 0.0)
    counts = OrderedDict((p, sum(1 for s in statements if s["phase"] == p)) for p in PHASES)
    return {"statements": statements, "phases": {k: round(v, 3) for k, v in phases.items()},
            "statement_counts": counts, "n_statements": len(statements), "timed_by": "plugin calls"}


def _innermost(phase_calls: list[dict], at: float) -> str | None:
    """The name of the shortest phase call running at ``at``."""
    running = [c for c in phase_calls if c["start"] <= at <= c["end"]]
    return min(running, key=lambda c: c["end"] - c["start"])["name"] if running else None


def statement_breakdown(node_events: list[dict], logs: set[str]) -> dict:
    """Fallback without timed plugin calls: the statements of the JSON log, each charged the
    time until the next one started (a lazy SELECT's work happens while fetching, after dbt's
    ``SQL status`` line), with the phase ``classify`` gives it."""
    queries = [e for e in node_events if e["info"]["name"] == "SQLQuery"]
    starts = [e for e in node_events if e["info"]["name"] == "NodeStart"]
    finishes = [e for e in node_events if e["info"]["name"] in ("NodeFinished", "LogModelResult")]
    end = _ts(finishes[0]) if finishes else (_ts(node_events[-1]) if node_events else 0.0)
    sqls = [_strip_comment(e["data"]["sql"]) for e in queries]
    labels = classify(sqls, plan_count=_statements_before_first_log_line(node_events),
                      view=_relation_name(node_events), logs=logs)
    statements = []
    for i, (event, sql, label) in enumerate(zip(queries, sqls, labels)):
        until = _ts(queries[i + 1]) if i + 1 < len(queries) else end
        statements.append({"label": label, "phase": PHASE_OF_LABEL[label], "seconds": round(until - _ts(event), 3),
                           "sql": sql})
    phases = OrderedDict((p, 0.0) for p in PHASES)
    counts = OrderedDict((p, 0) for p in PHASES)
    if starts and queries:
        phases["other"] += _ts(queries[0]) - _ts(starts[0])  # compiling the model
    for s in statements:
        phases[s["phase"]] += s["seconds"]
        counts[s["phase"]] += 1
    return {"statements": statements, "phases": {k: round(v, 3) for k, v in phases.items()},
            "statement_counts": counts, "n_statements": len(statements), "timed_by": "JSON log"}


def classify(sqls: list[str], *, plan_count: int, view: str | None, logs: set[str]) -> list[str]:
    """A label for each statement of one ``fast_refresh`` model run, in order.

    The materialization runs, in this order (``macros/materializations/fast_refresh.sql``):

    - **plan** (``adapter.fast_refresh_plan``, reads only): the first ``plan_count`` statements
      (``statement_breakdown``: those before the model's first log line, when the plugin logs
      its decision before acting);
    - **capture** and **mark** (``adapter.fast_refresh_mark``): it starts with ``reset
      spark.wap.id``. Capture statements are recognised by what they touch (``mv_capture_*``
      branches, ``create_changelog_view``, the ``mv_changes_*`` view, the master lineage query,
      the masters' current snapshots, writes to a change log); reads between them (log stats)
      are capture too;
      the reads after the last capture statement are mark (log refs, log stats);
    - **write**: the statements on the view (``create or replace table``, ``merge into``,
      ``insert into``, ``insert overwrite``, ``delete from``); ``record`` is the empty staged insert of a build that
      carries the bookkeeping;
    - **publish**: ``set spark.wap.id`` (stage), ``reset spark.wap.id`` after it (unstage), the
      read of the staged snapshot, the ``mv_publish_*`` branch and the ``fast_forward`` of the view;
    - after publishing (``adapter.fast_refresh_finish``): **report** (reads of the view: row
      counts for the log line) and **purge** (reads of the logs and of the other views' states,
      ``merge into <log>``).
    """
    labels: list[str] = []
    state = "mark"  # mark -> staged -> unstaged -> published (or mark -> written for a CTAS)
    for i, raw in enumerate(sqls):
        if i < plan_count:
            labels.append("plan")
            continue
        kind = _kind(_normalize(raw), view, logs)
        label, state = _transition(kind, state)
        labels.append(label)
    # Reads of the mark phase before the last capture statement belong to capture.
    last_capture = max((i for i, label in enumerate(labels) if label == "capture"), default=-1)
    for i in range(plan_count, last_capture):
        if labels[i] == "mark":
            labels[i] = "capture"
    return labels


def _transition(kind: str, state: str) -> tuple[str, str]:
    """The label of a statement of ``kind`` in ``state``, and the next state."""
    if kind == "stage":
        return "stage", "staged"
    if state == "staged":
        if kind == "reset":
            return "unstage", "unstaged"
        return ("record" if kind == "record" else "write"), state
    if kind in ("write", "record"):
        return "write", ("written" if state == "mark" else state)
    if state == "mark":
        return ("capture" if kind == "capture" else "mark"), state
    if kind == "publish":
        return "publish", "published"
    if state == "unstaged":  # the read of the staged snapshot before publishing it
        return "publish", state
    if kind == "view-read":  # row counts for the log line
        return "report", state
    return "purge", state  # the logs, and the other views' positions in them


def _kind(sql: str, view: str | None, logs: set[str]) -> str:
    if sql.startswith("set spark.wap.id="):
        return "stage"
    if sql.startswith("reset spark.wap.id"):
        return "reset"
    if "mv_publish_" in sql or (view and f"fast_forward('{view}'" in sql):
        return "publish"
    if sql.startswith(("cache table mv_write_", "drop view if exists mv_write_")):
        return "write"  # what the view's writes read, computed once before them (dropped after)
    if any(token in sql for token in ("mv_capture_", "create_changelog_view", "mv_changes_", "added-delete-files")):
        return "capture"
    read_refs = re.match(r"select '([\w.]+)' as relation_name, snapshot_id from ", sql)
    if read_refs and read_refs.group(1) not in logs:
        return "capture"  # the masters' current snapshots: is there anything to capture?
    for log in logs:
        if sql.startswith(f"merge into {log} "):
            return "purge"
        if re.match(rf"(insert into|create table if not exists|alter table) {re.escape(log)}\b", sql):
            return "capture"
    if view and re.match(rf"(create or replace table|create table|merge into|insert into|insert overwrite|delete from|update) "
                         rf"{re.escape(view)}\b", sql):
        return "record" if " where false" in sql else "write"
    if any(re.search(rf"\b{re.escape(log)}\b", sql) for log in logs):
        return "log-read"
    if view and re.search(rf"\b{re.escape(view)}\b", sql):
        return "view-read"
    return "read"


_COMMENT = re.compile(r"^\s*/\*.*?\*/\s*", re.S)


def _strip_comment(sql: str) -> str:
    return _COMMENT.sub("", sql).strip()


def _normalize(sql: str) -> str:
    """Lower case, single spaces, no backticks: `shop`.`orders` -> shop.orders."""
    return " ".join(sql.lower().replace("`", "").split())


def declared_logs(manifest: Path) -> set[str]:
    """The change logs the project declares: its sources with ``meta.mv_log`` (``schema.table``)."""
    if not manifest.exists():
        return set()
    sources = json.loads(manifest.read_text()).get("sources", {}).values()
    return {_normalize(s["relation_name"]) for s in sources
            if "mv_log" in ((s.get("config") or {}).get("meta") or s.get("meta") or {})}


def _statements_before_first_log_line(node_events: list[dict]) -> int:
    """Statements before the model's first log line, if statements follow it (older versions of
    the plugin logged ``<view>: <action> (<reason>)`` after planning); else 0."""
    names = [e["info"]["name"] for e in node_events]
    if "JinjaLogInfo" not in names:
        return 0
    first = names.index("JinjaLogInfo")
    if "SQLQuery" not in names[first:]:
        return 0
    return names[:first].count("SQLQuery")


def _relation_name(node_events: list[dict]) -> str | None:
    for event in node_events:
        relation = ((event.get("data") or {}).get("node_info") or {}).get("node_relation") or {}
        if relation.get("relation_name"):
            return relation["relation_name"].lower().replace("`", "")
    return None


def _node_id(event: dict) -> str | None:
    return ((event.get("data") or {}).get("node_info") or {}).get("unique_id")


def _ts(event: dict) -> float:
    return datetime.fromisoformat(event["info"]["ts"].replace("Z", "+00:00")).timestamp()
