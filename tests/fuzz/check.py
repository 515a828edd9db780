"""The check of generated definitions on Spark (issue 37): every definition of a dbt project is
either refused before anything is created, naming the construct, or built and then maintained
exactly through rounds of random DML, each followed by a fast refresh.

Used by the CI test (tests/functional/test_generated_views.py, a fixed seed) and by hand
(scripts/fuzz.sh: more definitions, any seed, a summary table).
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import date, timedelta

from dbt.tests.util import run_dbt_and_capture

from dbt_incremental_mv import environment
from dbt_incremental_mv.analysis import UnsupportedViewError, analyze_view
from dbt_incremental_mv.analysis.clock import Clock, clock_move, sql_reads_clock
from dbt_incremental_mv.consistency import compared_column
from dbt_incremental_mv.refresh.views import view_classes
from tests.functional.differential import OPERATIONS, Column, Master, Workload
from tests.functional.util import rows
from tests.fuzz.generator import MASTERS, Definition, analysis_tables

REFUSED_TAG = "refused"
COMPARED_AT_ONCE = 25  # views compared with their queries by one statement
FIRST_DAY = date(2026, 12, 1)  # the build's date; each round's a day later (definitions filter by it)


def day_of(number: int | None) -> str:
    """The time of the build (``number`` None) or of round ``number``: a day later each, so that
    rows cross a filter by the date (generator: "filter by the time")."""
    return f"{FIRST_DAY + timedelta(days=0 if number is None else number + 1)} 10:00:00"


def at_time(sql: str, now: str) -> str:
    """``sql`` with the clock read as ``now`` (as a run fixes it: DBT_INCREMENTAL_MV_NOW)."""
    return sql.replace("current_date()", f"date'{now[:10]}'").replace("current_timestamp()", f"timestamp'{now}'")


def run_at(number: int | None, *args: str):
    """``dbt`` with the clock fixed at day_of(``number``)."""
    os.environ[environment.NOW.name] = day_of(number)
    try:
        return run_dbt_and_capture(list(args), expect_pass=None)
    finally:
        os.environ.pop(environment.NOW.name, None)


def workload_masters() -> list[Master]:
    """The generator's masters as the differential workload's (its DML draws from the same pools)."""
    return [
        Master(m.name, m.key, [Column(c.name, c.spark_type, list(c.values)) for c in m.columns], key_pool=m.key_pool)
        for m in MASTERS
    ]


def model_files(definitions: list[Definition], configs: str = "") -> dict[str, str]:
    """The dbt project's model files: one per definition (refused ones tagged; ``configs``, e.g.
    ``indexed_state=true``, set on each), and the sources with capture-managed change logs."""
    refs = {m.name: f"{{{{ source('shop', '{m.name}') }}}}" for m in MASTERS}
    extra = f", {configs}" if configs else ""
    files = {}
    for d in definitions:
        tags = f", tags=['{REFUSED_TAG}']" if d.refused else ""
        method = refresh_method(d)
        files[f"{d.name}.sql"] = (
            f"{{{{ config(materialized='fast_refresh', refresh_method='{method}'{tags}{extra}) }}}}\n{d.sql(refs)}\n"
        )
    files["sources.yml"] = Workload.sources_yml(workload_masters())
    return files


def indexed(definition: Definition) -> bool:
    """Whether the definition is a join view that ``indexed_state=true`` keeps over an indexed join
    state (analysis/indexed.py)."""
    from dbt_incremental_mv.analysis.indexed import indexed_split

    sql, tables = definition.sql(), analysis_tables()
    try:
        return indexed_split(sql, analyze_view(sql, tables), tables) is not None
    except UnsupportedViewError:
        return False


def refresh_method(definition: Definition) -> str:
    """'fast': a refresh that cannot be fast fails, never a silent rebuild; but 'force' for a
    definition reading the clock whose view is recomputed when the date moves across its rows (its
    class does not apply them as changes, or it reads the clock elsewhere than in a filter of one
    table: refresh/views/view_classes.applies_crossed_rows, analysis/clock.clock_move)."""
    sql = definition.sql()
    if definition.refused is not None or not sql_reads_clock(sql):
        return "fast"
    tables = analysis_tables()
    try:
        before, after = (analyze_view(sql, tables, Clock.of(day_of(n))) for n in (None, 0))
    except UnsupportedViewError:
        return "force"
    applied = clock_move(before, after).elsewhere is None and view_classes.applies_crossed_rows(after)
    return "fast" if applied else "force"


@dataclass
class Outcome:
    """What the check found, for the summary and the assertions."""

    definitions: int = 0
    maintained: int = 0
    rounds: int = 0
    comparisons: int = 0
    refused_by: Counter = field(default_factory=Counter)
    classes: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)  # one line each: definition, what went wrong
    seconds: Counter = field(default_factory=Counter)  # wall time: "dbt run" (build and refreshes), "compare"

    def table(self) -> str:
        lines = ["| measure | value |", "|---|---|",
                 f"| definitions | {self.definitions} |", f"| maintained | {self.maintained} |",
                 f"| refused (as expected) | {sum(self.refused_by.values())} |",
                 f"| rounds of DML + fast refresh | {self.rounds} |",
                 f"| random operations | {sum(OPERATIONS[k] for k in ('insert', 'update', 'update_key', 'delete'))} |",
                 f"| view-vs-query comparisons | {self.comparisons} |", f"| failures | {len(self.failures)} |"]
        lines += [f"| seconds in {what} | {seconds:.0f} |" for what, seconds in sorted(self.seconds.items())]
        lines += ["", "| class (maintained) | definitions |", "|---|---|"]
        lines += [f"| {name} | {count} |" for name, count in sorted(self.classes.items())]
        lines += ["", "| refused construct | definitions |", "|---|---|"]
        lines += [f"| {name} | {count} |" for name, count in sorted(self.refused_by.items())]
        return "\n".join(lines)


class GeneratedCheck:
    """Builds the project's generated views, then rounds of DML and fast refreshes."""

    def __init__(self, project, definitions: list[Definition], seed: int):
        self.project = project
        self.definitions = definitions
        self.workload = Workload(project, [replace(m, rows={}) for m in workload_masters()], seed)
        self.outcome = Outcome(definitions=len(definitions))
        self.failed: set[str] = set()  # definitions already reported (not checked again)

    @property
    def maintained(self) -> list[Definition]:
        return [d for d in self.definitions if d.refused is None and d.name not in self.failed]

    def _fail(self, definition: Definition, what: str) -> None:
        self.failed.add(definition.name)
        self.outcome.failures.append(f"{definition.name}: {what}\n    {definition.sql()}")

    def build(self, initial_rows: int = 10) -> None:
        """The masters filled, every model run once: refused ones must fail naming their
        construct and create nothing; the others are built and equal their queries."""
        schema = self.project.test_schema
        self.workload.create(initial_rows=initial_rows)
        before = self._tables()
        started = time.perf_counter()
        results, _ = run_at(None, "run")
        self.outcome.seconds["dbt run (build)"] += time.perf_counter() - started
        by_name = {r.node.name: r for r in results}
        for d in self.definitions:
            result = by_name.get(d.name)
            message = str(getattr(result, "message", "") or "")
            if d.refused is not None:
                if result is None or result.status != "error" or "cannot fast refresh" not in message \
                        or d.refused.lower() not in message.lower():
                    self._fail(d, f"expected a refusal naming {d.refused!r}, got {getattr(result, 'status', None)}: {message[:300]}")
                else:
                    self.outcome.refused_by[next(f for f in d.features if f.startswith("refused: "))[9:]] += 1
            elif result is None or result.status != "success":
                self._fail(d, f"build failed: {message[:500]}")
        created = self._tables() - before
        for d in self.definitions:
            if d.refused is not None and any(name == d.name or name.endswith(f"_{d.name}") for name in created):
                self._fail(d, f"refused but created {sorted(n for n in created if d.name in n)} in {schema}")
        self.check()

    def _tables(self) -> set[str]:
        return {name for _, name, *_ in rows(self.project, f"show tables in {self.project.test_schema}")}

    def round(self, number: int, operations: int = 12) -> None:
        """Random DML (on even rounds batched MERGEs then single statements, single statements
        on odd ones; every third round a master emptied and refilled), then a fast refresh of every
        maintained view."""
        w = self.workload
        if number % 3 == 2:  # whole groups emptied and refilled: every row of one master goes, then new ones
            name = sorted(w.masters)[number // 3 % len(w.masters)]
            master = w.masters[name]
            w.sql(f"delete from {self.project.test_schema}.{name}")
            master.rows.clear()
            w.round(operations, masters=[name], kinds=("insert",))
        else:
            w.alternating_round(number, operations=operations)
            if number % 2 == 0:  # single statements on top of the MERGE: one refresh consumes both,
                w.round(operations)  # rows the MERGE changed are changed again
        selected = [d.name for d in self.maintained]
        if not selected:  # (a shrunk candidate the analysis refuses: nothing to refresh)
            return
        started = time.perf_counter()
        results, _ = run_at(number, "run", "--select", *selected)
        self.outcome.seconds["dbt run (fast refreshes)"] += time.perf_counter() - started
        by_name = {r.node.name: r for r in results}
        for d in self.maintained:
            result = by_name.get(d.name)
            if result is None or result.status != "success":  # refresh_method='fast': never a silent rebuild
                self._fail(d, f"round {number}: refresh failed: {str(getattr(result, 'message', ''))[:500]}")
        self.outcome.rounds += 1
        self.check(number)

    def check(self, number: int | None = None) -> None:
        """Every maintained view against its query recomputed on the masters (multiset: EXCEPT
        ALL both ways, counted for COMPARED_AT_ONCE views in one statement); a difference is
        reported with the rows."""
        schema = self.project.test_schema
        refs = {m.name: f"{schema}.{m.name}" for m in MASTERS}
        started = time.perf_counter()
        pairs = {}
        for d in self.maintained:
            # as matches_defining_query compares: doubles to 9 significant digits (a SUM of doubles
            # differs in its last bits between two plans of one query: the build's and the query's)
            columns = ", ".join(compared_column(c, t) for c, t in _visible(self.project, schema, d.name))
            query = at_time(d.sql(refs), day_of(number))
            pairs[d.name] = (f"select {columns} from {schema}.{d.name}", f"select {columns} from ({query})")
        names = sorted(pairs)
        differing = []
        for at in range(0, len(names), COMPARED_AT_ONCE):
            counts = "\nunion all\n".join(
                f"select '{name}' as `view`, count(*) as `rows` from ((({pairs[name][0]}) except all ({pairs[name][1]})) "
                f"union all (({pairs[name][1]}) except all ({pairs[name][0]})))"
                for name in names[at:at + COMPARED_AT_ONCE]
            )
            differing += [name for name, count in rows(self.project, counts) if count]
        self.outcome.comparisons += len(names)
        OPERATIONS["comparisons"] += len(names)
        for name in differing:
            view, query = pairs[name]
            extra = rows(self.project, f"({view}) except all ({query})")
            missing = rows(self.project, f"({query}) except all ({view})")
            when = "after the build" if number is None else f"after round {number}"
            self._fail(next(d for d in self.definitions if d.name == name),
                       f"differs from its query {when}: missing {missing[:10]}, extra {extra[:10]}")
        self.outcome.seconds["comparisons"] += time.perf_counter() - started

    def run(self, rounds: int, operations: int = 12) -> Outcome:
        self.build()
        for number in range(rounds):
            self.round(number, operations)
        self.outcome.maintained = len([d for d in self.definitions if d.refused is None])
        self.outcome.classes = Counter(d.view_class for d in self.definitions if d.refused is None)
        return self.outcome


_columns: dict[tuple[str, str], list[tuple[str, str]]] = {}


def _visible(project, schema: str, view: str) -> list[tuple[str, str]]:
    """The view's visible columns with their types."""
    if (schema, view) not in _columns:
        names = []
        for name, spark_type, *_ in rows(project, f"describe {schema}.{view}"):
            if not name or name.startswith("#"):
                break  # the partitioning follows
            if not name.startswith("_mv_"):
                names.append((name, spark_type))
        _columns[(schema, view)] = names
    return _columns[(schema, view)]


def failure_kind(failure: str) -> str:
    """What a failure of the check is, without the definition's name, its round, rows or SQL: a
    difference from its query, else the first line of its error that names no model (a shrunk
    candidate must fail the same way: a cut that breaks the SQL fails too, but otherwise)."""
    what = re.sub(r"\b[gr]\d{3,4}\b", "", failure.split("\n    ")[0])
    if "differs from its query" in what:
        return "differs from its query"
    lines = [line.strip() for line in what.splitlines() if line.strip()]
    detail = [line for line in lines[1:] if not line.startswith("Runtime Error in model")]
    first = detail[0] if detail else re.sub(r"round \d+: ", "", lines[0] if lines else "")
    return first.split(" (")[0][:80]


def fails_alone(project, definition: Definition, seed: int, rounds: int, like: str | None = None) -> bool:
    """Whether ``definition`` fails the check on its own (as the failure ``like`` does, when given:
    failure_kind): every table of the test schema dropped, the project's only model, the same
    seeded DML (it does not depend on the views)."""
    schema = project.test_schema
    for _, name, *_ in rows(project, f"show tables in {schema}"):
        project.run_sql(f"drop table if exists {schema}.{name}")
    models = project.project_root.join("models")
    for path in models.listdir():
        if path.ext == ".sql":
            path.remove()
    models.join(f"{definition.name}.sql").write(model_files([definition])[f"{definition.name}.sql"])
    _columns.clear()  # the same name may now be another view
    failures = GeneratedCheck(project, [definition], seed).run(rounds).failures
    return any(like is None or failure_kind(f) == failure_kind(like) for f in failures)
