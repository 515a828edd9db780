"""Randomized differential testing of fast_refresh views (reusable by every view class).

A :class:`Workload` owns some master tables (Iceberg tables in the test schema, declared as
dbt sources with capture-managed change logs) and applies seeded random inserts, updates and
deletes to them: NULLs, duplicate join keys, join-key updates, key updates, rows that start or
stop joining. After every round the caller refreshes the views (``dbt run``) and
:meth:`Workload.check` compares each view with its defining query recomputed on the masters,
as multisets. A failure prints the seed and every DML statement run so far.
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
import random
from collections import Counter
from dataclasses import dataclass, field

from tests.functional.util import rows


# Every random DML operation run by any workload of this process (the CI floor of issue 7).
OPERATIONS = Counter()


def soak_factor() -> int:
    """How many times more random rounds to run: ``DBT_MV_SOAK=10`` for a soak run (default 1)."""
    return max(1, int(os.environ.get("DBT_MV_SOAK", "1") or 1))


def randomized_rounds(rounds: int) -> int:
    """How many of a randomized test's alternating rounds (batched, then single statements) run: all
    of them times the soak factor at full depth; half of them at the CI's (tests/depth.py), at least
    one (a test running one round reads its marked keys from the logs in it)."""
    from tests.depth import full

    return rounds * soak_factor() if full() else max(1, rounds // 2)


def batch_size() -> int:
    """Random operations in one batched round (one multi-row MERGE per master): their number
    costs next to nothing, the refresh after them is what takes time. Grows with the soak factor."""
    return 330 * soak_factor()


@contextmanager
def keys_read_from_logs(on: bool = True):
    """Within the block (when ``on``), fast refreshes read their marked keys from the logs and net
    their images in SQL (refresh/phases/mark.py's knobs at 0), the path of changes too large for
    literals; outside it small test changes always take the literal path."""
    from dbt_incremental_mv.environment import LISTED_VALUES, LITERAL_KEYS

    LITERAL_KEYS_ENV, LISTED_VALUES_ENV = LITERAL_KEYS.name, LISTED_VALUES.name

    saved = {name: os.environ.get(name) for name in (LITERAL_KEYS_ENV, LISTED_VALUES_ENV)}
    if on:
        os.environ.update({LITERAL_KEYS_ENV: "0", LISTED_VALUES_ENV: "0"})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def comparable(value):
    """A value as compared: floating point rounded to 9 significant digits (an incrementally
    maintained AVG or SUM of doubles may differ from a recomputation in the last bits); an array
    as a tuple of its elements, compared in order."""
    if isinstance(value, list):
        return tuple(comparable(v) for v in value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value) or value == 0:
            return value
        return round(value, 8 - int(math.floor(math.log10(abs(value)))))
    return value


@dataclass
class Column:
    name: str
    spark_type: str
    values: list  # the value pool to draw from (None = NULL allowed)


@dataclass
class Master:
    name: str
    key: str
    columns: list[Column]  # non-key columns
    rows: dict = field(default_factory=dict)  # key -> tuple of values, mirrors the table
    # keys to draw new keys from while one is free (so that rows other masters refer to by
    # these values come and go, and joins keep matching); then fresh keys above 1000
    key_pool: tuple = ()
    properties: tuple = ()  # table properties, e.g. merge-on-read writes: (("write.update.mode", "merge-on-read"),)

    def ddl(self, schema):
        columns = ", ".join([f"`{self.key}` bigint"] + [f"`{c.name}` {c.spark_type}" for c in self.columns])
        properties = ", ".join(f"'{k}'='{v}'" for k, v in self.properties)
        return f"create table {schema}.{self.name} ({columns}) using iceberg" + (
            f" tblproperties ({properties})" if properties else ""
        )


def literal(value):
    if value is None:
        return "null"
    if isinstance(value, str):
        return "'" + value.replace("'", "\\'") + "'"
    return repr(value)


class Workload:
    def __init__(self, project, masters: list[Master], seed: int):
        self.project = project
        self.masters = {m.name: m for m in masters}
        self.seed = seed
        self.random = random.Random(seed)
        self.history: list[str] = []
        self.next_key = 1000
        self._deferred = False  # inside a batched round: DML goes to the mirror only

    # -- setup -------------------------------------------------------------
    def create(self, initial_rows: int = 12):
        schema = self.project.test_schema
        for master in self.masters.values():
            self.sql(master.ddl(schema))
            for _ in range(initial_rows):
                self.insert(master)

    @staticmethod
    def sources_yml(masters: list[Master]) -> str:
        tables = "\n".join(f"      - name: {m.name}" for m in masters)
        logs = "\n".join(
            f"      - name: mlog_{m.name}\n        meta:\n          mv_log: {{master: shop.{m.name}, key: [{m.key}], capture: true}}"
            for m in masters
        )
        return (
            "version: 2\nsources:\n  - name: shop\n    schema: \"{{ target.schema }}\"\n    tables:\n"
            f"{tables}\n  - name: mv_logs\n    schema: \"{{{{ target.schema }}}}\"\n    tables:\n{logs}\n"
        )

    # -- DML -----------------------------------------------------------------
    def sql(self, statement: str):
        if self._deferred:
            return
        self.history.append(statement)
        self.project.run_sql(statement)
        OPERATIONS["statements"] += 1

    def _row(self, master: Master):
        return tuple(self.random.choice(c.values) for c in master.columns)

    def _new_key(self, master: Master):
        free = [k for k in master.key_pool if k not in master.rows]
        if free:
            return self.random.choice(free)
        self.next_key += 1
        while self.next_key in master.key_pool or self.next_key in master.rows:
            self.next_key += 1
        return self.next_key

    def insert(self, master: Master):
        key = self._new_key(master)
        values = self._row(master)
        master.rows[key] = values
        self.sql(f"insert into {self.project.test_schema}.{master.name} values ({', '.join(map(literal, (key, *values)))})")

    def update(self, master: Master):
        if not master.rows:
            return self.insert(master)
        key = self.random.choice(sorted(master.rows))
        column = self.random.randrange(len(master.columns))
        value = self.random.choice(master.columns[column].values)
        values = list(master.rows[key])
        values[column] = value
        master.rows[key] = tuple(values)
        name = master.columns[column].name
        self.sql(f"update {self.project.test_schema}.{master.name} set `{name}` = {literal(value)} where `{master.key}` = {key}")

    def update_key(self, master: Master):
        if not master.rows:
            return self.insert(master)
        old = self.random.choice(sorted(master.rows))
        new = self._new_key(master)
        master.rows[new] = master.rows.pop(old)
        self.sql(f"update {self.project.test_schema}.{master.name} set `{master.key}` = {new} where `{master.key}` = {old}")

    def delete(self, master: Master):
        if not master.rows:
            return
        key = self.random.choice(sorted(master.rows))
        del master.rows[key]
        self.sql(f"delete from {self.project.test_schema}.{master.name} where `{master.key}` = {key}")

    def delete_every_row(self, name: str):
        """Every row of master ``name`` deleted by key in one row-level DELETE (one commit: the
        per-key statements of a long test cost a commit each and test nothing more)."""
        master = self.masters[name]
        if master.rows:
            keys = ", ".join(map(literal, sorted(master.rows)))
            self.sql(f"delete from {self.project.test_schema}.{name} where `{master.key}` in ({keys})")
        master.rows.clear()

    def round(
        self, operations: int, masters: list[str] | None = None, kinds=("insert", "update", "update_key", "delete"),
        batched: bool = False,
    ):
        """Random DML on the given masters (default: all): one statement per operation, or with
        ``batched`` the round's net change applied as one MERGE per master (one commit that
        inserts, updates and deletes many rows, as an ingestion job would)."""
        names = masters or sorted(self.masters)
        before = {name: dict(m.rows) for name, m in self.masters.items()}
        self._deferred = batched
        try:
            for _ in range(operations):
                master = self.masters[self.random.choice(names)]
                kind = self.random.choice(kinds)
                getattr(self, kind)(master)
                OPERATIONS[kind] += 1
        finally:
            self._deferred = False
        if batched:
            for name in sorted(before):
                self._merge_net_change(self.masters[name], before[name])

    def alternating_round(self, round_number: int, operations: int = 6):
        """Round ``round_number`` of a test that alternates the two kinds of rounds: a batched
        round (one MERGE per master) when even, ``operations`` single statements when odd."""
        if round_number % 2:
            self.round(operations)  # one statement (one commit) per operation
        else:
            self.round(batch_size(), batched=True)  # one multi-row MERGE per master

    def _merge_net_change(self, master: Master, before: dict):
        changes = []
        for key in sorted(set(before) | set(master.rows)):
            old, new = before.get(key), master.rows.get(key)
            if new is None:
                changes.append((key, *[None] * len(master.columns), "D"))
            elif old is None:
                changes.append((key, *new, "I"))
            elif old != new:
                changes.append((key, *new, "U"))
        if not changes:
            return
        names = [master.key] + [c.name for c in master.columns]
        types = ["bigint"] + [c.spark_type for c in master.columns]
        values = ", ".join("(" + ", ".join(map(literal, change)) + ")" for change in changes)
        casts = ", ".join(f"cast(`c{i}` as {t}) as `{n}`" for i, (n, t) in enumerate(zip(names, types)))
        aliases = ", ".join(f"c{i}" for i in range(len(names) + 1))
        self.sql(
            f"merge into {self.project.test_schema}.{master.name} as m using (select {casts}, `c{len(names)}` as `op` "
            f"from values {values} as v({aliases})) as s on m.`{master.key}` = s.`{master.key}` "
            "when matched and s.op = 'D' then delete "
            f"when matched then update set {', '.join(f'`{n}` = s.`{n}`' for n in names[1:])} "
            f"when not matched and s.op <> 'D' then insert ({', '.join(f'`{n}`' for n in names)}) "
            f"values ({', '.join(f's.`{n}`' for n in names)})"
        )

    # -- comparison ----------------------------------------------------------
    def check(self, view: str, defining_query: str, columns: list[str]):
        schema = self.project.test_schema
        select = ", ".join(f"`{c}`" for c in columns)
        actual = Counter(
            tuple(map(comparable, r)) for r in rows(self.project, f"select {select} from {schema}.{view}")
        )
        expected = Counter(
            tuple(map(comparable, r)) for r in rows(self.project, f"select {select} from ({defining_query})")
        )
        OPERATIONS["comparisons"] += 1
        if actual != expected:
            trail = "\n".join(self.history)
            raise AssertionError(
                f"view {view} differs from its defining query (seed {self.seed}):\n"
                f"  missing: {dict(expected - actual)}\n  extra: {dict(actual - expected)}\n"
                f"DML so far:\n{trail}"
            )
