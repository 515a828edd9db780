"""Generated view definitions: seeded, reproducible, over a fixed set of masters (issue 37).

Every definition is either one the plugin must maintain (inside the README's supported set:
joins, LEFT/RIGHT chains, filters in WHERE and ON, expressions, GROUP BY with COUNT/SUM/AVG/MIN/MAX,
constants as group keys, HAVING, DISTINCT, UNION ALL of such branches, ranked and windowed rows of
one table, nested queries) or one it must refuse, naming the construct (a window without PARTITION
BY, FULL OUTER JOIN, COUNT(DISTINCT), a non-deterministic function,
UNION/INTERSECT/EXCEPT, LIMIT, a subquery in WHERE), injected into an otherwise maintainable one.

Pure Python: the analysis check runs without Spark (tests/unit/test_generated_definitions.py); the
functional check builds and refreshes them (tests/functional/test_generated_views.py).
Definitions name masters as ``{orders}``, ``{customers}``, ``{regions}``: ``Definition.sql(refs)``
fills them (``shop.orders`` for the analysis, a dbt ``source()`` for a model).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

# -- the masters ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MasterColumn:
    name: str
    spark_type: str
    kind: str  # "n" integral, "d" decimal, "f" double, "s" string
    values: tuple  # the pool random DML draws from (None: NULL)


@dataclass(frozen=True)
class GeneratedMaster:
    name: str
    key: str
    columns: tuple[MasterColumn, ...]  # non-key columns
    key_pool: tuple = ()  # keys reused while free, so that references come and go

    def column(self, name: str) -> MasterColumn:
        if name == self.key:
            return MasterColumn(self.key, "bigint", "n", ())
        return next(c for c in self.columns if c.name == name)

    @property
    def all_columns(self) -> tuple[MasterColumn, ...]:
        return (self.column(self.key), *self.columns)


MASTERS = (
    # customers refer to customers (referrer_id): a self-reference
    GeneratedMaster("customers", "customer_id", (
        MasterColumn("region_id", "bigint", "n", (1, 2, 3, None)),
        MasterColumn("referrer_id", "bigint", "n", (1001, 1002, 1003, None)),
        MasterColumn("segment", "string", "s", ("retail", "corporate", "retail ", None)),
        # decimals of other precisions and scales than orders.amount (issue 62: arithmetic and
        # widening across decimal types, AVG's rounding to scale + 4)
        MasterColumn("credit", "decimal(18,6)", "d", (0.125, 1000.5, -2.000001, 3.333333, None)),
    ), key_pool=tuple(range(1001, 1008))),
    GeneratedMaster("orders", "order_id", (
        MasterColumn("customer_id", "bigint", "n", (1001, 1002, 1003, 1004, 1005, None)),
        MasterColumn("amount", "decimal(10,2)", "d", (1.5, 2.25, 10.0, -3.0, None)),
        MasterColumn("weight", "double", "f", (0.1, 0.7, 2.5, None)),
        MasterColumn("quantity", "int", "n", (1, 2, 3, None)),
        MasterColumn("status", "string", "s", ("open", "shipped", "cancelled", None)),
    )),
    GeneratedMaster("regions", "region_id", (
        MasterColumn("region", "string", "s", ("north", "south", None)),
        MasterColumn("rank", "int", "n", (1, 2, None)),
        MasterColumn("rate", "decimal(5,3)", "d", (0.125, 1.5, -0.333, None)),
    ), key_pool=(1, 2, 3, 4)),
)
MASTER = {m.name: m for m in MASTERS}

# Join conditions between masters: (left master, left column, right master, right column).
EDGES = (
    ("orders", "customer_id", "customers", "customer_id"),
    ("customers", "region_id", "regions", "region_id"),
    ("customers", "referrer_id", "customers", "customer_id"),  # self-reference
    ("orders", "customer_id", "orders", "customer_id"),  # a self-join on a non-key (many to many)
    ("orders", "quantity", "regions", "rank"),  # neither side a key
)

# -- definitions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Definition:
    """One generated view definition. ``refused``: the construct whose refusal the analysis
    must name (None: the plugin must maintain it). ``features``: what it is made of, for the
    summary table and the shrinker."""

    name: str
    template: str
    refused: str | None = None
    features: tuple[str, ...] = ()

    def sql(self, refs: dict[str, str] | None = None) -> str:
        refs = refs or {m.name: f"shop.{m.name}" for m in MASTERS}
        return self.template.format(**refs)

    @property
    def view_class(self) -> str:
        """A coarse class for the summary: union, aggregate (over joins/outer joins), outer join, join."""
        f = set(self.features)
        outer = "left" in f or "right" in f
        if "per partition" in f:
            return "per partition"
        if "union" in f:
            return "union all"
        if "ranked" in f:
            return "ranked"
        if "windowed" in f:
            return "windowed"
        if "aggregate" in f or "distinct" in f:
            return "aggregate over outer join" if outer else ("aggregate over join" if "join" in f else "aggregate")
        if outer:
            return "outer join"
        return "join" if "join" in f else "single table"


# -- the pieces of a SELECT ----------------------------------------------------------------------


@dataclass
class Occurrence:
    alias: str
    master: GeneratedMaster
    nullable: bool = False  # null-extended by an outer join


@dataclass
class Block:
    """A SELECT being generated: its FROM (occurrences and join clauses), WHERE conjuncts, outputs."""

    occurrences: list[Occurrence] = field(default_factory=list)
    joins: list[str] = field(default_factory=list)
    where: list[str] = field(default_factory=list)
    features: set[str] = field(default_factory=set)

    def from_clause(self) -> str:
        first = self.occurrences[0]
        return f"from {{{first.master.name}}} {first.alias}" + "".join(f" {j}" for j in self.joins)


# literals per kind, for comparisons and constants
LITERALS = {"n": ("1", "2", "1002", "0"), "d": ("2.25", "0", "-3.00", "1.5"), "f": ("0.5", "1.0"),
            "s": ("'open'", "'retail'", "'north'", "'x'")}


class Generator:
    """Seeded definitions: ``Generator(seed).definitions(n)`` is the same list for the same seed."""

    def __init__(self, seed: int, refused_share: float = 0.15):
        self.seed = seed
        self.random = random.Random(seed)
        # JOIN ... USING is drawn from its own stream: the definitions of a seed keep their shape
        # (the main stream is not consumed), some of their joins written with USING
        self.using_random = random.Random(seed * 7919 + 1)
        # likewise an aggregate written as an equal one the analysis rewrites (COUNT_IF for COUNT)
        self.spelling_random = random.Random(seed * 7919 + 2)
        # and an aggregate output wrapped in an expression over aggregates (ROUND(SUM(x), 1)), a
        # HAVING on an aggregate no column selects
        self.derived_random = random.Random(seed * 7919 + 3)
        # and a LEFT JOIN's ON with a condition on both sides beside its equality (a range, an OR)
        self.range_random = random.Random(seed * 7919 + 4)
        # and a SELECT of one table's rows ranked in window partitions, its top rows kept
        self.ranked_random = random.Random(seed * 7919 + 5)
        # and an aggregate no delta maintains, of the same type, in place of one (COUNT(DISTINCT x)
        # for a count, SUM/AVG(DISTINCT x), BIT_OR): their groups recomputed
        self.recomputed_random = random.Random(seed * 7919 + 6)
        # and a join's first tables written as a CTE or derived table that joins them, joined to the rest
        self.nested_random = random.Random(seed * 7919 + 7)
        # and a UNION ALL inside a CTE or derived table, read alone by a query that selects its columns
        self.wrapped_random = random.Random(seed * 7919 + 8)
        # and a SELECT DISTINCT in a CTE or derived table that the query reads whole
        self.wrapped_distinct_random = random.Random(seed * 7919 + 9)
        # and a CTE or derived table aggregating a table by a join column, joined back to the rows
        self.pulled_random = random.Random(seed * 7919 + 10)
        # and a column computed from the group keys alone (a surrogate key: md5 of them)
        self.keyed_random = random.Random(seed * 7919 + 11)
        # and a SELECT of one table's rows with window functions over a common partition, maybe
        # filtered on them by the query over it
        self.windowed_random = random.Random(seed * 7919 + 12)
        # and an aggregate with FILTER (WHERE ...) on one of the block's columns
        self.filtered_random = random.Random(seed * 7919 + 13)
        # and a SELECT of rows with rows generated from each (LATERAL VIEW [OUTER] explode/posexplode,
        # or an explode selected): recomputed per partition
        self.generated_random = random.Random(seed * 7919 + 14)
        # and a query no one view maintains, split into internal states (a ranked or aggregating
        # CTE, joined to another master and aggregated by its column): maintained in steps
        self.stepped_random = random.Random(seed * 7919 + 15)
        # and a filter of one table by the date (the harness moves the date a day per round, so
        # that rows cross it both ways: tests/fuzz/check.py)
        self.timed_random = random.Random(seed * 7919 + 16)
        # and such a filter of a LEFT JOIN's null-extended table in its ON instead of WHERE
        self.timed_on_random = random.Random(seed * 7919 + 17)
        # and a HAVING comparing a group's MAX or MIN of such an integer with the day of the month
        self.timed_having_random = random.Random(seed * 7919 + 18)
        self.refused_share = refused_share

    # -- FROM ---------------------------------------------------------------------------------
    def _from(self, block: Block, masters: int, break_rule: str | None = None) -> None:
        """Occurrences joined along EDGES, each by an inner, LEFT or RIGHT join, within the
        rules the docs state (docs/views/outer-join.md) for outer-join chains (an inner join's condition reads no
        occurrence an earlier outer join null-extends; an ON filter reads the null-extended
        side), unless ``break_rule`` names the one to break ("inner after outer", "on preserved")."""
        r = self.random
        if break_rule not in ("inner after outer", "on preserved"):
            break_rule = None
        if not block.occurrences:
            start = r.choice(MASTERS)
            block.occurrences.append(Occurrence(start.name[0] + "1", start))
        broken = False
        while len(block.occurrences) < masters or (break_rule and not broken):
            kind = r.choices(("join", "left join", "right join"), (5, 3, 2))[0]
            if break_rule == "inner after outer" and not broken and any(o.nullable for o in block.occurrences):
                kind = "join"
            attachable = [o for o in block.occurrences if kind != "join" or not o.nullable
                          or (break_rule == "inner after outer" and not broken)]
            if break_rule == "inner after outer" and kind == "join" and not broken:
                attachable = [o for o in block.occurrences if o.nullable] or attachable
                broken = bool([o for o in attachable if o.nullable])
            options = [(occ, edge, side) for occ in attachable for edge in EDGES
                       for side in (0, 1) if edge[side * 2] == occ.master.name]
            occ, edge, side = r.choice(options)
            other = MASTER[edge[2 - side * 2]]
            own_column, other_column = edge[side * 2 + 1], edge[3 - side * 2]
            alias = f"{other.name[0]}{len(block.occurrences) + 1}"
            new = Occurrence(alias, other)
            condition = f"{occ.alias}.{own_column} = {alias}.{other_column}"
            if break_rule == "on preserved" and not broken and kind != "join":
                preserved = new if kind == "right join" else occ
                condition += f" and {self._predicate(preserved)}"
                broken = True
            elif r.random() < 0.25 and (kind != "right join" or len(block.occurrences) == 1):
                # a filter in ON, on the side it may filter (a RIGHT JOIN's null-extended side is
                # everything before it: the docs allow a filter there of a single table only)
                filtered = occ if kind == "right join" else new
                condition += f" and {self._predicate(filtered, r.random() < 0.5)}"
                block.features.add("on filter")
            if kind == "left join" and break_rule != "on preserved" and self.range_random.random() < 0.2:
                condition += f" and {self._both_sides(occ, new)}"
                block.features.add("on both sides")
            if kind == "left join":
                new.nullable = True
                block.features.add("left")
            elif kind == "right join":
                for earlier in block.occurrences:
                    earlier.nullable = True
                block.features.add("right")
            block.features.add("join")
            sharing = [o for o in block.occurrences if any(c.name == own_column for c in o.master.all_columns)]
            if (
                condition == f"{occ.alias}.{own_column} = {alias}.{other_column}"
                and own_column == other_column
                and kind in ("join", "left join")
                and sharing == [occ]  # USING names the one earlier table with that column
                and self.using_random.random() < 0.3
            ):
                block.features.add("using")
                block.joins.append(f"{kind} {{{other.name}}} {alias} using ({own_column})")
            else:
                block.joins.append(f"{kind} {{{other.name}}} {alias} on {condition}")
            block.occurrences.append(new)

    def _both_sides(self, earlier: Occurrence, new: Occurrence) -> str:
        """A condition reading both sides of a LEFT JOIN: a range between numeric columns, or an OR."""
        d = self.range_random

        def numeric(occurrence: Occurrence) -> str:
            return f"{occurrence.alias}.{d.choice([c.name for c in occurrence.master.all_columns if c.kind in 'nd'])}"

        left, right = numeric(earlier), numeric(new)
        return d.choice((
            f"{right} between {left} - 2 and {left} + 2",
            f"{right} >= {left}",
            f"({right} < {left} or {right} is null)",
            f"({right} <> {left} or {earlier.alias}.{earlier.master.key} is null)",
        ))

    def _column(self, block: Block, kinds: str = "ndfs") -> tuple[str, str]:
        """A column of one of the occurrences, of one of ``kinds``: (SQL, kind)."""
        options = [(f"{o.alias}.{c.name}", c.kind) for o in block.occurrences for c in o.master.all_columns
                   if c.kind in kinds]
        return self.random.choice(options)

    def _predicate(self, occurrence: Occurrence, null_tolerant: bool = False) -> str:
        r = self.random
        column = r.choice(occurrence.master.all_columns)
        ref = f"{occurrence.alias}.{column.name}"
        literal = r.choice(LITERALS[column.kind])
        if null_tolerant:  # (true for a NULL: it keeps the rows an outer join null-extends)
            return r.choice((f"{ref} is null", f"coalesce({ref}, {literal}) = {literal}"))
        choices = [f"{ref} = {literal}", f"{ref} <> {literal}", f"{ref} is not null",
                   f"{ref} in ({', '.join(sorted(set(r.sample(LITERALS[column.kind], 2))))})"]
        if column.kind in "ndf":
            choices.append(f"{ref} > {literal}")
        return r.choice(choices)

    def _where(self, block: Block, break_rule: str | None = None) -> None:
        """0-2 WHERE conjuncts on occurrences no outer join null-extends (one on a null-extended
        occurrence with ``break_rule`` "outer where", true for a NULL: refused; one no NULL satisfies
        makes the outer join inner)."""
        r = self.random
        preserved = [o for o in block.occurrences if not o.nullable]
        for _ in range(r.choices((0, 1, 2), (4, 4, 2))[0]):
            block.where.append(self._predicate(r.choice(preserved)))
            block.features.add("where")
        if break_rule == "outer where":
            extended = [o for o in block.occurrences if o.nullable]
            r.random()  # (the draw that chose a null-rejecting condition, kept: the other draws stay as they were)
            block.where.append(self._predicate(r.choice(extended), null_tolerant=True))

    # -- expressions --------------------------------------------------------------------------
    def _expression(self, block: Block, kind: str) -> str:
        """A row-level expression of ``kind`` ("n", "d", "s")."""
        r = self.random
        if kind == "s":
            column, column_kind = self._column(block)
            forms = [column if column_kind == "s" else f"cast({column} as string)"]
            strings = [c for c, k in (self._column(block, "s"),)]
            forms += [f"upper({strings[0]})", f"concat({strings[0]}, '-')", f"coalesce({strings[0]}, 'none')",
                      f"case when {column} is null then 'null' else 'set' end", f"substr({strings[0]}, 1, 3)"]
            choice = r.choice(forms)
        elif kind == "n":
            column, _ = self._column(block, "n")
            other, _ = self._column(block, "n")
            choice = r.choice([column, column, f"{column} + {other}", f"coalesce({column}, -1)",
                               f"length({self._column(block, 's')[0]})",
                               f"case when {column} > 1 then {column} else 0 end"])
        else:  # "d": a decimal (a column, or an integral one cast: not every master has one), a double
            number, _ = self._column(block, "n")
            has_decimal = any(c.kind == "d" for o in block.occurrences for c in o.master.columns)
            column = self._column(block, "d")[0] if has_decimal else f"cast({number} as decimal(10,2))"
            forms = [column, column, f"{column} * 2", f"coalesce({column}, 0)", f"cast({number} as decimal(10,2))",
                     f"{column} - {column}", f"{column} * {self._column(block, 'd')[0] if has_decimal else '1.5'}",
                     f"cast({number} as decimal(6,1)) / 3"]
            doubles = [c for c, k in ((f"{o.alias}.{c.name}", c.kind) for o in block.occurrences
                                      for c in o.master.columns) if k == "f"]
            if doubles:  # a double beside decimals: a UNION ALL widens the column to double
                forms.append(r.choice(doubles))
                block.features.add("double")
            choice = r.choice(forms)
        if choice != column:
            block.features.add("expression")
        return choice

    # -- one SELECT -----------------------------------------------------------------------------
    def _block(self, masters: int, break_rule: str | None = None) -> Block:
        block = Block()
        if break_rule == "outer where":
            masters = max(masters, 2)
            while not any(o.nullable for o in block.occurrences):
                block = Block()
                self._from(block, masters)
        else:
            self._from(block, masters, break_rule)
        self._where(block, break_rule)
        if break_rule is None and self.timed_random.random() < 0.1:
            self._timed(block)
        return block

    def _timed(self, block: Block) -> None:
        """A WHERE conjunct comparing a small integer of an occurrence no outer join null-extends
        with the day of the month (``current_date()``: 1, 2, 0, 1, ... modulo 3 as the harness
        moves the date a day per round), so that rows cross the filter both ways; for 60% of
        the blocks with a LEFT JOIN ... ON, that comparison of the joined table in its ON instead."""
        t = self.timed_random
        occurrence = t.choice([o for o in block.occurrences if not o.nullable])
        left_joined = [
            (at, o) for at, o in enumerate(block.occurrences[1:])
            if block.joins[at].startswith("left join") and " on " in block.joins[at]
        ]
        on = left_joined and self.timed_on_random.random() < 0.6
        at, occurrence = self.timed_on_random.choice(left_joined) if on else (None, occurrence)
        small = [c.name for c in occurrence.master.all_columns
                 if c.kind == "n" and all(v is None or v <= 4 for v in c.values)]
        if occurrence.master.name == "regions":
            small.append(occurrence.master.key)
        if not small:
            return
        column = t.choice(small)
        condition = f"{occurrence.alias}.{column} {t.choice(('>=', '<', '<>'))} dayofmonth(current_date()) % 3"
        if at is not None:
            block.joins[at] += f" and {condition}"
            block.features.add("filter by the time in ON")
        else:
            block.where.append(condition)
        block.features.add("filter by the time")

    def _select(self, block: Block, outputs: list[str], tail: str = "", distinct: bool = False) -> str:
        where = f" where {' and '.join(block.where)}" if block.where else ""
        return f"select {'distinct ' if distinct else ''}{', '.join(outputs)} {block.from_clause()}{where}{tail}"

    def _aggregate_select(self, block: Block, kinds: list[str], global_ok: bool = True,
                          extra: list[str] | None = None, derived_ok: bool = True) -> str:
        """An aggregate SELECT whose outputs have ``kinds``: group keys first (columns,
        expressions, constants), then aggregates; maybe a HAVING over a selected aggregate."""
        r = self.random
        block.features.add("aggregate")
        keys = min(r.choice((0, 1, 1, 2) if global_ok else (1, 1, 2)), len(kinds) - 1)
        outputs, group_by, aggregates = [], [], []
        label = keys == 0 and len(kinds) > 1 and r.random() < 0.3  # a global aggregate's constant label
        for i, kind in enumerate(kinds):
            if label and i == 0:
                outputs.append(f"{r.choice(LABELS)} as c{i}")
                block.features.add("constant label")
            elif i >= keys:
                aggregates.append(self._derived(block, kind, self._aggregate(block, kind), derived_ok))
                outputs.append(f"{aggregates[-1]} as c{i}")
            elif i > 0 and r.random() < 0.2:  # a constant group key, selected beside a grouped one
                outputs.append(f"{CONSTANTS[kind]} as c{i}")
                block.features.add("constant key")
            else:
                group_by.append(self._expression(block, kind))
                outputs.append(f"{group_by[-1]} as c{i}")
        if group_by and derived_ok and self.keyed_random.random() < 0.2:
            # what dbt_utils.generate_surrogate_key writes over the group keys
            parts = " || '-' || ".join(f"coalesce(cast({k} as string), '_null_')" for k in group_by)
            outputs.append(f"md5(cast({parts} as string)) as surrogate")
            block.features.add("expression over group keys")
        tail = f" group by {', '.join(group_by)}" if group_by else ""
        if group_by and r.random() < 0.25:
            aggregate = r.choice(aggregates)
            tail += r.choice((f" having {aggregate} is not null", f" having {aggregate} is null",
                              f" having {aggregate} <> {CONSTANTS[kinds[keys + aggregates.index(aggregate)]]}"))
            block.features.add("having")
        if group_by and derived_ok and self.derived_random.random() < 0.15:
            condition = self.derived_random.choice(("count(*) > 1", "count(*) <= 2"))
            tail += f" and {condition}" if " having " in tail else f" having {condition}"
            block.features.add("having unselected")
        if group_by and derived_ok and self.timed_having_random.random() < 0.05:
            condition = self._timed_extreme(block)
            if condition is not None:
                tail += f" and {condition}" if " having " in tail else f" having {condition}"
                block.features.add("having by the time")
        return self._select(block, outputs + (extra or []), tail)

    def _timed_extreme(self, block: Block) -> str | None:
        """A group's MAX or MIN of a small integer of an occurrence (unselected, so not in a UNION
        ALL branch) compared with the day of the month (as _timed's filters: 1, 2, 0, 1, ... as the
        harness moves the date), so that groups pass and fail as the days pass; None when the block
        has no such integer."""
        t = self.timed_having_random
        small = [f"{o.alias}.{c.name}" for o in block.occurrences for c in o.master.all_columns
                 if c.kind == "n" and all(v is None or v <= 4 for v in c.values)]
        if not small:
            return None
        return (f"{t.choice(('max', 'min'))}({t.choice(small)}) {t.choice(('>=', '<', '<>'))} "
                "dayofmonth(current_date()) % 3")

    def _derived(self, block: Block, kind: str, aggregate: str, derived_ok: bool) -> str:
        """Sometimes ``aggregate`` inside an expression of the same kind (a view that is no UNION
        ALL branch: a branch's expressions over aggregates are refused)."""
        d = self.derived_random
        if not derived_ok or d.random() >= 0.25:
            return aggregate
        block.features.add("expression over aggregates")
        templates = {
            "n": ("{a} + 1", "coalesce({a}, 0)", "cast({a} as int) * 2", "abs({a})"),
            "d": ("round({a}, 1)", "coalesce({a}, 0)", "{a} / count(*)", "{a} * 2", "{a} - 1"),
            "s": ("coalesce({a}, 'none')", "upper({a})", "concat({a}, '-', cast(count(*) as string))"),
        }[kind]
        return d.choice(templates).format(a=aggregate)

    def _aggregate(self, block: Block, kind: str) -> str:
        call = self._unfiltered_aggregate(block, kind)
        if call.startswith("count_if(") or self.filtered_random.random() >= 0.1:
            return call
        f = self.filtered_random
        occurrence = f.choice(block.occurrences)
        column = f.choice(occurrence.master.all_columns)
        ref = f"{occurrence.alias}.{column.name}"
        condition = f.choice((f"{ref} is not null", f"{ref} is null", f"{ref} = {f.choice(LITERALS[column.kind])}"))
        block.features.add("aggregate filter")
        return f"{call} filter (where {condition})"

    def _unfiltered_aggregate(self, block: Block, kind: str) -> str:
        r = self.random
        if kind == "n":
            column, _ = self._column(block)
            integral, _ = self._column(block, "n")
            chosen = r.choice(("count(*)", f"count({column})", f"sum({integral})", f"min({integral})", f"max({integral})"))
            if chosen == f"count({column})" and self.spelling_random.random() < 0.3:
                block.features.add("count_if")
                return f"count_if({column} is not null)"
            if self.recomputed_random.random() < 0.12:
                block.features.add("recomputed aggregate")
                return self.recomputed_random.choice(
                    (f"count(distinct {column})", f"sum(distinct {integral})", f"bit_or({integral})")
                )
            return chosen
        if kind == "d":
            decimal = self._expression(block, "d")
            integral, _ = self._column(block, "n")
            chosen = r.choice((f"sum({decimal})", f"min({decimal})", f"max({decimal})", f"avg({decimal})",
                               f"avg({decimal})", f"avg({integral})"))
            if self.recomputed_random.random() < 0.12:
                block.features.add("recomputed aggregate")
                return self.recomputed_random.choice(
                    (f"sum(distinct {decimal})", f"avg(distinct {decimal})")
                )
            return chosen
        string = self._expression(block, "s")
        return r.choice((f"min({string})", f"max({string})"))

    # -- whole definitions ----------------------------------------------------------------------
    def definition(self, number: int) -> Definition:
        return self._definition(number)

    def _definition(self, number: int) -> Definition:
        r = self.random
        shape = r.choices(("rows", "aggregate", "distinct", "union"), (4, 4, 1, 2))[0]
        kinds = [r.choice("nds") for _ in range(r.choice((2, 3, 3, 4)))]
        refusal = self._refusal(shape) if r.random() < self.refused_share else None
        features: set[str] = set()
        if shape == "union":
            branches = []
            for _ in range(r.choice((2, 2, 3))):
                block = self._block(r.choice((1, 1, 2, 3)))
                branch_shape = r.choices(("rows", "aggregate", "distinct"), (5, 4, 1))[0]
                branches.append(self._shaped(block, branch_shape, kinds, union_branch=True))
                features |= block.features
            features.add("union")
            sql = " union all ".join(branches)
            # (not over a branch with DISTINCT or HAVING: analysis/distribute.py leaves those nested)
            if refusal is None and self.wrapped_random.random() < 0.35 and not re.search(r"select distinct| having ", sql):
                sql = self._wrapped_union(sql, len(kinds))
                features.add("union in a subquery")
        else:
            block = self._block(r.choice((1, 2, 2, 3, 3, 4)), refusal)
            sql = self._shaped(block, shape, kinds, refusal=refusal)
            if refusal is None and len(block.occurrences) >= 3 and self.nested_random.random() < 0.4:
                sql = self._nested_join(block, sql)
            if shape == "distinct" and refusal is None and self.wrapped_distinct_random.random() < 0.4:
                sql = (f"with d as ({sql}) select * from d" if self.wrapped_distinct_random.random() < 0.5
                       else f"select * from ({sql}) as d")
                block.features.add("distinct in a subquery")
            if shape == "rows" and refusal is None and self.pulled_random.random() < 0.35:
                sql = self._joined_aggregate(block, sql)
            elif shape == "rows" and refusal is None and self.ranked_random.random() < 0.3:
                block, sql = self._one_table(self.ranked_random, self._ranked, kinds)
            elif shape == "rows" and refusal is None and self.windowed_random.random() < 0.25:
                block, sql = self._one_table(self.windowed_random, self._windowed, kinds)
            elif shape == "rows" and refusal is None and self.generated_random.random() < 0.2:
                sql = self._generated_rows(block, sql)
            elif shape == "rows" and refusal is None and self.stepped_random.random() < 0.2:
                block, sql = self._stepped()
            if refusal == "inner after outer":
                # its condition discards the rows the outer join null-extends: that join is inner
                # (analysis/null_rejection.py), and the definition maintained
                refusal = None
                block.features.add("inner join after an outer one (made inner)")
            features |= block.features
        construct = None
        if refusal is not None:
            sql, construct = self._refused(sql, refusal)
            features.add(f"refused: {refusal}")
        return Definition(f"g{number:04d}", sql, construct, tuple(sorted(features)))

    def _one_table(self, stream: random.Random, shaped, kinds: list[str]) -> tuple[Block, str]:
        """One table's rows (outputs of ``kinds``) made into ``shaped(block, sql, outputs)``, all
        drawn from ``stream`` (the main stream is consumed as before)."""
        main, self.random = self.random, stream
        try:
            block = self._block(1)
            return block, shaped(block, self._shaped(block, "rows", kinds), len(kinds))
        finally:
            self.random = main

    def _joined_aggregate(self, block: Block, sql: str) -> str:
        """``sql`` (rows) with an aggregate of one master by the column of a join edge (or a
        SELECT DISTINCT of it), in a CTE or derived table, inner or LEFT joined on it to an
        occurrence no outer join null-extends; every occurrence's key selected too (the rows of
        the view are theirs), and the aggregate's columns."""
        p = self.pulled_random
        options = [(occ, edge, side) for occ in block.occurrences if not occ.nullable for edge in EDGES
                   for side in (0, 1) if edge[side * 2] == occ.master.name]
        if not options or f" {block.from_clause()}" not in sql:  # (not over a join rewritten as nested)
            return sql
        occ, edge, side = p.choice(options)
        other = MASTER[edge[2 - side * 2]]
        own_column, other_column = edge[side * 2 + 1], edge[3 - side * 2]
        a = "a1"
        numeric = [c.name for c in other.all_columns if c.kind in "nd"]
        any_column = p.choice(other.all_columns).name
        main, self.random = self.random, p  # (the main stream is not consumed)
        try:
            where = f" where {self._predicate(Occurrence(a, other))}" if p.random() < 0.4 else ""
        finally:
            self.random = main
        # the aggregated master's rows LEFT joined from another master's (jaffle shop's payments left
        # join orders grouped by the orders' customer): the group of rows matching none has a NULL k,
        # which the join back discards
        feeders = [(e[0], e[1], e[3]) for e in EDGES if e[2] == other.name and e[0] != other.name]
        feeder = p.choice(feeders) if feeders and p.random() < 0.25 else None
        source = f"{{{other.name}}} {a}"
        if feeder is not None:
            source = f"{{{feeder[0]}}} b1 left join {source} on b1.{feeder[1]} = {a}.{feeder[2]}"
            block.features.add("aggregate of a left join discarding its null group")
        if p.random() < 0.2:
            body = f"select distinct {a}.{other_column} as k from {source}{where}"
            columns = []
        else:
            aggregates = [("n", "count(*)"), ("s", f"sum({a}.{p.choice(numeric)})"),
                          ("m", f"max({a}.{any_column})"), ("d", f"count(distinct {a}.{any_column})"),
                          ("z", f"coalesce(sum({a}.{p.choice(numeric)}), 0)")]
            chosen = p.sample(aggregates, p.randint(1, 3))
            grouping = "all" if p.random() < 0.25 else f"{a}.{other_column}"  # GROUP BY ALL: the same groups
            body = (f"select {a}.{other_column} as k, " + ", ".join(f"{e} as {n}" for n, e in chosen)
                    + f" from {source}{where} group by {grouping}")
            if grouping == "all":
                block.features.add("group by all")
            columns = [n for n, _ in chosen]
        if p.random() < 0.3:
            columns.append("k")
        kind = p.choice(("join", "left join"))
        keys = [f"{o.alias}.{o.master.key} as key_{o.alias}" for o in block.occurrences]
        extra = keys + [f"g.{c} as g_{c}" for c in columns]
        from_clause = block.from_clause()
        head, rest = sql.split(" " + from_clause, 1)
        joined = f"{kind} g on g.k = {occ.alias}.{own_column}"
        block.features.update({"aggregate joined back", "aggregate", "join"} | ({"left"} if kind == "left join" else set()))
        if p.random() < 0.5:
            return f"with g as ({body}) {head}, {', '.join(extra)} {from_clause} {joined}{rest}"
        return f"{head}, {', '.join(extra)} {from_clause} {joined.replace(' g ', f' ({body}) g ', 1)}{rest}"

    def _stepped(self) -> tuple[Block, str]:
        """A query no one view maintains, split into internal states (refresh/units.py): a CTE
        keeping one master's latest row per value of a column (ROW_NUMBER ordered to the key; of
        the master alone, or LEFT JOINed to the master a column of it refers to), aggregating it
        by that column, a UNION of two selections of it, or a UNION ALL of a selection and another
        selection or an aggregate, read by a query that regroups it by a value it computed,
        ranks it in windows partitioned by that value, or joins it on that value (inner, or LEFT
        from the other master) to another master. Drawn from its own stream."""
        st = self.stepped_random
        master = st.choice(MASTERS)
        integers = [c.name for c in master.all_columns if c.kind == "n"]
        by = st.choice([c.name for c in master.columns])
        value = st.choice(integers)
        kind = st.choice(("ranked", "aggregate", "union", "ranked join", "union all"))
        # (joined on the other master's key: one row per row of this one, ranked to its key)
        edges = [e for e in EDGES if e[0] == master.name and e[3] == MASTER[e[2]].key]
        if kind == "ranked join" and not edges:
            kind = "ranked"
        if kind == "ranked join":  # a latest row per value over a join: recomputed per value, keyed by it
            edge = st.choice(edges)
            other = MASTER[edge[2]]
            ordered = st.choice([f"a1.{c.name}" for c in master.all_columns] + [f"b1.{c.name}" for c in other.columns])
            order = f"{ordered}{st.choice(('', ' desc', ' nulls last'))}, a1.{master.key} desc"
            body = (
                f"select k, v, w from (select a1.{by} as k, a1.{value} as v, b1.{st.choice(other.columns).name} as w, "
                f"row_number() over (partition by a1.{by} order by {order}) as rn from {{{master.name}}} a1 "
                f"left join {{{other.name}}} b1 on a1.{edge[1]} = b1.{edge[3]}) r where rn = 1"
            )
        elif kind == "union all":  # each branch keyed by its own key (an aggregate branch: its group key)
            second = (
                f"select max(a1.{master.key}), a1.{by}, count(*) from {{{master.name}}} a1 group by a1.{by}"
                if st.random() < 0.5
                else f"select a1.{master.key}, a1.{by}, a1.{value} + 1 from {{{master.name}}} a1 where a1.{value} > 1"
            )
            body = (
                f"(select a1.{master.key} as id, a1.{by} as k, a1.{value} as v from {{{master.name}}} a1 "
                f"where a1.{value} is not null) union all ({second})"
            )
        elif kind == "union":  # distinct rows: keyed by every column
            body = (
                f"select a1.{by} as k, a1.{value} as v from {{{master.name}}} a1 union "
                f"select a1.{by}, a1.{value} + 1 from {{{master.name}}} a1 where a1.{value} is not null"
            )
        elif kind == "ranked":
            ordered = st.choice([c.name for c in master.all_columns])
            order = f"a1.{ordered}{st.choice(('', ' desc', ' nulls last'))}, a1.{master.key} desc"
            body = (
                f"select k, v from (select a1.{by} as k, a1.{value} as v, row_number() over "
                f"(partition by a1.{by} order by {order}) as rn from {{{master.name}}} a1) r where rn = 1"
            )
        else:
            body = (
                f"select a1.{by} as k, count(*) as n, sum(a1.{value}) as v from {{{master.name}}} a1 "
                f"where a1.{value} is not null group by a1.{by}"
            )
        block = Block(features={"split into states", f"{kind} state"})
        measure = "v" if kind != "aggregate" or st.random() < 0.5 else "n"
        top = st.choice(("regrouped", "windowed", "joined"))
        if top == "regrouped":
            block.features.add("aggregate")
            sql = f"select s.{measure} as g, count(*) as groups, count(s.k) as keys, max(s.k) as top_key from s group by s.{measure}"
        elif top == "windowed":
            block.features.add("windowed")
            sql = (
                f"select s.k, s.{measure} as g, rank() over (partition by s.{measure} order by s.k) as place, "
                f"count(*) over (partition by s.{measure}) as peers from s"
            )
        else:
            other = st.choice(MASTERS)
            column = st.choice([c.name for c in other.all_columns if c.kind == "n"])
            left_join = st.random() < 0.3
            block.features.update({"join"} | ({"left"} if left_join else set()))
            sql = (
                f"select b.{other.key} as b_key, s.k, s.{measure} as g from {{{other.name}}} b "
                f"{'left join' if left_join else 'join'} s on s.{measure} = b.{column}"
            )
        if st.random() < 0.3:  # a derived table, not a CTE (made one to be cut)
            block.features.add("state in a derived table")
            return block, re.sub(r"\b(from|join) s\b", lambda m: f"{m[1]} ({body}) s", sql)
        return block, f"with s as ({body}) {sql}"

    def _wrapped_union(self, sql: str, outputs: int) -> str:
        """The UNION ALL ``sql`` (columns ``c0``...) in a CTE or a derived table (maybe renaming
        its columns with a column list, maybe through a second CTE), its columns selected as they
        are: all of them, maybe in another order, maybe renamed."""
        w = self.wrapped_random
        names = [f"c{i}" for i in range(outputs)]
        renamed = w.random() < 0.3
        if renamed:
            names = [f"u{i}" for i in range(outputs)]
        picked = w.sample(range(outputs), outputs)  # every column (a DISTINCT branch's keys all kept)
        listed = ", ".join(f"u.{names[i]}" + (f" as c{i}" if w.random() < 0.5 or renamed else "") for i in picked)
        columns = "*" if w.random() < 0.4 else listed
        column_list = f"({', '.join(names)})" if renamed else ""
        form = w.choice(("cte", "derived", "two ctes"))
        if form == "derived":
            return f"select {columns} from ({sql}) as u{column_list}"
        if form == "cte":
            return f"with u{column_list} as ({sql}) select {columns} from u"
        return f"with v{column_list} as ({sql}), u as (select * from v) select {columns} from u"

    def _nested_join(self, block: Block, sql: str) -> str:
        """``sql`` with its first tables joined in a CTE or derived table (``j``, each column
        ``<alias>_<column>``), the rest joined to it; when the join after them is an inner one
        and nothing after them is a RIGHT JOIN, maybe that table first and ``j`` joined to it (an
        inner join's sides swapped). A WHERE conjunct of those tables alone goes inside."""
        d = self.nested_random
        count = d.randrange(2, len(block.occurrences))
        inside, rest = block.occurrences[:count], block.joins[count - 1:]
        if any(" using (" in j for j in rest):
            return sql
        names = {o.alias for o in inside}
        from_clause = block.from_clause()
        start = sql.index(from_clause)
        head, tail = sql[:start], sql[start + len(from_clause):]
        where = f" where {' and '.join(block.where)}" if block.where else ""
        assert tail.startswith(where)
        tail = tail[len(where):]

        def reads(text: str) -> set[str]:
            return set(re.findall(r"\b([a-z]\d+)\.", text))

        inner_where = [w for w in block.where if reads(w) <= names]
        outer_where = [w for w in block.where if w not in inner_where]

        def moved(text: str) -> str:
            return re.sub(r"\b([a-z]\d+)\.(\w+)", lambda m: f"j.{m[1]}_{m[2]}" if m[1] in names else m[0], text)

        columns = ", ".join(f"{o.alias}.{c.name} as {o.alias}_{c.name}" for o in inside for c in o.master.all_columns)
        first = inside[0]
        body = (f"select {columns} from {{{first.master.name}}} {first.alias}"
                + "".join(f" {j}" for j in block.joins[:count - 1])
                + (f" where {' and '.join(inner_where)}" if inner_where else ""))
        as_cte = d.random() < 0.5
        nested = "j" if as_cte else f"({body}) j"
        swap = (rest[0].startswith("join ") and not any(j.startswith("right join") for j in rest)
                and not any(j.startswith("right join") for j in block.joins[:count - 1]) and d.random() < 0.5)
        if swap:
            table, condition = re.match(r"join (\{\w+\} \w+) on (.*)$", rest[0]).groups()
            from_text = f"from {table} join {nested} on {moved(condition)}" + "".join(f" {moved(j)}" for j in rest[1:])
        else:
            from_text = f"from {nested}" + "".join(f" {moved(j)}" for j in rest)
        outer = f" where {' and '.join(moved(w) for w in outer_where)}" if outer_where else ""
        block.features.add("nested join")
        sql = f"{moved(head)}{from_text}{outer}{moved(tail)}"
        return f"with j as ({body}) {sql}" if as_cte else sql

    def _ranked(self, block: Block, sql: str, outputs: int) -> str:
        """``sql`` (one table's rows, outputs ``c0``...) ranked in window partitions, its top rows
        kept: ROW_NUMBER (its ORDER BY ends with the key: the query is deterministic), RANK or
        DENSE_RANK (ties ranked alike), in a derived table or a CTE, maybe a filter on the ranked rows."""
        r = self.ranked_random
        block.features.add("ranked")
        occurrence = block.occurrences[0]
        columns = [f"{occurrence.alias}.{c.name}" for c in occurrence.master.all_columns]
        key = f"{occurrence.alias}.{occurrence.master.key}"
        partition = r.sample([c for c in columns if c != key], r.choice((1, 1, 2)))
        order = [f"{c}{r.choice(('', ' desc', ' desc nulls last', ' nulls last'))}" for c in r.sample(columns, r.choice((1, 2)))]
        function = r.choice(("row_number", "row_number", "rank", "dense_rank"))
        if function == "row_number" and not any(o.split(" ")[0] == key for o in order):
            order.append(key)
        window = f"{function}() over (partition by {', '.join(partition)} order by {', '.join(order)}) as rk"
        inner = sql.replace(" from {", f", {window} from {{", 1)
        kept = r.choice(("rk = 1", "rk = 1", "rk <= 2", "rk < 3"))
        if r.random() < 0.3:
            kept += f" and c{r.randrange(outputs)} is not null"
            block.features.add("ranked filter")
        if r.random() < 0.5:
            return f"select * from ({inner}) as ranked_rows where {kept}"
        listed = ", ".join(f"c{i}" for i in range(outputs))
        return f"with ranked_rows as ({inner}) select {listed} from ranked_rows where {kept}"

    def _windowed(self, block: Block, sql: str, outputs: int) -> str:
        """``sql`` (one table's rows, outputs ``c0``...) with one to three windows ``w0``... that
        partition by common columns (one may add a column): LEAD/LAG, aggregates over the whole
        partition, a running one (RANGE peers) or over a ROWS frame, ROW_NUMBER, FIRST_VALUE. Every
        order-dependent window's ORDER BY ends with the key (the query is deterministic). In the
        SELECT itself, or in a derived table or CTE that the query reads, maybe filtering on them."""
        r = self.windowed_random
        block.features.add("windowed")
        occurrence = block.occurrences[0]
        alias, master = occurrence.alias, occurrence.master
        key = f"{alias}.{master.key}"
        others = [c for c in master.columns]
        partition = [f"{alias}.{c.name}" for c in r.sample(others, r.choice((1, 1, 2)))]
        summable = [f"{alias}.{c.name}" for c in master.all_columns if c.kind in "nd"]
        columns = [f"{alias}.{c.name}" for c in master.all_columns]
        windows = []
        for _ in range(r.choice((1, 2, 2, 3))):
            parts = list(partition)
            if r.random() < 0.3:
                parts.append(r.choice([c for c in columns if c not in parts]))
            over = f"partition by {', '.join(parts)}"
            ordered = f"{r.choice(columns)}{r.choice(('', ' desc', ' nulls last'))}"
            kind = r.choice(("lead", "lag", "total", "running", "frame", "row_number", "first_value"))
            if kind in ("lead", "lag"):
                offset = r.choice(("", "", ", 2"))
                windows.append(f"{kind}({r.choice(columns)}{offset}) over ({over} order by {ordered}, {key})")
            elif kind == "total":
                windows.append(f"{r.choice(('sum', 'min', 'max'))}({r.choice(summable)}) over ({over})")
            elif kind == "running":  # RANGE: peers of the ORDER BY counted together, as the query says
                windows.append(f"{r.choice(('sum', 'count'))}({r.choice(summable)}) over ({over} order by {ordered})")
            elif kind == "frame":
                windows.append(
                    f"{r.choice(('sum', 'max'))}({r.choice(summable)}) over ({over} order by {ordered}, {key} "
                    "rows between 1 preceding and current row)"
                )
            elif kind == "row_number":
                windows.append(f"row_number() over ({over} order by {ordered}, {key})")
            else:
                windows.append(
                    f"first_value({r.choice(columns)}) over ({over} order by {ordered}, {key} "
                    "rows between unbounded preceding and unbounded following)"
                )
        named = ", ".join(f"{w} as w{i}" for i, w in enumerate(windows))
        inner = sql.replace(" from {", f", {named} from {{", 1)
        if r.random() < 0.3:
            return inner
        listed = ", ".join([f"c{i}" for i in range(outputs)] + [f"w{i}" for i in range(len(windows))])
        kept = ""
        if r.random() < 0.5:
            block.features.add("windowed filter")
            kept = " where " + r.choice((
                f"w{r.randrange(len(windows))} is not null",
                f"w{r.randrange(len(windows))} is null or c{r.randrange(outputs)} is not null",
                f"c{r.randrange(outputs)} is not null",
            ))
        if r.random() < 0.5:
            return f"select {listed} from ({inner}) as windowed_rows{kept}"
        return f"with windowed_rows as ({inner}) select {listed} from windowed_rows{kept}"

    def _generated_rows(self, block: Block, sql: str) -> str:
        """``sql`` (rows) with rows generated from those of an occurrence no outer join null-extends:
        the parts of one of its string columns split at 'e', by a LATERAL VIEW (OUTER: a row of
        no part kept with NULLs), POSEXPLODE with the position, or an EXPLODE selected (its rows
        only: the generator alone in the SELECT's generators)."""
        g = self.generated_random
        strings = [(o, c) for o in block.occurrences if not o.nullable for c in o.master.all_columns if c.kind == "s"]
        if not strings or f" {block.from_clause()}" not in sql:
            return sql
        occurrence, column = g.choice(strings)
        parts = f"split({occurrence.alias}.{column.name}, 'e')"
        block.features.add("generated rows")
        how = g.choice(("lateral", "lateral outer", "positions", "selected"))
        if how == "selected":
            return sql.replace(" from {", f", explode({parts}) as gp from {{", 1)
        if how == "positions":
            view, columns = f"lateral view posexplode({parts}) g as gi, gp", "g.gi, g.gp"
        else:
            view, columns = f"lateral view{' outer' if how.endswith('outer') else ''} explode({parts}) g as gp", "g.gp"
        with_view = sql.replace(block.from_clause(), f"{block.from_clause()} {view}", 1)
        return with_view.replace(" from {", f", {columns} from {{", 1)

    def _refusal(self, shape: str) -> str:
        """A construct to refuse, that fits ``shape`` (a UNION ALL's are around it: every branch
        would need the same)."""
        if shape == "union":
            return self.random.choice(("limit", "set operation"))
        choices = ["window", "nondeterministic", "limit", "subquery", "set operation", "full outer",
                   "outer where", "inner after outer", "on preserved"]
        if shape == "aggregate":
            choices.append("order-dependent aggregate")
        return self.random.choice(choices)

    def _shaped(self, block: Block, shape: str, kinds: list[str], union_branch: bool = False,
                refusal: str | None = None) -> str:
        r = self.random
        extra: list[str] = []
        if refusal == "window":
            extra.append("row_number() over (order by 1) as rn")
        elif refusal == "nondeterministic":
            block.where.append(f"{r.choice(NONDETERMINISTIC)} is not null")
        elif refusal == "subquery":
            # a semi or anti join or a correlated scalar subquery: maintained per partition when the
            # query is partitioned alike (drawn apart: the other draws stay as they were)
            first = block.occurrences[0]
            key = f"{first.alias}.{first.master.key}"
            block.where.append(self.spelling_random.choice((
                f"{key} in (select region_id from {{regions}})",
                f"{key} not in (select region_id from {{regions}})",
                f"exists (select 1 from {{regions}} sq where sq.region_id = {key} and sq.rank > 1)",
                f"not exists (select 1 from {{regions}} sq where sq.region_id = {key})",
                f"coalesce((select max(sq.rank) from {{regions}} sq where sq.region_id = {key}), 0) < 3",
            )))
        elif refusal == "full outer":
            if len(block.occurrences) == 1:
                self._from(block, 2)  # one more occurrence, joined
            at = len(block.joins) - 1
            kind, rest = block.joins[at].split(" {", 1)
            block.joins[at] = "full outer join {" + rest
        elif refusal == "order-dependent aggregate":
            column, _ = self._column(block)
            extra.append(f"first({column}) as nd")
        if shape == "aggregate":
            # a UNION ALL branch groups (its groups are its rows) and selects its aggregates as such
            return self._aggregate_select(block, kinds, not union_branch, extra, derived_ok=not union_branch)
        outputs = [f"{self._expression(block, k)} as c{i}" for i, k in enumerate(kinds)] + extra
        if shape == "distinct":
            block.features.add("distinct")
            return self._select(block, outputs, distinct=True)
        return self._select(block, outputs)

    @staticmethod
    def _refused(sql: str, refusal: str) -> tuple[str, str]:
        """``sql`` with the refusals made around it; (SQL, what the refusal must name)."""
        if refusal == "limit":
            return f"{sql} limit 5", "limit 5"
        if refusal == "subquery":
            if "(select max(" in sql:
                return sql, "(select max("
            return sql, "exists(select" if "exists (select" in sql else "in (select"
        if refusal.startswith("set operation"):
            operation = "union" if len(sql) % 3 == 0 else ("intersect" if len(sql) % 3 == 1 else "except")
            return f"{sql} {operation} {sql}", operation
        named = {"window": "over (", "nondeterministic": "", "full outer": "full outer join",
                 "order-dependent aggregate": "first(", "outer where": "the where clause filters",
                 "on preserved": "reads only the preserved side",
                 }[refusal]
        if refusal == "nondeterministic":
            named = next(f for f in NONDETERMINISTIC if f in sql).rstrip(")").rstrip("(")
        return sql, named

    def definitions(self, count: int) -> list[Definition]:
        return [lifted(self.definition(n)) for n in range(count)]


# refusals (of the outer-join rules, set operations, FULL joins) that a query partitioned alike
# lifts: its rows recomputed by partition as written (analysis/partitionwise.py), it is checked as
# maintained
LIFTED_BY_PARTITIONS = (
    "the where clause filters",
    "reads only the preserved side",
    "union",
    "intersect",
    "except",
    "full outer join",
    "in (select",
    "exists(select",
    "(select max(",
)


def analysis_tables() -> dict:
    """The masters as the analysis reads them (``shop.<name>``, their columns and key): what a
    definition's SQL without placeholders names."""
    from dbt_incremental_mv.analysis import MasterTable

    return {
        f"shop.{m.name}": MasterTable(f"shop.{m.name}", tuple((c.name, c.spark_type) for c in m.all_columns), (m.key,))
        for m in MASTERS
    }


def lifted(definition: Definition) -> Definition:
    """``definition``, maintained when the refusal it was drawn for is one LIFTED_BY_PARTITIONS
    and the analysis maintains it per partition, or when the query, refused as one view, splits
    into internal states the materialization maintains in steps (refresh/units.py; not when it
    reads the clock); its rows are then checked on Spark like any other's."""
    if definition.refused is None:
        return definition
    from dbt_incremental_mv.analysis import UnsupportedViewError, ViewClass, analyze_view
    from dbt_incremental_mv.analysis.clock import Clock, sql_reads_clock
    from dbt_incremental_mv.analysis.states import split_into_states

    tables = analysis_tables()
    sql = definition.sql()
    clock = Clock.of("2026-12-01") if sql_reads_clock(sql) else None  # (any day: the shape is the same)
    try:
        view = analyze_view(sql, tables, clock)
    except UnsupportedViewError:
        if clock is not None or split_into_states(sql, tables) is None:
            return definition
        return Definition(definition.name, definition.template, None, (*definition.features, "in steps"))
    if definition.refused not in LIFTED_BY_PARTITIONS or view.view_class is not ViewClass.PER_PARTITION:
        return definition
    return Definition(definition.name, definition.template, None, (*definition.features, "per partition"))


CONSTANTS = {"n": "-1", "d": "cast(0 as decimal(10,2))", "s": "'k'"}
LABELS = ("'all'", "1", "cast(null as string)", "concat('v', '2')")
# (session-dependent, not the clock: a run fixes the clock, analysis/clock.py)
NONDETERMINISTIC = ("rand()", "uuid()", "current_user()")
