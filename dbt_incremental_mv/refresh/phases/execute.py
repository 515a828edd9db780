"""Execute: the steps of the propagate phase run in order, each by the kind it is (publish.py's
StepKind), timed into the run's record. One loop for every executor of a refresh's steps: the
materialization's (the adapter runs the statements, so dbt logs each one), explain's (which lists
them) and the unit tests' warehouse (which runs them on a fake catalog)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from dbt_incremental_mv.refresh.phases.publish import Step, StepKind
from dbt_incremental_mv.refresh.views.statement import stopped


class StepRunner(Protocol):
    """How each kind of step is carried out."""

    def sql(self, step: Step) -> None:
        """Run the step's statement."""

    def create(self, step: Step) -> None:
        """Create (or replace) the view's table as the step's query."""

    def settings(self, step: Step) -> None:
        """Change the session's settings as the step says (Metadata.apply_settings)."""

    def uncache(self, step: Step) -> None:
        """Drop the step's cached temporary view (Metadata.drop_temp_view)."""

    def publish(self, step: Step) -> None:
        """Publish the commit staged with the step's ``wap_id``."""

    def own_log(self, step: Step) -> None:
        """mv_log=true: write what the commit staged with ``wap_id`` changed to the view's log."""


@dataclass
class PhaseClock:
    """Seconds spent in each phase of one refresh (the refresh history keeps them)."""

    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started


PHASE_OF = {
    StepKind.SQL: "write",
    StepKind.CREATE: "write",
    StepKind.SETTINGS: "write",
    StepKind.UNCACHE: "write",
    StepKind.LOG: "write",
    StepKind.PUBLISH: "publish",
}


def chosen_sql(step: Step, count: Callable[[str], Sequence[Sequence[Any]]]) -> tuple[str, int | None]:
    """The statement a SQL step runs, and the count it was chosen by (None: no count): its lean
    form when it has one and the count it needs (a query over the refresh's cached views, run by
    ``count``) is 0; else the statement itself (statement.Write)."""
    if step.lean is None:
        return step.sql, None
    counted = int(count(step.lean.needed)[0][0] or 0)
    return (step.sql if counted else step.lean.sql), counted


@dataclass(frozen=True)
class Ran:
    """How a SQL step ran: the count its statement was chosen by (None: no count), and whether
    its fallback ran instead of it (statement.Fallback)."""

    counted: int | None = None
    fell_back: bool = False


def run_sql_step(step: Step, count: Callable[[str], Sequence[Sequence[Any]]], execute: Callable[[str], object]) -> Ran:
    """Run a SQL step's statement (chosen_sql) with ``execute``; when it stops (statement.stop_when)
    and the step has a fallback, the fallback instead. Any other failure is raised as it is."""
    sql, counted = chosen_sql(step, count)
    try:
        execute(sql)
    except Exception as error:
        if step.fallback is None or not stopped(error):
            raise
        execute(step.fallback.sql)
        return Ran(counted, fell_back=True)
    return Ran(counted)


def execute_steps(steps: Sequence[Step], runner: StepRunner, clock: PhaseClock | None = None) -> None:
    """Run ``steps`` in order with ``runner``, each timed into ``clock`` under its phase."""
    clock = clock or PhaseClock()
    for step in steps:
        action: Callable[[Step], None] = {
            StepKind.SQL: runner.sql,
            StepKind.CREATE: runner.create,
            StepKind.SETTINGS: runner.settings,
            StepKind.UNCACHE: runner.uncache,
            StepKind.PUBLISH: runner.publish,
            StepKind.LOG: runner.own_log,
        }[step.kind]
        with clock.phase(PHASE_OF[step.kind]):
            action(step)


@dataclass
class Listing:
    """A runner that runs nothing: it lists the statements (explain)."""

    statements: list[str] = field(default_factory=list)

    def sql(self, step: Step) -> None:
        if step.lean is not None:
            self.statements += [
                step.lean.needed,
                "-- the statement below runs when the count above is not 0; at 0, the same statement without "
                + step.lean.omits,
            ]
        self.statements.append(step.sql)
        if step.fallback is not None:
            self.statements += [
                "-- the statement below runs instead of the one above when that one stops at a row that needs it: "
                + step.fallback.in_words,
                step.fallback.sql,
            ]

    def create(self, step: Step) -> None:
        self.statements.append(step.sql)

    def settings(self, step: Step) -> None:
        self.statements.extend(step.statements)

    def uncache(self, step: Step) -> None:
        self.statements.extend(step.statements)

    def publish(self, step: Step) -> None:
        """(explain says what publishing does in words)"""

    def own_log(self, step: Step) -> None:
        """(explain says what the own log gets in words)"""
