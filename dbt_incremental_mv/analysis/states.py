"""Intermediate states: how a query the analysis refuses as one view splits into views it accepts.

A dbt model often computes, in a CTE, something a fast refresh maintains well on its own (the
orders per customer, the latest row per key) and joins or aggregates it again, which one view
cannot maintain. Such a model is maintained in steps: the CTE as a ``fast_refresh`` model of its
own that logs its changes (``mv_log=true``), read here with ``ref()``, and this query over it.
:func:`split_into_states` finds such a split, checked by the analysis itself: every state is
accepted as a view of its own, with a key unique in its rows (its log's key), and the query
reading the states in place of the CTEs is accepted too. The refusal then names the split (what to
do), instead of only what blocks.

Top-level CTEs are cut (and, when that finds no split, derived tables made CTEs), and only where
the state's key follows from its shape: the group keys of an aggregate (by name, expression or
position), the columns of a DISTINCT or UNION, the PARTITION BY of a latest-row-per-key
(``ROW_NUMBER() ... = 1``, of one table or of a join), the keys of the tables a join or a window
combines, each branch's own key after its number for a UNION ALL. Pure Python, like the rest of
the analysis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.eliminate_subqueries import eliminate_subqueries
from sqlglot.optimizer.qualify_columns import qualify_columns

from dbt_incremental_mv.analysis.analyze import analyze_view
from dbt_incremental_mv.analysis.clock import Clock
from dbt_incremental_mv.analysis.errors import UnsupportedViewError
from dbt_incremental_mv.analysis.links import key_links
from dbt_incremental_mv.analysis.model import MasterTable, RankFunction, ViewClass, ViewDefinition
from dbt_incremental_mv.analysis.resolved import split_conjuncts
from dbt_incremental_mv.analysis.resolver import Resolver
from dbt_incremental_mv.analysis.union import BRANCH_COLUMN

# The schema the query over the states reads them from (a placeholder: the user names the models).
STATE_SCHEMA = "mv_state"
# A state whose key may be NULL (a group key, a PARTITION BY column: a change log identifies rows
# by values a comparison matches) also selects this column, its key written as one string that is
# never NULL (each key value as text in a JSON array: NULL and the text 'null' differ), by which
# its log is keyed; the query over it does not read it.
STATE_KEY = "mv_state_key"
# The most CTEs a split is looked for among, and the most analyses a search makes (one analysis of a
# large query takes a tenth of a second; a split is looked for only when the query is refused).
MAX_CTES = 24
MAX_ANALYSES = 48


class _OverBudget(Exception):
    pass


# what a CTE does that a query reading it may not be able to maintain
_SHAPES = (exp.Group, exp.Window, exp.Distinct, exp.Union, exp.Intersect, exp.Except)


@dataclass(frozen=True)
class State:
    """A CTE maintained as a view of its own: its ``name``, the query it is (the CTEs it reads
    inlined, the earlier states read as tables), its key and the class of view it is."""

    name: str
    sql: str
    key: tuple[str, ...]
    view_class: ViewClass
    inlined: tuple[str, ...] = ()  # the CTEs it reads that are not states: part of its model
    # the columns its change log is keyed by: ``key``, or where that may be NULL (group keys,
    # PARTITION BY columns) STATE_KEY, a column ``sql`` adds that is never NULL (refresh/units.py)
    log_key: tuple[str, ...] = ()
    # the columns its table is kept sorted by (an indexed join state, analysis/indexed.py: the
    # column a dimension's changes look it up by); () for the view classes' own layout
    sort_by: tuple[str, ...] = ()

    def described(self) -> str:
        reads = (
            f", with the CTE{'s' if len(self.inlined) > 1 else ''} {', '.join(self.inlined)} it reads"
            if self.inlined
            else ""
        )
        key = f"key {', '.join(self.key)}" if self.key else "each branch keyed by its number and its own key"
        return f"{self.name} ({_a(self.view_class)}, {key}{reads})"


@dataclass(frozen=True)
class StateSplit:
    """The states, in the order they refresh, the class of the query over them and that query
    (the states read as tables of STATE_SCHEMA)."""

    states: tuple[State, ...]
    view_class: ViewClass
    sql: str = ""
    # why a view accepted as one is maintained in steps (analysis/indexed.py), in words; "" when
    # it is refused as one view
    indexed: str = ""
    # ... and the alias of the dimension in the query over the state (its table is sorted by its key)
    indexed_alias: str = ""

    def described(self) -> str:
        """The steps in words, for the log line, the refresh history and explain_fast_refresh."""
        one = len(self.states) == 1
        why = f" ({self.indexed})" if self.indexed else ""
        return (
            f"maintained in {len(self.states) + 1} steps: the internal state{'' if one else 's'} "
            f"{', '.join(s.described() for s in self.states)}, then the query over "
            f"{'it' if one else 'them'}, {_a(self.view_class)}{why}"
        )

    def advice(self) -> str:
        """What the user does to have the model maintained in these steps."""
        described = ", ".join(s.described() for s in self.states)
        one = len(self.states) == 1
        return (
            f"It can be fast refreshed in {len(self.states) + 1} steps: make {'the CTE' if one else 'the CTEs'} "
            f"{described} {'a fast_refresh model' if one else 'fast_refresh models'} of {'its' if one else 'their'} "
            f"own with mv_log=true, declare {'its' if one else 'their'} change "
            f"log{'' if one else 's'} as {'a source' if one else 'sources'} (meta.mv_log with {'that key' if one else 'those keys'}) and read "
            f"{'it' if one else 'them'} here with ref(): the query over {'it' if one else 'them'} is then "
            f"{_a(self.view_class)}"
        )


def _a(view_class: ViewClass) -> str:
    """``an aggregate view``, ``a per partition view``: the class in words."""
    words = view_class.value.replace("_", " ")
    return f"{'an' if words[0] in 'aeiou' else 'a'} {words} view"


def split_into_states(sql: str, masters: Mapping[str, MasterTable], clock: Clock | None = None) -> StateSplit | None:
    """A split of ``sql`` (refused by analyze_view) into states and a query over them, each
    accepted, with as few states as this finds (one, else every CTE that can be one, then those
    it can do without); None when there is none. The CTEs are cut as written; when that finds no
    split, the query's derived tables (subqueries in FROM and JOIN) are CTEs too."""
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except SqlglotError:
        return None
    if not isinstance(tree, exp.Select):
        return None
    found = _split(tree, masters, clock)
    if found is None and any(isinstance(s.parent, (exp.From, exp.Join)) for s in tree.find_all(exp.Subquery)):
        try:
            hoisted = eliminate_subqueries(tree.copy())
        except Exception:  # noqa: BLE001 - a query sqlglot cannot rewrite is cut as written only
            return None
        if not isinstance(hoisted, exp.Select):
            return None
        tree = hoisted
        found = _split(tree, masters, clock)
    if found is None:
        joins = _joins_apart(tree, masters)
        found = _split(joins[0], masters, clock, joins[1]) if joins is not None else None
    return found


def _split(
    tree: exp.Select,
    masters: Mapping[str, MasterTable],
    clock: Clock | None,
    joins: Mapping[str, tuple[str, ...]] | None = None,
) -> StateSplit | None:
    """A split of ``tree`` cutting its top-level CTEs; ``joins``: those _joins_apart made, by name,
    with the columns their key is."""
    with_ = tree.args.get("with_")
    if with_ is None or with_.args.get("recursive") or not 0 < len(with_.expressions) <= MAX_CTES:
        return None
    ctes = {cte.alias_or_name.casefold(): cte.this for cte in with_.expressions}
    if len(ctes) != len(with_.expressions):
        return None
    order = list(ctes)
    try:
        return _search(_Splitter(tree, ctes, order, masters, clock, joins))
    except _OverBudget:
        return None
    except Exception:  # noqa: BLE001 - advice only: a query the search cannot handle gets none, never an error
        return None


def _search(split: _Splitter) -> StateSplit | None:
    # one state, the latest CTE first (it covers the most), among those that group, rank or window
    # their rows, themselves or in the CTEs they read (what a query over them may not maintain);
    # else every CTE that can be one
    for name in reversed(split.order):
        if name not in split.joins and not any(split.ctes[n].find(*_SHAPES) for n in (name, *split.reads[name])):
            continue
        found = split.attempt([name])
        if found is not None:
            return found
    chosen = split.every_state()
    found = split.attempt(chosen) if chosen else None
    if found is None:
        return None
    for name in list(chosen):  # do without what is not needed
        fewer = [n for n in chosen if n != name]
        smaller = split.attempt(fewer) if fewer else None
        if smaller is not None:
            chosen, found = fewer, smaller
    return found


# the CTE _joins_apart gives the joined rows of a query that groups, windows or deduplicates them
JOINED = "joined"
MAX_KEYS_ANALYSED = 8  # the most CTEs read by such joins whose key is found by analysing them


def _joins_apart(
    tree: exp.Select, masters: Mapping[str, MasterTable]
) -> tuple[exp.Select, dict[str, tuple[str, ...]]] | None:
    """``tree`` with the join of each query that groups, windows or deduplicates joined rows (the
    outermost SELECT and each top-level CTE) in a CTE of its own before it, and the names of those
    CTEs with the columns their key is: the join's rows (its WHERE applied) with the columns the
    query reads of them, ``<alias>__<column>``, and each joined table's key (a CTE's, what its shape
    makes unique), so that the join can be a state (its rows identified by its tables' keys,
    NULL where an outer join matched nothing) and the query the same query over that one table:
    ``select o.status, count(*) from orders o full join customers c on ... group by o.status``.
    None when no query is of that shape, or a column cannot be told which table it reads."""
    schema = schema_of(tree, masters)
    if schema is None:
        return None
    try:
        qualified = qualify_columns(tree.copy(), schema=schema, expand_stars=False, dialect="spark")
    except Exception:  # noqa: BLE001 - a column sqlglot cannot resolve: no such split
        return None
    with_ = qualified.args.get("with_")
    ctes = list(with_.expressions) if with_ is not None else []
    names = {cte.alias_or_name.casefold() for cte in ctes}
    written = tree.args.get("with_")
    originals = [c.this for c in written.expressions] if written is not None else []
    keys: dict[str, tuple[str, ...]] = {}
    budget = [MAX_KEYS_ANALYSED]
    out: list[exp.CTE] = []
    for cte, original in zip(ctes, originals, strict=True):
        body = cte.this
        name = f"{cte.alias_or_name.casefold()}_{JOINED}"
        if isinstance(body, exp.Select) and name not in names:
            joined = _join_apart(body, original, name, masters, out, budget)
            if joined is not None:
                out.append(joined[0])
                keys[name] = joined[1]
                names.add(name)
        out.append(cte)
    name = JOINED
    while name in names:
        name = f"_{name}"
    joined = _join_apart(qualified, tree, name, masters, out, budget)
    if joined is not None:
        out.append(joined[0])
        keys[name] = joined[1]
    if not keys:
        return None
    qualified.set("with_", exp.With(expressions=out))
    return qualified, keys


def schema_of(tree: exp.Select, masters: Mapping[str, MasterTable]) -> dict | None:
    """The columns and types of the masters ``tree`` reads, nested as its tables are named (one
    depth for all: schema.table or catalog.schema.table); None when they are named at two depths."""
    resolver = Resolver(masters)
    ctes = {cte.alias_or_name.casefold() for cte in tree.find_all(exp.CTE)}
    schema: dict = {}
    depth = None
    for table in tree.find_all(exp.Table):
        if not table.db and table.name.casefold() in ctes:
            continue
        try:
            master = resolver.master(table)
        except UnsupportedViewError:
            return None
        parts = [p.name for p in table.parts]
        if depth not in (None, len(parts)):
            return None
        depth = len(parts)
        level = schema
        for part in parts[:-1]:
            level = level.setdefault(part, {})
        level[parts[-1]] = dict(master.columns)
    return schema


def _join_apart(
    select: exp.Select,
    written: exp.Expr,
    name: str,
    masters: Mapping[str, MasterTable],
    before: Sequence[exp.CTE],
    budget: list[int],
) -> tuple[exp.CTE, tuple[str, ...]] | None:
    """The CTE ``name`` holding the join of ``select`` (qualified; ``written``: as the user wrote
    it), and its key columns, ``select`` then reading it in place of its tables; None (``select``
    unchanged) when it does not group, window or deduplicate joined rows, or its join cannot be
    taken apart (USING, lateral, a subquery outside FROM and WHERE, a star, an unnamed value)."""
    joins = select.args.get("joins") or []
    from_ = select.args.get("from_")
    if not joins or from_ is None or select.args.get("laterals") or not isinstance(written, exp.Select):
        return None
    grouped = select.args.get("group") or select.args.get("distinct") or select.args.get("qualify")
    if not grouped and not any(p.find(exp.AggFunc, exp.Window) for p in select.expressions):
        return None
    if any(not isinstance(p, (exp.Alias, exp.Column)) or p.is_star for p in written.expressions):
        return None  # (a star, or a value Spark names itself)
    items = [from_.this, *(j.this for j in joins)]
    if any(not isinstance(i, exp.Table) for i in items) or any(
        j.args.get("using")
        or j.args.get("method")
        or (j.kind or "").upper() in ("SEMI", "ANTI", "CROSS")
        or j.args.get("on") is None
        for j in joins
    ):
        return None
    aliases = [i.alias_or_name.casefold() for i in items]
    if len(set(aliases)) != len(aliases):
        return None
    # what the query does above its join: the nodes of its SELECT list, GROUP BY, HAVING, ...
    above = _nodes([v for k, v in select.args.items() if k not in ("from_", "joins", "where", "with_")])
    if any(isinstance(n, (exp.Subquery, exp.Exists, exp.Select)) for n in above):
        return None
    outputs = {p.alias_or_name.casefold() for p in select.expressions}
    columns: dict[tuple[str, str], str] = {}

    def new_name(alias: str, column: str) -> str:
        return state_column(columns, alias, column)

    for column in [n for n in above if isinstance(n, exp.Column)]:
        alias = column.table.casefold()
        if alias in aliases:
            new_name(alias, column.name.casefold())
        elif alias or column.name.casefold() not in outputs:
            return None  # (a column of an outer query, or unresolved)
    key: list[str] = []
    for alias, item in zip(aliases, items, strict=True):
        item_key = _item_key(item, masters, before, budget)
        if not item_key:
            return None
        key += [new_name(alias, column.casefold()) for column in item_key]
    body = exp.Select(
        expressions=[exp.alias_(exp.column(column, table=alias), made) for (alias, column), made in columns.items()]
    )
    body.set("from_", from_.copy())
    body.set("joins", [j.copy() for j in joins])
    if select.args.get("where") is not None:
        body.set("where", select.args["where"].copy())
    for node in above:
        if isinstance(node, exp.Column) and node.table.casefold() in aliases:
            node.replace(exp.column(columns[(node.table.casefold(), node.name.casefold())], table=name))
    select.set("from_", exp.From(this=exp.to_table(name)))
    select.set("joins", None)
    select.set("where", None)
    return exp.CTE(this=body, alias=exp.TableAlias(this=exp.to_identifier(name))), tuple(dict.fromkeys(key))


def state_column(columns: dict[tuple[str, str], str], alias: str, column: str) -> str:
    """The name a joined table's column ``alias.column`` has in a state holding the join:
    ``<alias>__<column>``, told apart from the others ``columns`` holds (which it is added to)."""
    if (alias, column) not in columns:
        made = f"{alias}__{column}"
        while made in columns.values():
            made = f"_{made}"
        columns[(alias, column)] = made
    return columns[(alias, column)]


def _nodes(node: object) -> list[exp.Expr]:
    """The nodes under ``node`` (an expression or a list of them)."""
    if isinstance(node, list):
        return [n for child in node for n in _nodes(child)]
    return list(node.walk()) if isinstance(node, exp.Expr) else []


def _item_key(
    item: exp.Table, masters: Mapping[str, MasterTable], before: Sequence[exp.CTE], budget: list[int]
) -> tuple[str, ...]:
    """The columns unique in the rows of a FROM item: a master's key, or what the shape of the CTE
    it names makes unique (analysed with the CTEs it reads); () when none."""
    if item.db:
        try:
            return Resolver(masters).master(item).key
        except UnsupportedViewError:
            return ()
    ctes = {c.alias_or_name.casefold(): c for c in before}
    cte = ctes.get(item.name.casefold())
    if cte is None or budget[0] <= 0:
        return ()
    budget[0] -= 1
    query = cte.this.copy()
    reached = _reached(cte.this, {n: c.this for n, c in ctes.items()}, {item.name.casefold()})
    needed = [c.copy() for c in before if c.alias_or_name.casefold() in reached]
    if needed:
        query.set("with_", exp.With(expressions=needed))
    try:
        definition = analyze_view(query.sql(dialect="spark"), masters)
    except UnsupportedViewError:
        return ()
    return _shape_key(query, definition)


def _reached(node: exp.Expr, ctes: Mapping[str, exp.Expr], skip: set[str]) -> set[str]:
    """The CTEs (``ctes``: name -> body) ``node`` reads, directly or through one another, not
    those in ``skip`` (nor what only they read)."""
    found: set[str] = set()
    pending = [node]
    while pending:
        for table in pending.pop().find_all(exp.Table):
            name = table.name.casefold()
            if not table.db and name in ctes and name not in found and name not in skip:
                found.add(name)
                pending.append(ctes[name])
    return found


class _Splitter:
    def __init__(
        self,
        tree: exp.Select,
        ctes: Mapping[str, exp.Expr],
        order: Sequence[str],
        masters: Mapping[str, MasterTable],
        clock: Clock | None,
        joins: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.tree, self.ctes, self.order, self.masters, self.clock = tree, ctes, order, masters, clock
        self.joins = joins or {}  # the CTEs _joins_apart made, with their keys
        self.reads = {name: self._reached(ctes[name], {name}) for name in order}
        self.analyses = 0
        # each CTE's state by the states it reads (what it is does not depend on the others)
        self.made: dict[tuple[str, frozenset[str]], tuple[State, MasterTable] | None] = {}

    def attempt(self, names: Sequence[str]) -> StateSplit | None:
        """The split with the CTEs ``names`` as states, if every part is accepted."""
        tables = dict(self.masters)
        states: list[State] = []
        for name in self.order:
            if name not in names:
                continue
            made = self.state(name, {s.name for s in states}, tables)
            if made is None:
                return None
            state, table = made
            states.append(state)
            tables[table.name] = table
        outer = self.query(self.tree, {s.name for s in states})
        definition = self.analysed(outer, tables)
        if definition is None:
            return None
        return StateSplit(tuple(states), definition.view_class, outer)

    def every_state(self) -> list[str]:
        """Every CTE that can be a state, in order (those before it that can, states too)."""
        tables = dict(self.masters)
        chosen: list[str] = []
        for name in self.order:
            state = self.state(name, set(chosen), tables)
            if state is not None:
                chosen.append(name)
                tables[state[1].name] = state[1]
        return chosen

    def state(self, name: str, states: set[str], tables: Mapping[str, MasterTable]) -> tuple[State, MasterTable] | None:
        """CTE ``name`` as a view of its own reading ``states`` as tables, when accepted with a key."""
        memo = (name, frozenset(states & self.reads[name]))
        if memo not in self.made:
            self.made[memo] = self._state(name, set(memo[1]), tables)
        return self.made[memo]

    def _state(
        self, name: str, states: set[str], tables: Mapping[str, MasterTable]
    ) -> tuple[State, MasterTable] | None:
        body = self.ctes[name].copy()
        inlined = self._reached(body, states | {name})
        needed = [n for n in self.order if n in inlined]
        query = _with_states(body, states)
        if needed:
            query.set(
                "with_",
                exp.With(
                    expressions=[
                        exp.CTE(
                            this=_with_states(self.ctes[n].copy(), states),
                            alias=exp.TableAlias(this=exp.to_identifier(n)),
                        )
                        for n in needed
                    ]
                ),
            )
        sql = query.sql(dialect="spark")
        definition = self.analysed(sql, tables)
        if definition is None:
            return None
        joined_key = self.joins.get(name)
        key = joined_key or key_of(definition)
        log_key = key
        # group keys, PARTITION BY or DISTINCT columns may be NULL (a table's key is not), as may
        # the key of a table an outer join null-extends
        nullable = joined_key is not None or definition.is_aggregate or definition.ranking is not None or not key
        key = key or _shape_key(query, definition)
        if nullable:
            # (no key: a UNION ALL keyed by each branch's number and own key)
            keyed = _with_state_key(query, key, definition) if key else _with_branch_keys(query, definition)
            if keyed is None:
                return None
            sql = keyed.sql(dialect="spark")
            definition = self.analysed(sql, tables)
            if definition is None:
                return None
            log_key = (STATE_KEY,)
        table = MasterTable(f"{STATE_SCHEMA}.{name}", state_columns(definition), log_key)
        return State(name, sql, key, definition.view_class, tuple(needed), log_key), table

    def query(self, tree: exp.Select, states: set[str]) -> str:
        """The model's query reading ``states`` as tables (their CTEs dropped)."""
        query = tree.copy()
        with_ = query.args["with_"]
        query.set("with_", None)
        _with_states(query, states)
        read = self._reached(query, states)  # (a CTE only a state read goes)
        kept = [cte for cte in with_.expressions if cte.alias_or_name.casefold() in read]
        for cte in kept:
            _with_states(cte.this, states)
        query.set("with_", exp.With(expressions=kept) if kept else None)
        return query.sql(dialect="spark")

    def _reached(self, node: exp.Expr, skip: set[str]) -> set[str]:
        return _reached(node, self.ctes, skip)

    def analysed(self, sql: str, tables: Mapping[str, MasterTable]) -> ViewDefinition | None:
        self.analyses += 1
        if self.analyses > MAX_ANALYSES:
            raise _OverBudget
        try:
            return analyze_view(sql, tables, self.clock)
        except UnsupportedViewError:
            return None


def _with_states(node: exp.Expr, states: set[str]) -> exp.Expr:
    """``node`` with its reads of the CTEs ``states`` reading their tables (aliased as before)."""
    for table in list(node.find_all(exp.Table)):
        if not table.db and table.name.casefold() in states:
            alias = table.alias or table.name
            table.replace(
                exp.Table(
                    this=exp.to_identifier(table.name.casefold()),
                    db=exp.to_identifier(STATE_SCHEMA),
                    alias=exp.TableAlias(this=exp.to_identifier(alias)),
                )
            )
    return node


def _shape_key(query: exp.Expr, view: ViewDefinition) -> tuple[str, ...]:
    """Output columns unique in the rows of ``query`` (analysed as ``view``): its tables' keys
    (_key), else its grouping (_grouped_key), else its first row per key (_deduplicated_key)."""
    return key_of(view) or _grouped_key(query, view) or _deduplicated_key(query, view)


def key_of(view: ViewDefinition) -> tuple[str, ...]:
    """Output columns unique in the view's rows, from its shape; () when its shape gives none."""
    visible = [o for o in view.outputs if not o.hidden]
    names = {o.name.casefold(): o.name for o in visible}
    if view.is_aggregate:
        keys = view.group_key_columns
        return tuple(names[k.casefold()] for k in keys) if keys and all(k.casefold() in names for k in keys) else ()
    if view.ranking is not None:
        keys = view.ranking.partition_columns
        first = view.ranking.function is RankFunction.ROW_NUMBER and view.ranking.keep == 1
        if first and keys and all(k.casefold() in names for k in keys):
            return tuple(names[k.casefold()] for k in keys)
        # (RANK and DENSE_RANK keep ties, other numbers several rows: each a row of the table it ranks)
    if view.view_class in (ViewClass.JOIN, ViewClass.WINDOWED, ViewClass.RANKED) and not view.null_supplying:
        # one row per combination of the occurrences' rows: their keys, less those of an occurrence
        # joined on its whole key to an earlier one (one row of it per row of that one)
        only = view.occurrences[0].alias if len(view.occurrences) == 1 else None
        selected = {
            (o.expression.table or only, o.expression.name.casefold()): o.name
            for o in visible
            if isinstance(o.expression, exp.Column)
        }
        order = [o.alias for o in view.occurrences]
        determined = {
            link.source
            for link in key_links(view)
            if link.inner and order.index(link.target) < order.index(link.source)
        }
        key: list[str] = []
        for occurrence in view.occurrences:
            if occurrence.alias in determined:
                continue
            columns = [selected.get((occurrence.alias, k.casefold())) for k in occurrence.master.key]
            if not occurrence.master.key or None in columns:
                return ()
            key += [c for c in columns if c is not None]
        return tuple(dict.fromkeys(key))
    return ()


def _with_state_key(query: exp.Expr, key: Sequence[str], view: ViewDefinition) -> exp.Expr | None:
    """``query`` also selecting STATE_KEY: its ``key`` columns' values (the expressions its
    outermost SELECT computes them by) as one string never NULL; None when a key column is not
    one of its projections."""
    if any(o.name.casefold() == STATE_KEY for o in view.outputs):
        return None
    if isinstance(query, exp.Union):  # a set operation: each branch selects it, from its own columns
        keyed_union = query.copy()
        names = [o.name.casefold() for o in view.outputs if not o.hidden]
        positions = [names.index(c.casefold()) for c in key if c.casefold() in names]
        branches = _branches(keyed_union)
        if len(positions) != len(key) or any(
            len(b.expressions) != len(names) or any(isinstance(e, exp.Star) for e in b.expressions) for b in branches
        ):
            return None
        for branch in branches:
            _select_state_key(branch, [branch.expressions[i] for i in positions])
        return keyed_union
    if not isinstance(query, exp.Select):
        return None
    by_name = {p.alias_or_name.casefold(): p for p in query.expressions}
    projections = [by_name[column.casefold()] for column in key if column.casefold() in by_name]
    if len(projections) != len(key):
        return None
    keyed = query.copy()
    _select_state_key(keyed, projections)
    return keyed


def _with_branch_keys(query: exp.Expr, view: ViewDefinition) -> exp.Expr | None:
    """A UNION ALL ``query`` whose every branch also selects STATE_KEY: the branch's number and
    its own key (what its shape makes unique in its rows, each branch its own columns); None when
    a branch has none."""
    if view.view_class is not ViewClass.UNION_ALL or not isinstance(query, exp.Union):
        return None
    keyed = query.copy()
    selects = _branches(keyed)
    if len(selects) != len(view.branches):
        return None
    for number, (select, branch) in enumerate(zip(selects, view.branches, strict=True), start=1):
        names = [o.name.casefold() for o in branch.outputs if not o.hidden and o.name != BRANCH_COLUMN]
        # (each branch's rows are its own: the branch number, which an aggregate branch groups by, is the key's first part)
        key = [c for c in _shape_key(select, branch) if c != BRANCH_COLUMN]
        positions = [names.index(c.casefold()) for c in key if c.casefold() in names]
        if not key or len(positions) != len(key) or len(select.expressions) != len(names):
            return None
        if any(isinstance(e, exp.Star) for e in select.expressions):
            return None
        _select_state_key(select, [exp.Literal.number(number), *(select.expressions[i] for i in positions)])
    return keyed


def _select_state_key(select: exp.Select, projections: Sequence[exp.Expr]) -> None:
    """``select`` also selecting STATE_KEY from ``projections`` (its key columns): their values
    as text in a JSON array, never NULL."""
    values = [
        exp.cast((p.this if isinstance(p, exp.Alias) else p).copy(), exp.DataType.build("string")) for p in projections
    ]
    text = exp.func("to_json", exp.Array(expressions=values))
    select.set("expressions", [*select.expressions, exp.alias_(text, STATE_KEY)])


def _branches(union: exp.Union) -> list[exp.Select]:
    """The SELECTs a set operation combines, through nested ones; [] when a branch is no SELECT."""
    found: list[exp.Select] = []
    for side in (union.left, union.right):
        while isinstance(side, exp.Subquery) and not side.alias and isinstance(side.this, (exp.Select, exp.Union)):
            side = side.this  # a branch in parentheses (dbt_utils.union_relations writes them)
        if isinstance(side, exp.Union):
            found += _branches(side) or [exp.Select()]  # (an empty SELECT: refused by the caller)
        elif isinstance(side, exp.Select):
            found.append(side)
        else:
            return []
    return found


def _grouped_key(query: exp.Expr, view: ViewDefinition) -> tuple[str, ...]:
    """The columns the query's outermost SELECT groups by (GROUP BY, by expression or position, of
    values it selects; DISTINCT), or every column of a UNION (distinct): unique in its rows whatever
    the class of view."""
    if type(query) is exp.Union and query.args.get("distinct"):  # (not INTERSECT or EXCEPT, its subclasses)
        return tuple(o.name for o in view.outputs if not o.hidden)
    if not isinstance(query, exp.Select):
        return ()
    visible = {o.name.casefold(): o.name for o in view.outputs if not o.hidden}
    if query.args.get("distinct") is not None:
        plain = not any(p.find(exp.Star) for p in query.expressions)  # (find reads the node itself too)
        return tuple(visible.values()) if plain and len(query.expressions) == len(visible) else ()
    group = query.args.get("group")
    if group is None or group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"):
        return ()
    keys = []
    for expression in group.expressions:
        name = _selected_as(query, expression, visible)
        if name is None:
            return ()
        keys.append(name)
    return tuple(dict.fromkeys(keys))


def _selected_as(select: exp.Select, value: exp.Expr, visible: Mapping[str, str]) -> str | None:
    """The output column of ``select`` holding ``value`` (an expression it computes, or a position
    ``1``, ``2``, ... in its SELECT list, as GROUP BY reads one), or None when it selects none."""
    projections = select.expressions
    if isinstance(value, exp.Literal) and value.is_int:
        position = int(value.name)
        if not 0 < position <= len(projections):
            return None
        return visible.get(projections[position - 1].alias_or_name.casefold())
    for projection in projections:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        if _same_value(inner, value) and projection.alias_or_name.casefold() in visible:
            return visible[projection.alias_or_name.casefold()]
    return None


def _same_value(selected: exp.Expr, value: exp.Expr) -> bool:
    """Whether ``selected`` computes ``value``: the same expression, or the same column where one
    of the two names no table (a column named alone is one name of one table of the query)."""
    if isinstance(selected, exp.Column) and isinstance(value, exp.Column):
        same_table = not selected.table or not value.table or selected.table.casefold() == value.table.casefold()
        return selected.name.casefold() == value.name.casefold() and same_table
    return selected == value


def _deduplicated_key(query: exp.Expr, view: ViewDefinition) -> tuple[str, ...]:
    """The columns a latest-row-per-key query keeps one row of each value of: the PARTITION BY of
    its ``ROW_NUMBER() ... = 1``, where it selects them, whatever the class of view (a ranking of
    a join is recomputed per partition). Written with QUALIFY, or as Spark 3 has it, the outermost
    SELECT reading alone a subquery or CTE that numbers the rows and keeping number 1."""
    if not isinstance(query, exp.Select):
        return ()
    visible = {o.name.casefold(): o.name for o in view.outputs if not o.hidden}
    qualify = query.args.get("qualify")
    if qualify is not None:
        window = _first_row_kept(qualify.this, query)
        if window is None:
            return ()
        selected = [_selected_as(query, value, visible) for value in window.args.get("partition_by") or ()]
        names = [n for n in selected if n is not None]
        return tuple(dict.fromkeys(names)) if names and len(names) == len(selected) else ()
    from_ = query.args.get("from_")
    where = query.args.get("where")
    if (
        from_ is None
        or where is None
        or query.args.get("joins")
        or query.args.get("group")
        or query.args.get("laterals")
    ):
        return ()
    numbered = _read_alone(from_.this, query)
    if numbered is None:
        return ()
    window = _first_row_kept(where.this, numbered, outside=True)
    if window is None:
        return ()
    names = []
    for value in window.args.get("partition_by") or ():
        inner = _selected_as(
            numbered, value, {p.alias_or_name.casefold(): p.alias_or_name for p in numbered.expressions}
        )
        name = _selected_as(query, exp.column(inner), visible) if inner is not None else None
        if name is None:
            return ()
        names.append(name)
    return tuple(dict.fromkeys(names))


def _read_alone(source: exp.Expr, query: exp.Select) -> exp.Select | None:
    """The SELECT a FROM item is: a subquery's, or that of a CTE of ``query`` it names."""
    if isinstance(source, exp.Subquery) and isinstance(source.this, exp.Select):
        return source.this
    with_ = query.args.get("with_")
    if isinstance(source, exp.Table) and not source.db and with_ is not None:
        for cte in with_.expressions:
            if cte.alias_or_name.casefold() == source.name.casefold() and isinstance(cte.this, exp.Select):
                return cte.this
    return None


def _first_row_kept(condition: exp.Expr, numbering: exp.Select, outside: bool = False) -> exp.Window | None:
    """The ``ROW_NUMBER() OVER (PARTITION BY ...)`` of ``numbering`` whose number 1 a conjunct of
    ``condition`` keeps alone (``rn = 1``, ``1 = rn``, ``rn <= 1``, ``rn < 2``; the window itself
    or the column ``numbering`` selects it as: named alone in its own QUALIFY, by any qualifier
    from the query around it, ``outside``, which reads it alone)."""
    windows = {
        p.alias_or_name.casefold(): p.this
        for p in numbering.expressions
        if isinstance(p, exp.Alias) and isinstance(p.this, exp.Window)
    }

    def numbered(side: exp.Expr) -> exp.Window | None:
        named = isinstance(side, exp.Column) and (outside or not side.table)
        window = windows.get(side.name.casefold()) if named else side
        if (
            isinstance(window, exp.Window)
            and isinstance(window.this, exp.RowNumber)
            and window.args.get("partition_by")
        ):
            return window
        return None

    def number(side: exp.Expr) -> int | None:
        return int(side.name) if isinstance(side, exp.Literal) and side.is_int else None

    for conjunct in split_conjuncts(condition):
        pairs = []
        if isinstance(conjunct, exp.EQ):
            pairs = [(conjunct.this, conjunct.expression, {1}), (conjunct.expression, conjunct.this, {1})]
        elif isinstance(conjunct, exp.LTE):
            pairs = [(conjunct.this, conjunct.expression, {1})]
        elif isinstance(conjunct, exp.LT):
            pairs = [(conjunct.this, conjunct.expression, {2})]
        elif isinstance(conjunct, exp.GTE):
            pairs = [(conjunct.expression, conjunct.this, {1})]
        elif isinstance(conjunct, exp.GT):
            pairs = [(conjunct.expression, conjunct.this, {2})]
        for window_side, bound, kept in pairs:
            window = numbered(window_side)
            if window is not None and number(bound) in kept:
                return window
    return None


def state_columns(view: ViewDefinition) -> tuple[tuple[str, str], ...]:
    """The state's columns and their Spark types, where plain (a column read, a CAST, a count)."""
    types = {(o.alias, c.casefold()): t for o in view.occurrences for c, t in o.master.columns}
    columns = []
    for output in view.outputs:
        if output.hidden:
            continue
        expression = output.expression
        spark_type = "string"
        if isinstance(expression, exp.Column):
            spark_type = types.get((expression.table, expression.name.casefold()), spark_type)
        elif isinstance(expression, (exp.Cast, exp.TryCast)):
            spark_type = expression.to.sql(dialect="spark").lower()
        elif isinstance(expression, exp.Count):
            spark_type = "bigint"
        columns.append((output.name, spark_type))
    return tuple(columns)


def with_state_relations(sql: str, relations: Mapping[str, str]) -> str:
    """``sql`` (a state's or the query over the states) reading each state from the relation
    ``relations`` gives it (``schema.table``, by state name) instead of STATE_SCHEMA."""
    tree = sqlglot.parse_one(sql, read="spark")
    for table in list(tree.find_all(exp.Table)):
        relation = relations.get(table.name.casefold())
        if relation is not None and table.db.casefold() == STATE_SCHEMA and not table.catalog:
            schema, _, name = relation.partition(".")
            table.set("this", exp.to_identifier(name, quoted=True))
            table.set("db", exp.to_identifier(schema, quoted=True))
    return tree.sql(dialect="spark")


def relations_read(sql: str) -> set[str]:
    """The tables ``sql`` reads (not its CTEs), as ``schema.table`` in lower case (the session
    catalog's ``spark_catalog.`` dropped), as dbt's graph names relations."""
    tree = sqlglot.parse_one(sql, read="spark")
    ctes = {cte.alias_or_name.casefold() for cte in tree.find_all(exp.CTE)}
    found = set()
    for table in tree.find_all(exp.Table):
        parts = [p.name.casefold() for p in table.parts]
        if len(parts) == 1 and parts[0] in ctes:
            continue
        if len(parts) == 3 and parts[0] == "spark_catalog":
            parts = parts[1:]
        found.add(".".join(parts))
    return found
