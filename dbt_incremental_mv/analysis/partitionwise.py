"""Views recomputed partition by partition (ViewClass.PER_PARTITION): queries, nested in CTEs and
derived tables as deep as they like, whose every window, GROUP BY, DISTINCT and set operation
partitions its rows by the same columns of every table it reads::

    with latest as (
      select *, row_number() over (partition by ticket_id, field order by updated_at desc) as rn
      from support.ticket_history
    ), current_fields as (
      select l.ticket_id, l.field, l.value from latest l where rn = 1
    )
    select t.ticket_id, t.subject, count(*) as fields,
           max(case when f.field = 'status' then f.value end) as status
    from support.tickets t
    join current_fields f on f.ticket_id = t.ticket_id
    group by t.ticket_id, t.subject

A column a query selects as it is *carries* the table column below it. Join equalities (inner and
LEFT joins) and the positions of set operations make columns of different tables one *partition
attribute* (``t.ticket_id`` and ``ticket_history.ticket_id`` above). When every window's
PARTITION BY, every GROUP BY, every DISTINCT and every set operation other than UNION ALL
includes columns carrying each attribute of a common set P, and every table the query reads has a
column in each attribute of P, a view row depends only on the tables' rows of its value of P:
the view is the union, over the values of P, of the query over those rows. A refresh recomputes
the values of P its changes touch (refresh/views/ranked_view.py): it deletes their rows from the
view and runs the query over the tables' rows of them. The query is kept as written (a template,
``PartitionQuery``), each table read under an alias of its own, and the ties of order-dependent
windows broken by the key of the rows they read, so that every build and refresh computes the
same rows.

A column of the null-supplying side of an outer join carries nothing (it is NULL where no row
matched): partitioning by it is not partitioning; ``COALESCE`` over columns of one attribute
carries it (the key of a FULL JOIN). A LEFT JOIN whose null-extended rows the query discards (a
condition no NULL satisfies reads a column of its null-supplying side, in the query or in the
query reading it, the column selected as it is and nothing mixing its rows with others: jaffle
shop's payments LEFT JOIN orders grouped by the orders' customer, joined to the customers on it)
returns the rows an inner join returns, and those: it is read, and written in the template, as an
inner join (_null_rejected). ``USING`` equates the columns it names; semi joins are left
to the other classes' refusal.

This is the fallback for queries the other classes refuse (analyze.py): a query they maintain is
maintained by them, with finer deltas.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sqlglot import exp
from sqlglot.errors import SqlglotError

from dbt_incremental_mv.analysis import functions, null_rejection
from dbt_incremental_mv.analysis.constructs import (
    SemiJoin,
    relation_position,
    semi_join,
    semi_join_query,
    unpartitioned_window,
    unsupported_constructs,
)
from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.model import (
    HiddenColumn,
    HiddenPurpose,
    Lookup,
    MasterOccurrence,
    MasterTable,
    OutputColumn,
    PartitionQuery,
    RowFilter,
    ViewClass,
    ViewDefinition,
)
from dbt_incremental_mv.analysis.outputs import refuse_bad_output_names
from dbt_incremental_mv.analysis.render import PER_PARTITION_MASTER, render_expression
from dbt_incremental_mv.analysis.resolved import column_node, split_conjuncts, unparenthesized
from dbt_incremental_mv.analysis.windowing import ORDER_DEPENDENT, refuse_order_dependent, rows_frame, window_function

PARTITION = "_mv_p"  # a partition column no visible column holds
HINT = (
    "Partition every window, GROUP BY and DISTINCT of the query by the same column of the tables it reads "
    "(PARTITION BY customer_id, GROUP BY customer_id, ..., every table joined on it), or compute the part that "
    "is not so in a fast_refresh model of its own and ref() it"
)


class NotPartitionwise(Exception):
    """The query is not of the shapes this class reads: the other classes' refusal stands."""


@dataclass(frozen=True)
class Attr:
    """A column of one table occurrence (the column as the table spells it)."""

    alias: str
    column: str


@dataclass
class _Rows:
    """What a query returns: its columns' names and the attribute each carries (None: computed,
    or NULL where an outer join matched nothing), and the names that identify a row (None:
    unknown)."""

    columns: list[tuple[str | None, Attr | None]]
    row_key: tuple[str, ...] | None

    def find(self, name: str) -> tuple[bool, Attr | None]:
        folded = name.casefold()
        for column, attr in self.columns:
            if column is not None and column.casefold() == folded:
                return True, attr
        return False, None


@dataclass
class _Item:
    """A FROM or JOIN item of a SELECT: its alias, its rows, whether a LEFT JOIN null-extends it."""

    alias: str
    rows: _Rows
    nullable: bool
    # the USING columns the name alone reads from it: the attribute it carries, and whether it is
    # carried though the item is NULL-extended (after a FULL JOIN the name is the two sides' COALESCE)
    using: dict[str, tuple[Attr | None, bool]] = field(default_factory=dict)
    table: bool = False  # a master table read directly (its alias the occurrence's)
    # joined (inner or LEFT, no RIGHT or FULL join beside it) on its whole row key: a row of what is
    # joined before matches one of its rows at most, so the rows of the join need no key of its
    by_key: bool = False
    body: exp.Select | None = None  # a derived table's SELECT (in the template), where a column can be added


@dataclass(frozen=True)
class _Cte:
    """A CTE: its query, and the CTEs that query can read (those defined before it, and outside)."""

    body: exp.Expr
    visible: Mapping[str, _Cte]


@dataclass
class _Constraint:
    """The attributes one window, GROUP BY, DISTINCT or set operation partitions by."""

    attrs: frozenset[Attr]
    node: exp.Expr


@dataclass
class _Walk:
    """The state of one analysis: the occurrences found, the union-find of attributes, the
    partitioning constraints, the columns read, the join equalities, the windows whose ties are
    broken once the partition is known."""

    master_of: Callable[[exp.Table], MasterTable]
    occurrences: list[MasterOccurrence] = field(default_factory=list)
    parent: dict[Attr, Attr] = field(default_factory=dict)
    constraints: list[_Constraint] = field(default_factory=list)
    read: dict[str, set[str]] = field(default_factory=dict)
    scopes: dict[int, _Scope] = field(default_factory=dict)  # by id() of each SELECT walked
    windows: list[tuple[exp.Window, exp.Select, _Scope]] = field(default_factory=list)  # ties broken last
    links: list[tuple[Attr, Attr]] = field(default_factory=list)  # join equalities, both ways
    # ``x IN (select c ...)`` where x is an expression over one occurrence's columns, and every
    # ``x NOT IN (select c ...)``: (c's attribute, the occurrence's alias, x over its columns, NOT IN)
    expression_links: list[tuple[Attr, str, exp.Expr, bool]] = field(default_factory=list)
    tie_broken: bool = False

    # -- attributes ---------------------------------------------------------------------------

    def root(self, attr: Attr) -> Attr:
        while self.parent.get(attr, attr) != attr:
            attr = self.parent[attr]
        return attr

    def union(self, a: Attr, b: Attr) -> None:
        ra, rb = self.root(a), self.root(b)
        if ra != rb:
            self.parent[max(ra, rb, key=self.order)] = min(ra, rb, key=self.order)

    def link(self, a: Attr, b: Attr) -> None:
        """A join equality of two columns: one attribute, and a way from either to the other (lookups)."""
        self.union(a, b)
        self.links += [(a, b), (b, a)]

    def order(self, attr: Attr) -> tuple[int, str]:
        aliases = [o.alias for o in self.occurrences]
        return (aliases.index(attr.alias) if attr.alias in aliases else len(aliases), attr.column.casefold())

    # -- queries ------------------------------------------------------------------------------

    def rows(
        self,
        node: exp.Expr,
        ctes: Mapping[str, _Cte],
        outer: _Scope | None = None,
        discarded: frozenset[str] = frozenset(),
    ) -> _Rows:
        """Walk one query (a SELECT, a set operation, a parenthesised one); ``outer``: the scope
        a semi join's subquery is correlated to; ``discarded``: the names of its columns whose
        NULL rows the query reading it discards (_null_rejected)."""
        while isinstance(node, exp.Subquery):
            node = node.this
        with_ = node.args.get("with_")
        if with_ is not None:
            scoped = dict(ctes)
            for cte in with_.expressions:
                if cte.args["alias"].columns:
                    raise NotPartitionwise  # a column list renames what is carried
                # its body reads the CTEs before it (its own name there is a table's)
                scoped[cte.alias.casefold()] = _Cte(cte.this, MappingProxyType(dict(scoped)))
            ctes = scoped
        if isinstance(node, exp.SetOperation):
            return self._set_operation(node, ctes, outer)
        if not isinstance(node, exp.Select):
            raise NotPartitionwise
        return self._select(node, ctes, outer, discarded)

    def _set_operation(self, node: exp.SetOperation, ctes: Mapping[str, _Cte], outer: _Scope | None) -> _Rows:
        if any(node.args.get(k) for k in ("order", "limit", "offset")):
            raise NotPartitionwise  # (refused as a clause by the other classes)
        read_before = len(self.occurrences)
        left = self.rows(node.left, ctes, outer)
        right = self.rows(node.right, ctes, outer)
        if len(left.columns) != len(right.columns):
            raise NotPartitionwise
        columns: list[tuple[str | None, Attr | None]] = []
        for (name, a), (_, b) in zip(left.columns, right.columns):
            if a is not None and b is not None:
                self.union(a, b)
            columns.append((name, a if a is not None and b is not None else None))
        if len(self.occurrences) == read_before:  # constant rows
            return _Rows(columns, _whole_row(columns))
        union_all = isinstance(node, exp.Union) and not node.args.get("distinct")
        if union_all:
            return _Rows(columns, None)
        self.constraints.append(_Constraint(frozenset(a for _, a in columns if a is not None), node))
        return _Rows(columns, tuple(n.casefold() for n, _ in columns if n is not None))

    def _items(self, select: exp.Select, ctes: Mapping[str, _Cte], discarded: frozenset[str]) -> list[_Item]:
        source = select.args.get("from_")
        if source is None:
            if select.args.get("joins"):
                raise NotPartitionwise
            return []  # one row of constants
        rejected = _null_rejected(select, discarded)
        items = [self._item(source.this, ctes, nullable=False, discarded=rejected.get(0, frozenset()))]
        for position, join in enumerate(select.args.get("joins") or (), start=1):
            side = (join.args.get("side") or "").upper()
            kind = (join.args.get("kind") or "").upper()
            if join.args.get("method") or kind not in ("", "INNER", "OUTER", "CROSS"):
                raise NotPartitionwise
            if side in ("RIGHT", "FULL"):  # what is joined before is null-extended
                for earlier in items:
                    earlier.nullable = True
            if null_rejection.is_left_outer(join) and rejected.get(position):
                # the rows it null-extends are discarded (by this query, or by the query reading
                # it): the LEFT JOIN returns the rows an inner join does, and those
                null_rejection.made_inner(join)
                side = ""
            own = null_rejection.rejected_by_own_join(select, position) if side == "LEFT" else frozenset()
            discarded_here = rejected.get(position, frozenset()) | own
            items.append(self._item(join.this, ctes, nullable=side in ("LEFT", "FULL"), discarded=discarded_here))
            for column in join.args.get("using") or ():
                self._using(items, column.name, side)
        items += [_generated(lateral) for lateral in select.args.get("laterals") or ()]
        aliases = [i.alias.casefold() for i in items]
        if len(set(aliases)) != len(aliases):
            raise NotPartitionwise
        return items

    def _using(self, items: list[_Item], name: str, side: str) -> None:
        """``JOIN ... USING (name)``: the joined item's column equals what the name alone read
        before (the one earlier item's column, or an earlier USING's), and the name alone then reads
        the left side's (inner and LEFT joins) or both sides' COALESCE (FULL JOIN: carried whichever
        side has a row)."""
        folded = name.casefold()
        right = items[-1]
        owner = next((i for i in items[:-1] if folded in i.using), None)
        if owner is not None:  # a chain of USING joins on one name
            a, always = owner.using[folded]
        else:
            having = [i for i in items[:-1] if i.rows.find(name)[0]]
            if len(having) != 1:
                raise NotPartitionwise  # (the other classes' refusal says how to write it)
            owner, (_, a), always = having[0], having[0].rows.find(name), False
        if side not in ("", "LEFT", "FULL"):
            raise NotPartitionwise  # (RIGHT: the other classes' refusal says how to write it)
        _, b = right.rows.find(name)
        for attr in (a, b):  # (read by the join itself)
            if attr is not None and attr.alias in self.read:
                self.read[attr.alias].add(attr.column)
        if a is not None and b is not None:
            self.link(a, b)
        if side == "FULL":
            owner.using[folded] = (a if b is not None else None, True)
        else:
            owner.using[folded] = (a, always)

    def _item(
        self, item: exp.Expr, ctes: Mapping[str, _Cte], nullable: bool, discarded: frozenset[str] = frozenset()
    ) -> _Item:
        alias = item.args.get("alias")
        if isinstance(alias, exp.TableAlias) and alias.columns:
            raise NotPartitionwise  # a column list renames what is carried
        if isinstance(item, exp.Subquery):
            if not item.alias:
                raise NotPartitionwise
            return _Item(
                item.alias, self.rows(item.this, ctes, discarded=discarded), nullable, body=_select_of(item.this)
            )
        if not isinstance(item, exp.Table) or not isinstance(item.this, exp.Identifier):
            raise NotPartitionwise
        if not item.args.get("db") and item.name.casefold() in ctes:
            # each reference walks (and the template reads) a copy of its own: its tables are
            # occurrences of their own, under aliases of their own
            cte = ctes[item.name.casefold()]
            body = cte.body.copy()
            written = item.alias or item.name
            item.replace(exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(written))))
            return _Item(written, self.rows(body, cte.visible, discarded=discarded), nullable, body=_select_of(body))
        try:
            master = self.master_of(item)
        except UnsupportedViewError:
            raise NotPartitionwise from None
        if not master.key:
            raise NotPartitionwise  # (refused as a keyless master by the other classes)
        written = item.alias or item.name
        alias = self._unique_alias(written)
        if alias != written:
            _requalify(item.parent_select, written, alias)
        item.set("this", exp.to_identifier(PER_PARTITION_MASTER))
        item.set("db", None)
        item.set("catalog", None)
        item.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
        self.occurrences.append(MasterOccurrence(alias, master))
        self.read[alias] = set()
        columns: list[tuple[str | None, Attr | None]] = [(c, Attr(alias, c)) for c in master.column_names]
        key = tuple(k.casefold() for k in master.key)
        return _Item(alias, _Rows(columns, key), nullable, table=True)

    def _unique_alias(self, written: str) -> str:
        taken = {o.alias for o in self.occurrences}
        alias, number = written.casefold(), 1
        while alias in taken:
            number += 1
            alias = f"{written.casefold()}_{number}"
        return alias

    def _select(
        self, select: exp.Select, ctes: Mapping[str, _Cte], outer: _Scope | None, discarded: frozenset[str]
    ) -> _Rows:
        read_before = len(self.occurrences)
        items = self._items(select, ctes, discarded)
        scope = _Scope(items, self, outer)
        self.scopes[id(select)] = scope
        for join in select.args.get("joins") or ():
            for conjunct in split_conjuncts(join.args.get("on")):
                self._equality(conjunct, scope)
        _mark_joined_by_key(select, scope)
        where = select.args.get("where")
        walked: list[exp.Expr] = []
        for conjunct in split_conjuncts(where.this if where is not None else None):
            semi = semi_join(conjunct) if not self._equality(conjunct, scope) else None
            if semi is not None:
                walked.append(self._semi_join(semi, scope, ctes))
        for node in list(select.find_all(exp.Exists, exp.In)):  # IN and EXISTS elsewhere: in SELECT, under OR
            query = semi_join_query(node)
            if query is not None and node.parent_select is select and not any(query is w for w in walked):
                value = node.this if isinstance(node, exp.In) else None
                walked.append(self._semi_join(SemiJoin(query, value, negated=value is not None), scope, ctes))
        for subquery in list(select.find_all(exp.Subquery)):
            if subquery.parent_select is select and _scalar(subquery):
                self._scalar_subquery(subquery, scope, ctes)
        for column in _own_columns(select):
            scope.record(column)
        if any(isinstance(p, exp.Star) for p in select.expressions):
            scope.record(exp.Column(this=exp.Star()))
        outputs = _outputs(select, scope)
        grouped = select.args.get("group") is not None
        aggregate = grouped or _is_aggregate(select)
        correlated = _correlated(select, scope) if outer is not None else frozenset()
        partitioning: list[_Constraint] = []
        for window in _windows(select):
            refuse_order_dependent(window)
            if window.this.find(exp.Distinct) is not None:
                raise UnsupportedViewError(
                    describe(window),
                    "Spark computes no DISTINCT aggregate over a window",
                    "Count the distinct values with size(collect_set(x)) over the same window",
                )
            partitioning.append(_Constraint(scope.attrs(window.args.get("partition_by") or []), window))
            self.windows.append((window, select, scope))
        if grouped:
            partitioning.append(_Constraint(scope.attrs(_group_items(select)), select.args["group"]))
        elif aggregate:  # one group of every row (of a correlated subquery: of its outer row's values)
            partitioning.append(_Constraint(correlated, select))
        if select.args.get("distinct") is not None:
            partitioning.append(_Constraint(frozenset(a for _, _, a in outputs if a is not None), select))
        if aggregate:
            _refuse_ungrouped(select)
        columns = [(name, attr) for name, _, attr in outputs]
        if len(self.occurrences) == read_before:
            # constant rows (no table below: a date spine, a stub): they never change, so what
            # groups or windows them partitions nothing a change touches
            return _Rows(columns, _whole_row(columns))
        self.constraints += partitioning
        if any(functions.is_generator(p.this) for p in select.expressions if isinstance(p, (exp.Alias, exp.Aliases))):
            return _Rows(columns, None)  # (rows generated from each row: no key tells them apart)
        return _Rows(columns, _row_key(select, outputs, scope))

    def _equality(self, conjunct: exp.Expr, scope: _Scope) -> bool:
        """Link the two columns a join equality (in ON, or in WHERE: of the rows it keeps, and a
        semi join's correlation) makes equal; a column equal to an expression over the columns of
        another occurrence (``a.domain = split_part(l.email, '@', 2)``): the column's table a lookup
        matched by it, as by ``IN``. Whether ``conjunct`` is an equality."""
        if not isinstance(conjunct, (exp.EQ, exp.NullSafeEQ)):
            return False
        a = scope.attr(conjunct.this, carried_only=False)
        b = scope.attr(conjunct.expression, carried_only=False)
        if a is not None and b is not None:
            self.link(a, b)
        elif isinstance(conjunct, exp.EQ) and (a is None) != (b is None):
            attr, value = (a, conjunct.expression) if a is not None else (b, conjunct.this)
            assert attr is not None
            over = scope.over_one_occurrence(value)
            if over is not None and over[0] != attr.alias and not isinstance(over[1], exp.Column):
                self.expression_links.append((attr, *over, False))
        return True

    def _semi_join(self, semi: SemiJoin, scope: _Scope, ctes: Mapping[str, _Cte]) -> exp.Expr:
        """``EXISTS``/``NOT EXISTS (select ... where inner.c = outer.c)`` (its correlation linked as its
        WHERE is walked) and ``x IN (select c ...)``: x linked to c, or, when x is an expression
        over one occurrence's columns, c's table a lookup matched by it; ``x NOT IN (select c ...)``:
        c's table a lookup matched by x, NULLs and all (never partitioned by c: its rows with a NULL c
        decide every row). An IN anywhere else (selected, under OR) is read as a NOT IN: its value
        is TRUE, FALSE or NULL by the same rows. Returns the subquery walked."""
        inner = self.rows(semi.query, ctes, outer=scope)
        if semi.value is None:
            return semi.query
        if len(inner.columns) != 1:
            raise NotPartitionwise
        matched = inner.columns[0][1]
        if matched is None:
            return semi.query
        attr = scope.attr(semi.value, carried_only=False)
        if attr is not None and not semi.negated:
            self.link(attr, matched)
            return semi.query
        # (a value NULL-extended here is NULL with no row of its table behind it: its NOT IN answer
        # depends on the subquery having rows, which no partition of that table's holds)
        over = scope.over_one_occurrence(semi.value, carried_only=semi.negated)
        if over is not None:
            self.expression_links.append((matched, *over, semi.negated))
        return semi.query

    def _scalar_subquery(self, subquery: exp.Subquery, scope: _Scope, ctes: Mapping[str, _Cte]) -> None:
        """A scalar subquery correlated by equalities to the query it is in (``(select max(l.shipped_at)
        from lines l where l.order_id = o.order_id)``): its rows are matched like a semi join's, and
        its aggregate, over the rows of its outer row's values, partitions by them. One that is not
        correlated reads every row of its tables for every row of the view: refused."""
        read_before = len(self.occurrences)
        inner = self.rows(subquery.this, ctes, outer=scope)
        if len(inner.columns) != 1:
            raise NotPartitionwise  # (Spark refuses it)
        body = subquery.this
        if len(self.occurrences) > read_before and not (
            isinstance(body, exp.Select) and _correlated(body, self.scopes[id(body)])
        ):
            raise UnsupportedViewError(
                describe(subquery),
                "a scalar subquery not correlated by an equality to the query around it reads its tables whole "
                "for every row: a change to one of their rows could change every row of the view",
                "Correlate it (where t.customer_id = o.customer_id), or join its result as a table",
            )

    def break_ties(self) -> None:
        for window, select, scope in self.windows:
            self._break_ties(window, select, scope)

    def _break_ties(self, window: exp.Window, select: exp.Select, scope: _Scope) -> None:
        """Append the key of the rows an order-dependent window reads to its ORDER BY (in place)."""
        order = window.args.get("order")
        if order is None and isinstance(window_function(window), ORDER_DEPENDENT):
            raise UnsupportedViewError(
                describe(window),
                "it needs ORDER BY: without one its value depends on the order Spark reads the rows in",
                "Order the window by columns that identify a row of its partition",
            )
        if order is None or not (isinstance(window_function(window), ORDER_DEPENDENT) or rows_frame(window)):
            return
        keys = [i.copy() for i in _group_items(select)] if select.args.get("group") is not None else scope.row_key()
        if keys is None:
            keys = scope.whole_rows()
        if keys is None:
            raise UnsupportedViewError(
                describe(window),
                "its value depends on the order of the rows its ORDER BY leaves tied, and the rows it reads "
                "have no unique column to break the ties by",
                "Add a unique column to its ORDER BY",
            )
        ordered = [_bare(o.this) for o in order.expressions]
        missing = [k for k in keys if _bare(k) not in ordered]
        if missing:
            order.set("expressions", [*order.expressions, *(exp.Ordered(this=k, nulls_first=True) for k in missing)])
            self.tie_broken = True


class _Scope:
    """The columns a SELECT reads: those of its FROM and JOIN items."""

    def __init__(self, items: list[_Item], walk: _Walk, outer: _Scope | None = None) -> None:
        self.items = items
        self.walk = walk
        self.outer = outer  # a semi join's subquery: the scope of the query it filters

    def lookup(self, column: exp.Column, here_only: bool = False) -> tuple[_Item, Attr | None] | None:
        """The item a column reference reads and the attribute it carries there (None: not a
        column of an item: a projection's alias, say); ``here_only``: of this SELECT's own items,
        not of the query a subquery is correlated to."""
        if not column.table:
            owner = next((i for i in self.items if column.name.casefold() in i.using), None)
            if owner is not None:
                return owner, owner.using[column.name.casefold()][0]
        found = []
        for item in self.items:
            if column.table and column.table.casefold() != item.alias.casefold():
                continue
            known, attr = item.rows.find(column.name)
            if known:
                found.append((item, attr))
        if len(found) > 1:
            raise NotPartitionwise  # ambiguous: Spark refuses it too
        if not found and self.outer is not None and not here_only:
            return self.outer.lookup(column)  # a correlated reference
        return found[0] if found else None

    def attr(self, node: exp.Expr, carried_only: bool = True) -> Attr | None:
        """The attribute an expression carries: a column's, or that of ``COALESCE`` over columns of
        one attribute (the key of a FULL JOIN: whichever side has a row holds it)."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Coalesce):
            parts = [self.attr(p, carried_only=False) for p in [node.this, *node.expressions]]
            roots = {self.walk.root(p) for p in parts if p is not None}
            return parts[0] if None not in parts and len(roots) == 1 else None
        if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
            return None
        found = self.lookup(node)
        if found is None:
            return None
        item, attr = found
        return None if carried_only and self.nulled(item, node) else attr

    def nulled(self, item: _Item, column: exp.Column) -> bool:
        """Whether ``column``, read from ``item``, is NULL where an outer join matched nothing (a
        FULL JOIN's USING column read by its name alone is not: one side has a row)."""
        return item.nullable and not (not column.table and item.using.get(column.name.casefold(), (None, False))[1])

    def over_one_occurrence(self, expression: exp.Expr, carried_only: bool = False) -> tuple[str, exp.Expr] | None:
        """``expression`` over the master columns of the one occurrence whose columns it reads
        (alias, expression), or None; ``carried_only``: None when one is NULL-extended here."""
        copy = exp.Paren(this=expression.copy())  # (a column alone replaced too)
        aliases = set()
        for column in list(copy.find_all(exp.Column)):
            attr = self.attr(column, carried_only=carried_only)
            if attr is None:
                return None
            aliases.add(attr.alias)
            column.replace(column_node(attr.alias, attr.column))
        copy = copy.this
        if len(aliases) != 1 or copy.find(exp.Query) is not None:
            return None
        return aliases.pop(), copy

    def attrs(self, expressions: list[exp.Expr]) -> frozenset[Attr]:
        return frozenset(a for e in expressions if (a := self.attr(e)) is not None)

    def record(self, column: exp.Column) -> None:
        """Note a master column the query reads."""
        if isinstance(column.this, exp.Star):
            items = [i for i in self.items if not column.table or column.table.casefold() == i.alias.casefold()]
            for item in items:
                for _, attr in item.rows.columns:
                    self._read(attr)
            return
        found = self.lookup(column)
        if found is not None:
            self._read(found[1])
            return
        select = column.parent_select
        aliases = {p.alias.casefold() for p in select.expressions if isinstance(p, exp.Alias)} if select else set()
        if column.table or column.name.casefold() not in aliases:
            raise NotPartitionwise  # an unknown column (the other classes' refusal names it)

    def _read(self, attr: Attr | None) -> None:
        if attr is not None and attr.alias in self.walk.read:
            self.walk.read[attr.alias].add(attr.column)

    def whole_rows(self) -> list[exp.Expr] | None:
        """Column references telling apart the rows of the items joined but those equal in every
        column (interchangeable to a window: each gets the other's value, the rows stay the same):
        each item's key, or every column of one with none known; None when one has unnamed columns
        or a column of a table's MAP column (Spark cannot order by it)."""
        types = {(o.alias, c.casefold()): t for o in self.walk.occurrences for c, t in o.master.columns}
        references: list[exp.Expr] = []
        for item in self.items:
            if item.by_key:
                continue
            if item.rows.row_key:
                references += [exp.column(n, table=item.alias) for n in item.rows.row_key]
                continue
            for name, attr in item.rows.columns:
                mapped = attr is not None and types.get((attr.alias, attr.column.casefold()), "").lower().startswith(
                    "map"
                )
                if name is None or mapped:
                    return None
                references.append(exp.column(name, table=item.alias))
        return references

    def row_key(self) -> list[exp.Expr] | None:
        """Column references identifying a row of the items joined (None: unknown)."""
        keys: list[exp.Expr] = []
        for item in self.items:
            if item.by_key:
                continue
            if item.rows.row_key is None:
                return None
            keys += [exp.column(k, table=item.alias) for k in item.rows.row_key]
        return keys


def _generated(lateral: exp.Lateral) -> _Item:
    """The rows a ``LATERAL VIEW`` generates from each row (constructs.row_generator): its columns,
    computed (they carry nothing), under its alias; the position tells apart the rows a
    ``posexplode`` generates from one row, nothing those of another generator."""
    alias = lateral.args.get("alias")
    names = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
    if not names:
        raise UnsupportedViewError(
            describe(lateral),
            "the columns it generates have no names",
            "Name them after the view's alias: LATERAL VIEW explode(tags) t AS tag",
        )
    position = isinstance(lateral.this, (exp.Posexplode, exp.PosexplodeOuter))
    key = (names[0].casefold(),) if position else None
    return _Item(alias.name if isinstance(alias, exp.TableAlias) else "", _Rows([(n, None) for n in names], key), False)


def _scalar(subquery: exp.Subquery) -> bool:
    """Whether a parenthesised query is a scalar subquery: in an expression, not an IN's list."""
    parent = subquery.parent
    return not relation_position(subquery) and not (isinstance(parent, exp.In) and parent.args.get("query") is subquery)


def _correlated(select: exp.Select, scope: _Scope) -> frozenset[Attr]:
    """The attributes of a subquery's own columns its WHERE equates to columns of the query around
    it (its correlation)."""
    if scope.outer is None:
        return frozenset()
    where = select.args.get("where")
    found = set()
    for mine, other in _equated_columns(where.this if where is not None else None):
        own, outside = scope.lookup(mine, here_only=True), scope.lookup(other, here_only=True)
        if own is not None and own[1] is not None and outside is None and scope.outer.lookup(other) is not None:
            found.add(own[1])
    return frozenset(found)


def _equated_columns(condition: exp.Expr | None) -> Iterator[tuple[exp.Column, exp.Column]]:
    """The two columns of each equality conjunct of ``condition``, both ways round."""
    for conjunct in split_conjuncts(condition):
        if isinstance(conjunct, (exp.EQ, exp.NullSafeEQ)):
            a, b = conjunct.this, conjunct.expression
            if isinstance(a, exp.Column) and isinstance(b, exp.Column):
                yield a, b
                yield b, a


def _mark_joined_by_key(select: exp.Select, scope: _Scope) -> None:
    """Mark the items joined on their whole row key (``orders left join per_order on per_order.order_id
    = orders.order_id``, ``using (order_id)``): equalities of their key columns to columns of the
    items before them, in their own ON."""
    joins = select.args.get("joins") or ()
    if any((j.args.get("side") or "").upper() in ("RIGHT", "FULL") for j in joins):
        return  # (the rows it null-extends are told apart by the keys of both sides)
    for position, (join, item) in enumerate(zip(joins, scope.items[1:]), start=1):
        if item.rows.row_key is None:
            continue
        earlier = scope.items[:position]
        equated = {u.name.casefold() for u in join.args.get("using") or ()}
        for mine, other in _equated_columns(join.args.get("on")):
            found, against = scope.lookup(mine), scope.lookup(other)
            if found is not None and found[0] is item and against is not None and any(against[0] is i for i in earlier):
                equated.add(mine.name.casefold())
        item.by_key = set(item.rows.row_key) <= equated


def _whole_row(columns: list[tuple[str | None, Attr | None]]) -> tuple[str, ...] | None:
    """Every column of constant rows, as the names that tell them apart (rows equal in all of them
    are interchangeable: a window's ties among them change nothing), or None when one is unnamed."""
    names = [n.casefold() for n, _ in columns if n]
    return tuple(names) if len(names) == len(columns) else None


def _requalify(select: exp.Select | None, old: str, new: str) -> None:
    """Column references qualified by ``old`` that read an item of ``select``, by ``new``: its own
    and those of the semi joins' subqueries in it that have no item called ``old``."""
    if select is None:
        return
    folded = old.casefold()
    for column in list(select.find_all(exp.Column)):
        if not column.table or column.table.casefold() != folded:
            continue
        reader = column.parent_select
        while reader is not None and reader is not select and folded not in _item_aliases(reader):
            reader = reader.parent_select
        if reader is select:
            column.set("table", exp.to_identifier(new))


def _item_aliases(select: exp.Select) -> set[str]:
    items = [select.args["from_"].this] if select.args.get("from_") else []
    items += [j.this for j in select.args.get("joins") or ()]
    return {i.alias_or_name.casefold() for i in items}


def _own_columns(select: exp.Select) -> Iterator[exp.Column]:
    """The column references of a SELECT's own clauses (not of the queries inside it)."""
    for column in select.find_all(exp.Column):
        if column.parent_select is select:
            yield column


def _outputs(select: exp.Select, scope: _Scope) -> list[tuple[str | None, tuple[str, str] | None, Attr | None]]:
    """(output name, the (item alias, column) it selects as it is, the attribute it carries) per
    column of a SELECT, stars expanded."""
    found: list[tuple[str | None, tuple[str, str] | None, Attr | None]] = []
    for projection in select.expressions:
        star = projection if isinstance(projection, exp.Star) else None
        qualifier = None
        if isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
            star, qualifier = projection.this, projection.table
        if star is not None:
            if any(star.args.get(k) for k in ("replace", "rename")):
                raise NotPartitionwise
            excluded = {c.name.casefold() for c in star.args.get("except") or ()}
            if not qualifier and any(i.using for i in scope.items):
                found += [c for c in _star_over_using(select, scope) if c[0] is None or c[0].casefold() not in excluded]
                continue
            for item in scope.items:
                if qualifier and qualifier.casefold() != item.alias.casefold():
                    continue
                found += [
                    (n, (item.alias, n), None if item.nullable else a)
                    for n, a in item.rows.columns
                    if n is not None and n.casefold() not in excluded
                ]
            continue
        if isinstance(projection, exp.Aliases):  # a generator's columns (constructs.row_generator)
            found += [(n.name, None, None) for n in projection.expressions]
            continue
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        name = projection.alias_or_name or None
        source = scope.lookup(inner) if isinstance(inner, exp.Column) else None
        if source is None:
            found.append((name, None, scope.attr(inner) if isinstance(inner, exp.Coalesce) else None))
        else:
            item, attr = source
            found.append((name, (item.alias, inner.name), None if scope.nulled(item, inner) else attr))
    return found


def _star_over_using(select: exp.Select, scope: _Scope) -> list[tuple[str | None, tuple[str, str] | None, Attr | None]]:
    """The columns ``*`` selects over joins USING columns, in Spark's order: each join's USING columns
    first (read by the name alone), then the other columns of what is joined before it, then those
    of the item it joins; the columns of LATERAL VIEWs last."""
    Column = tuple[str | None, tuple[str, str] | None, Attr | None]

    def own(item: _Item) -> list[Column]:
        return [(n, (item.alias, n), None if item.nullable else a) for n, a in item.rows.columns if n is not None]

    joins = select.args.get("joins") or ()
    columns = own(scope.items[0])
    for join, item in zip(joins, scope.items[1:]):
        names = [u.name for u in join.args.get("using") or ()]
        folded = {n.casefold() for n in names}
        keys: list[Column] = []
        for name in names:
            owner = next(i for i in scope.items if name.casefold() in i.using)
            _, always = owner.using[name.casefold()]
            keys.append((name, None if always else (owner.alias, name), scope.attr(exp.column(name))))
        rest = [c for c in [*columns, *own(item)] if c[0] is None or c[0].casefold() not in folded]
        columns = [*keys, *rest]
    for item in scope.items[1 + len(joins) :]:  # LATERAL VIEWs
        columns += own(item)
    return columns


def _null_rejected(select: exp.Select, discarded: frozenset[str]) -> dict[int, frozenset[str]]:
    """Per FROM or JOIN item of ``select`` (by position, 0 the FROM item), the names of its columns
    whose NULL discards a row of the join: read alone by a condition no NULL satisfies
    (null_rejection.rejected_by_conditions), or selected as they are under a name of ``discarded``
    (the columns whose NULL rows the query reading ``select`` discards) where no aggregate or
    window mixes those rows with others (grouped by the column, every window partitioned by it). A
    LEFT JOIN one of whose columns is so is an inner join: the rows it null-extends are discarded
    (``payments left join orders ... group by orders.customer_id``, the groups then joined to
    customers on ``customer_id``)."""
    aliases = null_rejection.item_aliases(select)
    found = null_rejection.rejected_by_conditions(select)
    if discarded:
        groups = _group_items(select) if select.args.get("group") is not None or _is_aggregate(select) else None
        windows = _windows(select)
        for projection in select.expressions:
            selected = unparenthesized(projection.this if isinstance(projection, exp.Alias) else projection)
            if (
                projection.alias_or_name.casefold() not in discarded
                or not isinstance(selected, exp.Column)
                or isinstance(selected.this, exp.Star)
            ):
                continue
            at = null_rejection.position(selected, select, aliases)
            if at is None:
                continue
            if groups is not None and not any(_same_column(selected, g, select, aliases) for g in groups):
                continue
            if all(
                any(_same_column(selected, p, select, aliases) for p in w.args.get("partition_by") or ())
                for w in windows
            ):
                found.setdefault(at, set()).add(selected.name.casefold())
    return {at: frozenset(names) for at, names in found.items()}


def _same_column(column: exp.Column, other: exp.Expr, select: exp.Select, aliases: list[str]) -> bool:
    other = unparenthesized(other)
    return (
        isinstance(other, exp.Column)
        and other.name.casefold() == column.name.casefold()
        and null_rejection.position(other, select, aliases) == null_rejection.position(column, select, aliases)
    )


def _group_by_all_written_out(statement: exp.Select) -> exp.Select:
    """``statement`` with each ``GROUP BY ALL`` in it written as the GROUP BY it is: every
    selected expression that aggregates nothing."""
    for select in statement.find_all(exp.Select):
        group = select.args.get("group")
        if group is None or not group.args.get("all"):
            continue
        items = [p.this if isinstance(p, exp.Alias) else p for p in select.expressions]
        if any(isinstance(i, exp.Star) or (isinstance(i, exp.Column) and isinstance(i.this, exp.Star)) for i in items):
            raise NotPartitionwise  # (beside a star it stands for columns only the star knows)
        select.set("group", exp.Group(expressions=[i.copy() for i in items if not functions.contains_aggregate(i)]))
    return statement


def _group_items(select: exp.Select) -> list[exp.Expr]:
    """The GROUP BY items, an ordinal or a projection's alias read as the projection."""
    group = select.args.get("group")
    items = []
    projections = select.expressions
    aliases = {p.alias.casefold(): p.this for p in projections if isinstance(p, exp.Alias)}
    for item in group.expressions if group is not None else ():
        if isinstance(item, exp.Literal) and item.is_int:
            if not 1 <= int(item.name) <= len(projections):
                raise NotPartitionwise  # (refused by the other classes, naming it)
            projection = projections[int(item.name) - 1]
            item = projection.this if isinstance(projection, exp.Alias) else projection
        elif isinstance(item, exp.Column) and not item.table and item.name.casefold() in aliases:
            item = aliases[item.name.casefold()]
        if any(functions.is_aggregate(n) for n in item.walk()):
            raise NotPartitionwise  # (refused by the other classes, naming it)
        items.append(item)
    return items


def _is_aggregate(select: exp.Select) -> bool:
    places = [*select.expressions, *([select.args["having"]] if select.args.get("having") else [])]
    return any(
        functions.is_aggregate(n) and not functions.is_windowed(n) and n.parent_select is select
        for p in places
        for n in p.walk()
    )


def _windows(select: exp.Select) -> list[exp.Window]:
    places = [*select.expressions, *([select.args["qualify"]] if select.args.get("qualify") else [])]
    return [w for p in places for w in p.find_all(exp.Window) if w.parent_select is select]


def _row_key(
    select: exp.Select, outputs: list[tuple[str | None, tuple[str, str] | None, Attr | None]], scope: _Scope
) -> tuple[str, ...] | None:
    """Names of a SELECT's output rows that identify one, when known."""
    if select.args.get("distinct") is not None:
        return tuple(n.casefold() for n, _, _ in outputs if n is not None)
    selected = {
        (s[0].casefold(), s[1].casefold()): n.casefold() for n, s, _ in outputs if n is not None and s is not None
    }
    if select.args.get("group") is not None:
        keys = []
        for item in _group_items(select):
            found = scope.lookup(item) if isinstance(item, exp.Column) else None
            name = selected.get((found[0].alias.casefold(), item.name.casefold())) if found is not None else None
            if name is None:
                name = next(
                    (
                        (p.alias_or_name or "").casefold()
                        for p in select.expressions
                        if (p.this if isinstance(p, exp.Alias) else p) == item and p.alias_or_name
                    ),
                    None,
                )
            if name is None:
                return None
            keys.append(name)
        return tuple(keys)
    if _is_aggregate(select):
        return ()
    names: list[str] = []
    for joined in scope.items:
        if joined.by_key:
            continue
        if joined.rows.row_key is None:
            return None
        for key in joined.rows.row_key:
            name = selected.get((joined.alias.casefold(), key))
            if name is None:
                return None
            names.append(name)
    return tuple(names)


def _bare(expression: exp.Expr) -> exp.Expr:
    """``expression`` without table qualifiers and parentheses (to compare with GROUP BY items)."""
    copy = expression.copy()
    for column in copy.find_all(exp.Column):
        column.set("table", None)
    while isinstance(copy, exp.Paren):
        copy = copy.this
    return copy


def _refuse_ungrouped(select: exp.Select) -> None:
    """A grouped SELECT reads each column in an aggregate, in a GROUP BY expression, or as the
    name of one of its outputs (HAVING may)."""
    grouped = {_bare(i) for i in _group_items(select)}
    outputs = {p.alias.casefold() for p in select.expressions if isinstance(p, exp.Alias)}

    def ungrouped(node: exp.Expr) -> exp.Expr | None:
        if _bare(node) in grouped or (functions.is_aggregate(node) and not functions.is_windowed(node)):
            return None
        if isinstance(node, exp.Column):
            return None if isinstance(node.this, exp.Star) or node.name.casefold() in outputs else node
        if isinstance(node, exp.Query):
            return None  # (a subquery's own)
        for child in node.iter_expressions():
            found = ungrouped(child)
            if found is not None:
                return found
        return None

    places = [p.this if isinstance(p, exp.Alias) else p for p in select.expressions]
    places += [select.args[k].this for k in ("having", "qualify") if select.args.get(k) is not None]
    for place in places:
        found = ungrouped(place)
        if found is not None:
            raise UnsupportedViewError(
                describe(found),
                "a column that is neither aggregated nor in GROUP BY",
                "Add the expression to GROUP BY, or aggregate it",
            )


def _refuse_constructs(statement: exp.Expr) -> None:
    """What no refresh maintains, wherever it is; joins, set operations, DISTINCT, HAVING and
    QUALIFY are partitioned like the rest, and windows are checked as they are walked."""
    for refusal in unsupported_constructs(statement, windowed=True, partitioned=True):
        raise refusal


def analyze_partitionwise(statement: exp.Query, master_of: Callable[[exp.Table], MasterTable]) -> ViewDefinition:
    """The PER_PARTITION definition of ``statement``; NotPartitionwise when it is not of the shapes
    this class reads, UnsupportedViewError when it is but cannot be maintained so.
    ``master_of``: the master a table node names (Resolver.master)."""
    _refuse_constructs(statement)
    if isinstance(statement, exp.SetOperation):  # its rows, selected
        statement = exp.select("*").from_(
            exp.Subquery(this=statement.copy(), alias=exp.TableAlias(this=exp.to_identifier("_mv_set")))
        )
    if not isinstance(statement, exp.Select):
        raise NotPartitionwise
    template = _group_by_all_written_out(statement.copy())
    walk = _Walk(master_of)
    top = walk.rows(template, {})
    for node in list(template.find_all(exp.Select, exp.SetOperation)):
        node.set("with_", None)  # (every CTE reference is a derived table now)
    if not _well_formed(template):
        raise NotPartitionwise
    if not walk.occurrences:
        walk.break_ties()
        return _constant(template, top, walk.tie_broken)
    if not walk.constraints:
        # nothing partitions its rows: any key partitions them (each row its own partition), the
        # first table's whose key every other table is joined on (or by its key to)
        for occurrence in walk.occurrences:
            key = frozenset(
                walk.root(Attr(occurrence.alias, occurrence.master.find_column(k) or k)) for k in occurrence.master.key
            )
            try:
                return _partitioned_by(walk, template, top, key)
            except UnsupportedViewError:
                continue
        # else a column every table is joined by (a FULL JOIN on columns no key holds: the rows of
        # one value of it are the join of the tables' rows of that value)
        for joined in _joined_by_all(walk):
            try:
                return _partitioned_by(walk, template, top, frozenset({joined}))
            except UnsupportedViewError:
                continue
        raise NotPartitionwise  # the other classes' refusal stands
    partitioning = {id(c.node) for c in walk.constraints}  # (a window of constant rows partitions nothing)
    windows = [w for w in template.find_all(exp.Window) if id(w) in partitioning]
    unpartitioned = next((w for w in windows if not w.args.get("partition_by")), None)
    if unpartitioned is not None:
        raise unpartitioned_window(unpartitioned)
    classes = frozenset.intersection(*(frozenset(walk.root(a) for a in c.attrs) for c in walk.constraints))
    if classes:
        walk.break_ties()
        return _by_common_columns(walk, template, top, classes)
    if not windows and len(walk.occurrences) == 1:
        raise NotPartitionwise  # (a global aggregate, groupings alone: the other classes' refusal says it)
    for classes, local in _local_splits(walk):
        walk.break_ties()
        try:
            return _partitioned_by(walk, template, top, classes, local)
        except _NotLocal:
            continue
    what = (
        "its windows (with the query's groupings, DISTINCTs and set operations) share no PARTITION BY column"
        if windows
        else "its groupings, DISTINCTs and set operations share no column they all group by"
    )
    raise UnsupportedViewError(
        describe(windows[0] if windows else next(c.node for c in walk.constraints)),
        f"{what} of the tables it reads, so no part of the view depends only on the rows a change touched",
        HINT,
    )


def _joined_by_all(walk: _Walk) -> list[Attr]:
    """The attributes join equalities give a column of every occurrence, in the occurrences' order."""
    joined: dict[str, set[Attr]] = {o.alias: set() for o in walk.occurrences}
    for a, b in walk.links:
        for attr in (a, b):
            if attr.alias in joined:
                joined[attr.alias].add(walk.root(attr))
    common = set.intersection(*joined.values()) if joined else set()
    return sorted(common, key=walk.order)


MAX_PARTITION_SUBSETS = 64  # the most coarser partitions tried when the finest one is refused


def _by_common_columns(walk: _Walk, template: exp.Select, top: _Rows, classes: frozenset[Attr]) -> ViewDefinition:
    """The query partitioned by ``classes`` (the columns every grouping, window, DISTINCT and set
    operation partitions by), else by as many of them as it can be: each of those queries still
    keeps its groups and window partitions within one partition of fewer columns, so a refresh
    of the partitions a change touched stays exact; it recomputes more rows per change. ``group
    by c.customer_id, c.name`` over a table joined on ``customer_id`` alone (which has no
    ``name``) is partitioned by ``customer_id``. The refusal of ``classes`` when none can."""
    try:
        return _partitioned_by(walk, template, top, classes)
    except UnsupportedViewError as refusal:
        ordered = sorted(classes, key=walk.order)
        subsets = (
            frozenset(subset)
            for size in range(len(ordered) - 1, 0, -1)
            for subset in itertools.combinations(ordered, size)
        )
        for subset in itertools.islice(subsets, MAX_PARTITION_SUBSETS):
            try:
                return _partitioned_by(walk, template, top, subset)
            except UnsupportedViewError:
                continue
        raise refusal


class _NotLocal(Exception):
    """A grouping or window of lookups does not partition their rows by what matches them."""


def _tables_under(node: exp.Expr) -> frozenset[str]:
    """The aliases of the tables the query holding ``node`` (a window, GROUP BY, DISTINCT or set
    operation) reads, its subqueries' included."""
    query = node if isinstance(node, (exp.Select, exp.SetOperation)) else node.parent_select
    assert query is not None
    return frozenset(
        t.alias for t in query.find_all(exp.Table) if t.name == PER_PARTITION_MASTER and not t.args.get("db")
    )


def _local_splits(walk: _Walk) -> Iterator[tuple[frozenset[Attr], list[_Constraint]]]:
    """The ways to partition a query whose constraints share no attribute when the groupings and
    windows of some part of it read only lookups (tables without a partition column, matched to
    the others): ``with latest_user as (select *, row_number() over (partition by user_id ...) from
    users_history) ... join latest_user u on u.user_id = t.assignee_id ... partition by t.ticket_id``.
    Each: the partition (the attributes every other constraint shares, found from one constraint's
    and narrowed until it holds) and the constraints left to the lookups (_partitioned_by checks
    that each partitions their rows by the column matching them)."""
    roots = [frozenset(walk.root(a) for a in c.attrs) for c in walk.constraints]
    tables = [_tables_under(c.node) for c in walk.constraints]
    attrs = set(walk.parent) | set(walk.parent.values()) | {a for c in walk.constraints for a in c.attrs}
    has: dict[str, set[Attr]] = {o.alias: set() for o in walk.occurrences}
    for attr in attrs:
        if attr.alias in has:
            has[attr.alias].add(walk.root(attr))
    tried: set[frozenset[Attr]] = set()
    for seed in roots:
        classes = seed
        while classes:
            spanning = [i for i, read in enumerate(tables) if any(classes <= has.get(t, set()) for t in read)]
            narrowed = frozenset.intersection(classes, *(roots[i] for i in spanning))
            if narrowed == classes:
                break
            classes = narrowed
        if not classes or classes in tried or len(spanning) in (0, len(roots)):
            continue
        tried.add(classes)
        yield classes, [c for i, c in enumerate(walk.constraints) if i not in spanning]


def _partitioned_by(
    walk: _Walk, template: exp.Select, top: _Rows, classes: frozenset[Attr], local: list[_Constraint] | None = None
) -> ViewDefinition:
    """The definition of the query walked, partitioned by ``classes``; UnsupportedViewError (before
    the template is changed) when a table has no column in them nor is a lookup, or the outer
    query reads none; _NotLocal when a constraint of ``local`` (those of lookups' rows alone) does
    not partition the lookups' rows by the column matching them."""
    ordered = sorted(classes, key=walk.order)
    partitions: dict[str, tuple[exp.Expr, ...]] = {}
    members = {
        c: sorted((a for a in walk.parent.keys() | classes if walk.root(a) == c), key=walk.order) for c in ordered
    }
    missing: list[tuple[MasterOccurrence, Attr]] = []
    for occurrence in walk.occurrences:
        columns = []
        for attr_class in ordered:
            own = next((a for a in members[attr_class] if a.alias == occurrence.alias), None)
            if own is None:
                missing.append((occurrence, attr_class))
                break
            columns.append(column_node(occurrence.alias, own.column))
        else:
            partitions[occurrence.alias] = tuple(columns)
    lookups = _lookups(walk, missing, partitions)
    for constraint in local or ():
        _refuse_unmatched_partition(walk, constraint, lookups)
    _refuse_unnamed_outputs(template, top)
    partition_columns: list[str] = []
    hidden: list[HiddenColumn] = []
    first = next(o for o in walk.occurrences if o.alias in partitions)
    scope = walk.scopes[id(template)]
    # per hidden column: its projections, in the queries below the outer one (innermost first), then in it
    threads: list[list[tuple[exp.Select, exp.Alias]]] = []
    for attr_class, expression in zip(ordered, partitions[first.alias]):
        holder = next(
            (n for n, a in top.columns if n is not None and a is not None and walk.root(a) == attr_class), None
        )
        if holder is None:
            holder = f"{PARTITION}{len(hidden) + 1}"
            carried = _threaded(template, walk, attr_class, holder)
            if carried is None:
                raise UnsupportedViewError(
                    f"{attr_class.alias}.{attr_class.column}",
                    "the query partitions its rows by this column but no query it reads selects it (or a group "
                    "key equal to it) from rows no outer join null-extends, so the view's rows of a partition "
                    "cannot be found",
                    f"Select {attr_class.column} in the outer query (or in the query it reads)",
                )
            threads.append(carried)
            hidden.append(HiddenColumn(holder, expression.copy(), HiddenPurpose.PARTITION))
        partition_columns.append(holder)
    if any(len(projections) > 1 for projections in threads):
        _expand_stars(template, scope)  # (a star would select the columns added below)
    holders = {h.name for h in hidden}
    for projections in threads:
        for select, projection in projections:  # innermost first
            for column in projection.find_all(exp.Column):
                if column.name not in holders:  # (a master column the hidden column reads)
                    walk.scopes[id(select)].record(column)
            select.append("expressions", projection)
    outputs = tuple(
        OutputColumn(n, column_node(a.alias, a.column) if a is not None else exp.column(n))
        for n, a in top.columns
        if n is not None
    )
    read = MappingProxyType(
        {o.alias: frozenset(walk.read[o.alias] or {o.master.column_names[0]}) for o in walk.occurrences}
    )
    return ViewDefinition(
        occurrences=tuple(walk.occurrences),
        joins=(),
        where_conjuncts=(),
        outputs=outputs,
        group_by=(),
        is_aggregate=False,
        view_class=ViewClass.PER_PARTITION,
        hidden_columns=tuple(hidden),
        null_supplying=frozenset(),
        group_key_columns=(),
        referenced_columns=read,
        partition_query=PartitionQuery(
            template,
            partitions[first.alias],
            tuple(partition_columns),
            walk.tie_broken,
            MappingProxyType(partitions),
            MappingProxyType(lookups),
            _row_filters(walk, template),
        ),
    )


def _row_filters(walk: _Walk, template: exp.Select) -> tuple[RowFilter, ...]:
    """The conjuncts of the query that read the columns of one table item alone, no subquery,
    aggregate or window in them: in WHERE (the item not null-extended there), or in the ON of an
    inner or LEFT join of that item (whether its rows are in the join)."""
    found = []
    for number, select in enumerate(template.find_all(exp.Select)):
        scope = walk.scopes.get(id(select))
        if scope is None:
            continue
        where = select.args.get("where")
        conditions: list[tuple[int | None, exp.Expr | None, str | None]] = [
            (None, where.this if where is not None else None, None)
        ]
        for at, join in enumerate(select.args.get("joins") or ()):
            if (join.args.get("side") or "").upper() in ("", "LEFT") and not join.args.get("using"):
                conditions.append((at, join.args.get("on"), join.this.alias_or_name))
        for join, condition, joined in conditions:
            for position, conjunct in enumerate(split_conjuncts(condition)):
                owner = _one_item(scope, conjunct, joined)
                if owner is not None:
                    found.append(RowFilter(number, position, owner, join))
    return tuple(found)


def _one_item(scope: _Scope, conjunct: exp.Expr, joined: str | None) -> str | None:
    """The alias of the one table item whose columns ``conjunct`` reads alone (None: another or
    several, or a subquery, aggregate or window in it): a WHERE conjunct's (``joined`` None) not
    null-extended, an ON conjunct's the item its join joins (``joined``)."""
    if conjunct.find(exp.Query, exp.Window) is not None or any(functions.is_aggregate(n) for n in conjunct.walk()):
        return None
    owners: set[str | None] = set()
    for column in conjunct.find_all(exp.Column):
        read = scope.lookup(column)
        item = read[0] if read is not None else None
        own = item is not None and any(item is i for i in scope.items) and item.table
        if item is not None:
            own = own and (not item.nullable if joined is None else item.alias.casefold() == joined.casefold())
        owners.add(item.alias if own and item is not None else None)
    return owners.pop() if len(owners) == 1 else None


def _refuse_unnamed_outputs(template: exp.Select, top: _Rows) -> None:
    """An output column without a name (an expression with no AS), or named badly, refused."""
    unnamed = next((p for p in template.expressions if not p.alias_or_name and not isinstance(p, exp.Aliases)), None)
    if unnamed is not None:
        raise UnsupportedViewError(describe(unnamed), "an output column needs a name", "Name it with AS")
    refuse_bad_output_names([n for n, _ in top.columns if n is not None])


def _constant(template: exp.Select, top: _Rows, tie_broken: bool) -> ViewDefinition:
    """The definition of a query that reads no table (a stub, a date spine): rows that never change
    but with the time it reads (a refresh has nothing to do; one that finds the time moved
    recomputes it)."""
    _refuse_unnamed_outputs(template, top)
    names = [n for n, _ in top.columns]
    if None in names:
        raise UnsupportedViewError(describe(template), "an output column needs a name", "Name it with AS")
    return ViewDefinition(
        occurrences=(),
        joins=(),
        where_conjuncts=(),
        outputs=tuple(OutputColumn(n, exp.column(n)) for n in names if n is not None),
        group_by=(),
        is_aggregate=False,
        view_class=ViewClass.PER_PARTITION,
        hidden_columns=(),
        null_supplying=frozenset(),
        group_key_columns=(),
        referenced_columns=MappingProxyType({}),
        partition_query=PartitionQuery(template, (), (), tie_broken),
    )


def _lookups(
    walk: _Walk, missing: list[tuple[MasterOccurrence, Attr]], partitions: Mapping[str, tuple[exp.Expr, ...]]
) -> dict[str, Lookup]:
    """How each occurrence without a partition column is matched to one that has one, directly
    (a join equality, ``IN``, ``EXISTS``) or through lookups found before it (a chain of
    dimensions); UnsupportedViewError naming the first that is matched to none."""
    lookups: dict[str, Lookup] = {}
    pending = list(missing)
    while pending:
        for occurrence, attr_class in pending:
            lookup = _matched(walk, occurrence.alias, partitions) or _matched(walk, occurrence.alias, lookups)
            if lookup is not None:
                lookups[occurrence.alias] = lookup
                pending.remove((occurrence, attr_class))
                break
        else:
            occurrence, attr_class = pending[0]
            raise UnsupportedViewError(
                occurrence.master.name,
                f"the query partitions its rows by {attr_class.alias}.{attr_class.column}, and this table is neither "
                "joined on a column equal to it nor matched by a column to a table that is (directly or through "
                "other tables): a change to one of its rows could change every partition",
                HINT,
            )
    return lookups


def _refuse_unmatched_partition(walk: _Walk, constraint: _Constraint, lookups: Mapping[str, Lookup]) -> None:
    """_NotLocal unless ``constraint``, a grouping or window over lookups alone, partitions their rows
    by what matches them: each of its tables matched by a column it partitions by, or to another
    of its tables (a dimension of a dimension). A change to a lookup row then changes only the
    rows of its own value of that column, which the partitions of the rows matching it hold."""
    partitioned = {walk.root(a) for a in constraint.attrs}
    read = _tables_under(constraint.node)
    for alias in read:
        lookup = lookups.get(alias)
        if lookup is None or not (walk.root(Attr(alias, lookup.column)) in partitioned or lookup.through in read):
            raise _NotLocal


def _matched(walk: _Walk, alias: str, to: Mapping[str, object]) -> Lookup | None:
    """The first join equality or ``IN`` matching a column of ``alias`` to an occurrence in ``to``."""
    for a, b in walk.links:
        if a.alias == alias and b.alias in to:
            return Lookup(a.column, b.alias, column_node(b.alias, b.column))
    for a, through, value, negated in walk.expression_links:
        if a.alias == alias and through in to:
            return Lookup(a.column, through, value.copy(), negated)
    return None


def _well_formed(template: exp.Select) -> bool:
    """Whether Spark can run the query as written: no aggregate in WHERE, ON or GROUP BY, no window
    function without OVER, and sqlglot writes it back as Spark SQL (else the other classes' refusal
    names what is wrong)."""
    for select in template.find_all(exp.Select):
        places = [
            select.args.get("where"),
            select.args.get("group"),
            *(j.args.get("on") for j in select.args.get("joins") or ()),
        ]
        for place in places:
            if place is not None and any(
                functions.is_aggregate(n) and not functions.is_windowed(n) and n.parent_select is select
                for n in place.walk()
            ):
                return False
    if any(isinstance(n, functions.WINDOW_ONLY_TYPES) and not functions.is_windowed(n) for n in template.walk()):
        return False
    try:
        render_expression(template)
    except SqlglotError:
        return False
    return True


def _carrier(scope: _Scope, walk: _Walk, attr_class: Attr) -> exp.Expr | None:
    """A column the outer SELECT reads that carries ``attr_class`` (to store as a hidden column):
    of an item no outer join null-extends, a FULL JOIN's USING column by its name alone, or the
    COALESCE of a column of each item when every one is null-extended (FULL JOINs: each row has
    one of them, its column equal to the others')."""
    columns = []
    for item in scope.items:
        for using, (carried, always) in item.using.items():
            if always and carried is not None and walk.root(carried) == attr_class:
                return exp.column(using)  # (a FULL JOIN's USING column: its name alone)
        own = next(
            (n for n, a in item.rows.columns if n is not None and a is not None and walk.root(a) == attr_class), None
        )
        if own is not None and not item.nullable:
            return exp.column(own, table=item.alias)
        columns.append(exp.column(own, table=item.alias) if own is not None else None)
    if len(columns) < 2 or any(c is None for c in columns):
        return None
    return exp.Coalesce(this=columns[0], expressions=columns[1:])


def _select_of(node: exp.Expr) -> exp.Select | None:
    while isinstance(node, exp.Subquery):
        node = node.this
    return node if isinstance(node, exp.Select) else None


def _threaded(
    select: exp.Select, walk: _Walk, attr_class: Attr, holder: str, outermost: bool = True
) -> list[tuple[exp.Select, exp.Alias]] | None:
    """The projections (each named ``holder``, innermost first) that make ``select`` select a column
    carrying ``attr_class``: its own column where one of its items selects one (a grouped SELECT:
    its group key), else that of a derived table it reads, which selects it the same way from
    below, through items no outer join null-extends and SELECTs that neither group by another
    column, aggregate all rows nor have DISTINCT; a star over the item selects it already (but in
    the ``outermost`` SELECT, whose stars are written out: it stores its columns in order).
    Nothing is changed here; None: no way."""

    def named(expression: exp.Expr) -> exp.Alias:
        return exp.Alias(this=expression, alias=exp.to_identifier(holder))

    scope = walk.scopes[id(select)]
    if select.args.get("group") is not None:
        key = next(
            (g for g in _group_items(select) if (a := scope.attr(g)) is not None and walk.root(a) == attr_class),
            None,
        )
        return [(select, named(key.copy()))] if key is not None else None
    direct = _carrier(scope, walk, attr_class)
    if direct is not None:
        return [(select, named(direct))]
    if select.args.get("distinct") is not None or _is_aggregate(select):
        return None
    for item in scope.items:
        if item.nullable or item.body is None or id(item.body) not in walk.scopes:
            continue
        below = _threaded(item.body, walk, attr_class, holder, outermost=False)
        if below is None:
            continue
        if not outermost and any(_is_star(p, item.alias) for p in select.expressions):
            return below
        return [*below, (select, named(exp.column(holder, table=item.alias)))]
    return None


def _expand_stars(select: exp.Select, scope: _Scope) -> None:
    """Write the stars of ``select`` as the columns they select today (in place)."""
    if not any(_is_star(p) for p in select.expressions):
        return
    expressions: list[exp.Expr] = []
    for projection in select.expressions:
        if not _is_star(projection):
            expressions.append(projection)
            continue
        alone = select.copy()
        alone.set("expressions", [projection.copy()])
        for name, source, _ in _outputs(alone, scope):
            assert name is not None  # (a star's columns are named)
            column = exp.column(name, table=source[0]) if source is not None else exp.column(name)
            expressions.append(column)
    select.set("expressions", expressions)


def _is_star(projection: exp.Expr, over: str | None = None) -> bool:
    """Whether ``projection`` is a star (``over``: one that selects the columns of that item)."""
    if isinstance(projection, exp.Star):
        return True
    if not (isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)):
        return False
    return over is None or projection.table.casefold() == over.casefold()
