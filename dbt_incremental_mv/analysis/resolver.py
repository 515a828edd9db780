"""Name resolution: from the written query to expressions over master-table occurrences
(resolved.py), through the scope of each SELECT (scope.py).

Every FROM item is reduced to one occurrence of a master table, and every column reference
(qualified or not, through any number of CTEs and derived tables) to an expression over
``<alias>.<master column>``. Two kinds of nesting are merged away:

* a *simple* CTE or derived table (one FROM item, no join, no aggregation) is a projection and a
  filter over one master: it becomes an occurrence of that master under the alias the outer
  query gives it, its columns are substituted by their expressions and its WHERE becomes a
  filter of that occurrence (where that filter goes in the join is decided in ``joins``);
* a query whose only FROM item is a CTE or derived table that joins or aggregates (dbt's
  ``select * from final``) is that inner query with the outer projection, filter and grouping
  applied on top of it;
* a CTE or derived table that joins (without aggregating), itself joined to more tables (dbt's
  import CTEs joined in a mart), is spliced into the outer join chain: its occurrences, renamed
  ``<its alias>_<their alias>``, take its place, and its WHERE and the ON of the join to it become
  filters of the whole join (``_part``; ``_check_splice`` refuses where that would change the
  result).

Anything else nested is refused: its result could not be maintained as part of one join.

An occurrence's alias is the alias written in SQL, else the table (or CTE) name, lowercased as
Spark compares them. Two FROM items with the same name (a self-join without aliases) are
refused rather than renamed: every qualifier the user wrote must keep meaning one table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from sqlglot import exp

from dbt_incremental_mv.analysis import functions, pullup
from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe
from dbt_incremental_mv.analysis.joins import references
from dbt_incremental_mv.analysis.model import JoinKind, MasterTable
from dbt_incremental_mv.analysis.resolved import (
    OccurrenceSource,
    Projection,
    RawJoin,
    ResolvedQuery,
    column_node,
    split_conjuncts,
    unparenthesized,
)
from dbt_incremental_mv.analysis.scope import Scope, ScopeEntry

_SEPARATE_MODEL_HINT = "Make it a separate fast_refresh model and ref() it: that model maintains it, this one reads it"


@dataclass(frozen=True)
class _Relation:
    """A FROM item reduced to one master: visible columns as expressions, plus its filters."""

    master: MasterTable
    columns: tuple[tuple[str, exp.Expr], ...]
    filters: tuple[exp.Expr, ...]


@dataclass(frozen=True)
class _Part:
    """What one FROM item of a joined query contributes to the join chain: its occurrences (one,
    or a spliced CTE's), the joins among them, the filters of the whole join it brings (a spliced
    CTE's WHERE) and the columns it shows the outer query."""

    occurrences: tuple[OccurrenceSource, ...]
    joins: tuple[RawJoin, ...]
    where: tuple[exp.Expr, ...]
    columns: tuple[tuple[str, exp.Expr], ...]
    label: str
    # of a CTE that aggregates (analysis/pullup.py): its GROUP BY, over the renamed occurrences
    group_keys: tuple[exp.Expr, ...] | None = None

    @property
    def aliases(self) -> frozenset[str]:
        return frozenset(o.alias for o in self.occurrences)

    @property
    def null_extended(self) -> frozenset[str]:
        """The occurrences a LEFT JOIN inside a spliced CTE null-extends."""
        return frozenset(j.alias for j in self.joins if j.kind is JoinKind.LEFT)


@dataclass(frozen=True)
class _Cte:
    name: str
    body: exp.Expr
    column_names: tuple[str, ...]
    env: Mapping[str, _Cte]


@dataclass(frozen=True)
class _Nested:
    """A CTE reference or derived table: its query, the CTEs that query sees, the column lists
    to apply to its output in turn (``WITH x(a, b)``, then ``AS y(c, d)``) and a label for
    messages."""

    body: exp.Expr
    env: Mapping[str, _Cte]
    column_lists: tuple[tuple[str, ...], ...]
    label: str


def alias_name(item: exp.Expr) -> str | None:
    alias = item.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.this is not None and alias.name:
        return alias.name
    return None


def _item_label(item: exp.Expr) -> str:
    """How messages name a FROM item: its alias, else its table name."""
    return alias_name(item) or (".".join(_table_parts(item)) if isinstance(item, exp.Table) else "subquery")


def _alias_columns(item: exp.Expr) -> tuple[str, ...]:
    alias = item.args.get("alias")
    if isinstance(alias, exp.TableAlias):
        return tuple(c.name for c in alias.columns)
    return ()


def _table_parts(table: exp.Table) -> tuple[str, ...]:
    return tuple(p.name for p in table.parts)


def _unwrap_subquery(item: exp.Expr) -> exp.Expr:
    body = item.this
    while isinstance(body, exp.Subquery):
        body = body.this
    return body


def _rename(
    columns: tuple[tuple[str, exp.Expr], ...], column_lists: tuple[tuple[str, ...], ...], label: str
) -> tuple[tuple[str, exp.Expr], ...]:
    """Apply column lists (``WITH x(a, b) AS``, then ``AS y(c, d)``) to a relation's columns."""
    for names in column_lists:
        if not names:
            continue
        if len(names) != len(columns):
            raise UnsupportedViewError(
                f"{label}({', '.join(names)})",
                f"the column list names {len(names)} columns but {label} has {len(columns)}",
                "Name every column exactly once",
            )
        columns = tuple((name, expression) for name, (_, expression) in zip(names, columns))
    return columns


def _refuse_duplicate_names(columns: Iterable[str], label: str) -> None:
    seen: set[str] = set()
    for name in columns:
        if name.casefold() in seen:
            raise UnsupportedViewError(
                name,
                f"{label} has more than one column named {name}",
                "Give each selected column a distinct name with AS",
            )
        seen.add(name.casefold())


class Resolver:
    """Resolves a parsed query against the masters the caller knows (keyed ``schema.table``)."""

    def __init__(self, masters: Mapping[str, MasterTable]) -> None:
        self._masters = {name.casefold(): master for name, master in masters.items()}

    # -- queries ------------------------------------------------------------------------------

    def query(self, select: exp.Expr, env: Mapping[str, _Cte] | None = None) -> ResolvedQuery:
        if not isinstance(select, exp.Select):
            raise UnsupportedViewError(
                describe(select),
                "only a SELECT query can define a fast_refresh model",
                "Make the model a single SELECT",
            )
        env = _with_env(select, env or {})
        from_ = select.args.get("from_")
        if from_ is None:
            raise UnsupportedViewError(describe(select), "the query reads no table", "Select from the master tables")
        joins = select.args.get("joins") or []
        if not joins and self._is_complex(from_.this, env):
            return self._layer_over(select, env, from_.this)
        return self._joined(select, env)

    def _joined(self, select: exp.Select, env: Mapping[str, _Cte]) -> ResolvedQuery:
        written_joins: list[exp.Join] = select.args.get("joins") or []
        items = [select.args["from_"].this] + [join.this for join in written_joins]
        aliases = [self._occurrence_alias(item) for item in items]
        for position, alias in enumerate(aliases):
            if alias in aliases[:position]:
                raise UnsupportedViewError(
                    alias,
                    "two FROM items have the same name (a self-join needs distinct aliases)",
                    "Give each occurrence its own alias, e.g. FROM t AS a JOIN t AS b ON ...",
                )
        taken = set(aliases)
        parts = [self._part(item, alias, env, taken) for item, alias in zip(items, aliases)]
        entries = [ScopeEntry(part.label, _qualifiers(item), part.columns) for item, part in zip(items, parts)]

        # each FROM item after the first: how it is joined, its ON resolved where it was written
        joined: dict[int, tuple[JoinKind, tuple[exp.Expr, ...], exp.Join]] = {}
        for position, join in enumerate(written_joins, start=1):
            using = _using_equalities(join, entries, position)
            if using:
                entries[position] = replace(entries[position], merged=frozenset(n.casefold() for n in using))
            visible = Scope(entries[: position + 1])  # ON sees the tables joined so far
            conjuncts = tuple(using.values()) + visible.resolve_conjuncts(join.args.get("on"))
            joined[position] = (_join_kind(join), conjuncts, join)
        chain = list(range(len(items)))
        swappable = len(parts) > 1 and len(parts[1].occurrences) == 1 and joined[1][0] is JoinKind.INNER
        if (
            parts[0].group_keys is not None
            and swappable
            and all(k is not JoinKind.RIGHT for k, _, _ in joined.values())
        ):
            # ``agg a JOIN t ON ...`` is ``t JOIN agg a ON ...``: the chain starts at ``t``
            # (analysis/pullup.py); the SELECT list still reads the FROM items as written
            chain = [1, 0, *chain[2:]]
            joined[0] = joined.pop(1)
        first = parts[chain[0]]
        if first.group_keys is not None:
            raise pullup.refusal(
                first.label, "it is the first FROM item", "Put a table it is inner joined to first in FROM"
            )

        occurrences = list(first.occurrences)
        joins = list(first.joins)
        where = list(first.where)
        if first.where and any(kind is JoinKind.RIGHT for kind, _, _ in joined.values()):
            raise _splice_error(first.label, "a RIGHT JOIN after it would null-extend the rows its WHERE keeps")
        pulled: list[tuple[int, _Part, JoinKind]] = []  # the aggregating CTEs, where and how joined
        for index, position in enumerate(chain[1:], start=1):
            kind, conjuncts, join = joined[position]
            part = parts[position]
            if part.group_keys is not None:
                pullup.check_join(
                    part.label, part.aliases, part.group_keys, conjuncts, kind, len(part.occurrences), part.columns
                )
                pulled.append((position, part, kind))
            if len(part.occurrences) == 1:
                joins.append(RawJoin(part.occurrences[0].alias, kind, conjuncts, join))
            else:
                _check_splice(part, join, conjuncts, [joined[p][2] for p in chain[index:]])
                # an inner join to a join: a cross join to its first occurrence, then its own
                # joins; the ON and its WHERE filter the whole (joins.py places each conjunct)
                joins.append(RawJoin(part.occurrences[0].alias, JoinKind.INNER, (), join))
                joins.extend(part.joins)
                where.extend(conjuncts + part.where)
            occurrences.extend(part.occurrences)

        if pulled:
            return self._pulled_up(select, entries, pulled, occurrences, joins, where)
        scope = Scope(entries)
        projections = self._projections(select, scope)
        return ResolvedQuery(
            occurrences=tuple(occurrences),
            joins=tuple(joins),
            where=tuple(where) + scope.resolve_conjuncts(_where(select)),
            projections=projections,
            group_by=self._group_by(select, scope, projections),
        )

    def _pulled_up(
        self,
        select: exp.Select,
        entries: list[ScopeEntry],
        pulled: list[tuple[int, _Part, JoinKind]],
        occurrences: list[OccurrenceSource],
        joins: list[RawJoin],
        where: list[exp.Expr],
    ) -> ResolvedQuery:
        """The join with an aggregating CTE as the aggregate over the join it equals
        (analysis/pullup.py): grouped by the selected columns of the other tables."""
        position, part, kind = pulled[0]
        if len(pulled) > 1:
            raise pullup.refusal(
                pulled[1][1].label, f"{part.label} aggregates too, and their rows would multiply each other's"
            )
        assert part.group_keys is not None
        entries[position] = replace(
            entries[position], columns=pullup.pulled_columns(part.columns, part.group_keys, kind is JoinKind.LEFT)
        )
        scope = Scope(entries)
        outer_where = scope.resolve_conjuncts(_where(select))
        conditions = [
            (j.written.args.get("on") or j.written, c)
            for j in joins
            if j.alias not in part.aliases
            for c in j.conjuncts
        ]
        conditions += [(w, r) for w in split_conjuncts(_where(select)) for r in scope.resolve_conjuncts(w)]
        pullup.check_outer_query(part.label, part.aliases, select, conditions + [(w, w) for w in where])
        projections = self._projections(select, scope)
        keys = [
            (f"{o.alias}.{key}", column_node(o.alias, o.master.find_column(key) or key))
            for o in occurrences
            if o.alias not in part.aliases
            for key in o.master.key
        ]
        pullup.check_keys_selected(part.label, keys, [p.expression for p in projections])
        group_by = _dedupe(p.expression for p in projections if not functions.contains_aggregate(p.expression))
        return ResolvedQuery(
            occurrences=tuple(occurrences),
            joins=tuple(joins),
            where=tuple(where) + outer_where,
            projections=projections,
            group_by=group_by,
        )

    def _part(self, item: exp.Expr, alias: str, env: Mapping[str, _Cte], taken: set[str]) -> _Part:
        """A FROM item of a joined query: a master, a simple CTE/derived table over one, or a
        CTE/derived table that joins or aggregates by a GROUP BY, spliced (its occurrences renamed
        apart from ``taken``; its group keys kept for the pull-up, analysis/pullup.py)."""
        spliced = self._spliceable(item, env)
        if spliced is None:
            relation = self._relation(item, alias, env)
            return _Part((OccurrenceSource(alias, relation.master, relation.filters),), (), (), relation.columns, alias)
        inner, nested = spliced
        renamed: dict[str, str] = {}
        for occurrence in inner.occurrences:
            candidate, suffix = f"{alias}_{occurrence.alias}", 1
            while candidate in taken:
                suffix += 1
                candidate = f"{alias}_{occurrence.alias}_{suffix}"
            taken.add(candidate)
            renamed[occurrence.alias] = candidate

        def moved(expression: exp.Expr) -> exp.Expr:
            return _renamed(expression, renamed)

        columns = _rename(
            tuple((p.name, moved(p.expression)) for p in inner.projections), nested.column_lists, nested.label
        )
        _refuse_duplicate_names((name for name, _ in columns), nested.label)
        # A WHERE conjunct of one occurrence that no join inside null-extends filters that
        # occurrence first (as a filter of a simple CTE does); the others filter the whole join.
        extended = {j.alias for j in inner.joins if j.kind is JoinKind.LEFT}
        if any(j.kind is JoinKind.RIGHT for j in inner.joins):
            extended.update(o.alias for o in inner.occurrences)
        own_filters: dict[str, list[exp.Expr]] = {o.alias: list(o.filters) for o in inner.occurrences}
        where: list[exp.Expr] = []
        for conjunct in inner.where:
            read = references(conjunct)
            if len(read) == 1 and not read & extended:
                own_filters[next(iter(read))].append(conjunct)
            else:
                where.append(conjunct)
        return _Part(
            occurrences=tuple(
                OccurrenceSource(renamed[o.alias], o.master, tuple(moved(f) for f in own_filters[o.alias]))
                for o in inner.occurrences
            ),
            joins=tuple(
                RawJoin(renamed[j.alias], j.kind, tuple(moved(c) for c in j.conjuncts), j.written) for j in inner.joins
            ),
            where=tuple(moved(w) for w in where),
            columns=columns,
            label=alias,
            group_keys=tuple(moved(k) for k in inner.group_by) if inner.group_by is not None else None,
        )

    def _spliceable(self, item: exp.Expr, env: Mapping[str, _Cte]) -> tuple[ResolvedQuery, _Nested] | None:
        """The resolved query of a CTE/derived table that joins, or aggregates by a GROUP BY
        without HAVING (None for anything else: a table, a simple CTE, or one ``_relation``
        refuses)."""
        nested = self._nested(item, env)
        if nested is None or not self._is_complex(item, env):
            return None
        body = nested.body
        if not isinstance(body, exp.Select) or body.args.get("having") is not None:
            return None
        inner = self.query(body, nested.env)
        if inner.is_aggregate:
            return (inner, nested) if inner.group_by else None
        return (inner, nested) if len(inner.occurrences) >= 2 else None

    def _layer_over(self, select: exp.Select, env: Mapping[str, _Cte], item: exp.Expr) -> ResolvedQuery:
        """``select ... from <inner query>``: the inner query with this SELECT applied on top."""
        nested = self._nested(item, env)
        assert nested is not None
        label = nested.label
        inner = self.query(nested.body, nested.env)
        columns = _rename(tuple((p.name, p.expression) for p in inner.projections), nested.column_lists, label)
        _refuse_duplicate_names((name for name, _ in columns), label)
        scope = Scope([ScopeEntry(label, _qualifiers(item), columns)])
        projections = self._projections(select, scope)
        where = scope.resolve_conjuncts(_where(select))
        regrouped = select.args.get("group") is not None
        if inner.is_aggregate and (regrouped or any(functions.contains_aggregate(p.written) for p in projections)):
            # (before its GROUP BY is read: a position there may name an aggregate of the inner query)
            raise UnsupportedViewError(
                label,
                "aggregating the result of an aggregating CTE or subquery is not supported",
                "Aggregate once per fast_refresh model; aggregate again in a downstream model",
            )
        if not inner.is_aggregate:
            group_by = self._group_by(select, scope, projections)
            return replace(inner, where=inner.where + where, projections=projections, group_by=group_by)
        for conjunct in where:
            if functions.contains_aggregate(conjunct) or not inner.group_by:
                # Over a global aggregate (always one row) even a filter without aggregates
                # would decide whether that row exists: it is a HAVING too.
                raise UnsupportedViewError(
                    describe(conjunct),
                    "a filter on aggregated values acts like HAVING, which is not supported",
                    "Select the aggregates and filter in a downstream model",
                )
        # A filter over group-by values only is the same filter applied before grouping.
        return replace(inner, where=inner.where + where, projections=projections)

    # -- FROM items ---------------------------------------------------------------------------

    def _occurrence_alias(self, item: exp.Expr) -> str:
        alias = alias_name(item)
        if alias is not None:
            return alias.casefold()
        if isinstance(item, exp.Table) and isinstance(item.this, exp.Identifier):
            return item.name.casefold()
        raise UnsupportedViewError(
            describe(item), "a subquery in FROM needs an alias", "Add an alias, e.g. (select ...) AS recent_orders"
        )

    def _nested(self, item: exp.Expr, env: Mapping[str, _Cte]) -> _Nested | None:
        """The query behind a CTE reference or derived table (None for a table)."""
        if isinstance(item, exp.Table):
            cte = self._cte(item, env)
            if cte is None:
                return None
            return _Nested(cte.body, cte.env, (cte.column_names, _alias_columns(item)), cte.name)
        if isinstance(item, exp.Subquery):
            return _Nested(_unwrap_subquery(item), env, (_alias_columns(item),), alias_name(item) or "subquery")
        raise UnsupportedViewError(describe(item), "this kind of FROM item is not supported", "Select from tables")

    @staticmethod
    def _cte(table: exp.Table, env: Mapping[str, _Cte]) -> _Cte | None:
        if table.args.get("db") or table.args.get("catalog"):
            return None
        return env.get(table.name.casefold())

    def _is_complex(self, item: exp.Expr, env: Mapping[str, _Cte]) -> bool:
        """Whether a FROM item is a CTE/derived table that joins or aggregates (at any depth)."""
        nested = self._nested(item, env)
        if nested is None:
            return False
        body = nested.body
        if _shape_problem(body) is not None:
            return True
        return self._is_complex(body.args["from_"].this, _with_env(body, nested.env))

    def _relation(self, item: exp.Expr, alias: str, env: Mapping[str, _Cte]) -> _Relation:
        """A FROM item of the joined query: a master, or a simple CTE/derived table over one."""
        nested = self._nested(item, env)
        if nested is None:
            master = self.master(item)  # type: ignore[arg-type]  # a table that is not a CTE
            columns = tuple((name, column_node(alias, name)) for name in master.column_names)
            return _Relation(master, _rename(columns, (_alias_columns(item),), alias), ())
        return self._simple_body(nested, alias)

    def _simple_body(self, nested: _Nested, alias: str) -> _Relation:
        """A projection and filter over one master, merged into the occurrence ``alias``."""
        body, label = nested.body, nested.label
        problem = _shape_problem(body)
        if problem is not None:
            raise UnsupportedViewError(
                label,
                f"a CTE or subquery that is joined to other tables may filter, project and join tables, but {problem}",
                _SEPARATE_MODEL_HINT,
            )
        assert isinstance(body, exp.Select)  # _shape_problem found none: a plain SELECT
        env = _with_env(body, nested.env)
        source = body.args["from_"].this
        inner = self._relation(source, alias, env)
        scope = Scope([ScopeEntry(_item_label(source), _qualifiers(source), inner.columns)])
        projections = self._projections(body, scope)
        columns = _rename(tuple((p.name, p.expression) for p in projections), nested.column_lists, label)
        _refuse_duplicate_names((name for name, _ in columns), label)
        return _Relation(inner.master, columns, inner.filters + scope.resolve_conjuncts(_where(body)))

    def master(self, table: exp.Table) -> MasterTable:
        """The master a table reference names (``spark_catalog.`` is the session catalog)."""
        parts = _table_parts(table)
        lowered = tuple(p.casefold() for p in parts)
        candidates = [".".join(lowered)]
        if len(lowered) == 3 and lowered[0] == "spark_catalog":
            candidates.append(".".join(lowered[1:]))
        for candidate in candidates:
            if candidate in self._masters:
                return self._masters[candidate]
        raise UnsupportedViewError(
            ".".join(parts),
            "not a master table known to this model (no metadata was collected for it)",
            "Reference tables with ref() or source(); only those can feed a fast_refresh model",
        )

    # -- SELECT list and GROUP BY -------------------------------------------------------------

    def _projections(self, select: exp.Select, scope: Scope) -> tuple[Projection, ...]:
        projections: list[Projection] = []
        for item in select.expressions:
            projections.extend(self._projection(item, scope))
        return tuple(projections)

    def _projection(self, item: exp.Expr, scope: Scope) -> list[Projection]:
        if isinstance(item, exp.Star):
            if any(entry.merged for entry in scope.entries):
                raise UnsupportedViewError(
                    describe(item),
                    "SELECT * over JOIN ... USING (Spark puts the USING columns first, once) is read where the query is "
                    "recomputed per partition, and this one is not",
                    "List the columns, or select each table's star (a.*, b.*)",
                )
            return _star(item, scope.entries)
        if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            qualifier = tuple(p.name.casefold() for p in item.parts[:-1])
            entry = scope.entry_for(qualifier)
            if entry is None:
                raise UnsupportedViewError(
                    describe(item),
                    f"no table or alias named {'.'.join(qualifier)} in FROM",
                    f"Use one of: {', '.join(e.label for e in scope.entries)}",
                )
            return _star(item.this, [entry], written=item)
        if isinstance(item, exp.Alias):
            if item.this.is_star:
                raise UnsupportedViewError(describe(item), "a star cannot be aliased", "Remove the alias")
            return [Projection(item.alias, unparenthesized(scope.resolve(item.this)), item)]
        if isinstance(item, exp.Column):
            name, expression = scope.resolve_column(item)
            return [Projection(name, expression, item)]
        raise UnsupportedViewError(
            describe(item),
            "an output column needs a stable name (Spark would invent one)",
            f"Add `as <name>`, e.g. {describe(item)} AS my_column",
        )

    def _group_by(
        self, select: exp.Select, scope: Scope, projections: tuple[Projection, ...]
    ) -> tuple[exp.Expr, ...] | None:
        group = select.args.get("group")
        if group is None:
            return None
        if group.args.get("all"):
            return _dedupe(p.expression for p in projections if not functions.contains_aggregate(p.expression))
        return _dedupe(self._group_item(item, scope, projections) for item in group.expressions)

    def _group_item(self, item: exp.Expr, scope: Scope, projections: tuple[Projection, ...]) -> exp.Expr:
        """A GROUP BY item: an ordinal (``group by 1``), a SELECT alias, or an expression."""
        if isinstance(item, exp.Literal) and item.is_int:
            position = int(item.name)
            if not 1 <= position <= len(projections):
                raise UnsupportedViewError(
                    f"GROUP BY {position}",
                    f"GROUP BY position {position} is not in the SELECT list",
                    "Use a position between 1 and the number of selected columns",
                )
            chosen = projections[position - 1]
            if functions.contains_aggregate(chosen.expression):
                raise UnsupportedViewError(
                    f"GROUP BY {position}",
                    f"GROUP BY position {position} refers to an aggregate",
                    "Group by the non-aggregated columns",
                )
            return chosen.expression.copy()
        if isinstance(item, exp.Column) and len(item.parts) == 1 and scope.reference(item) is None:
            for projection in projections:
                if projection.name.casefold() == item.name.casefold():
                    return projection.expression.copy()
        return unparenthesized(scope.resolve(item))


def _renamed(expression: exp.Expr, aliases: Mapping[str, str]) -> exp.Expr:
    """``expression`` (resolved: every column ``<alias>.<column>``) over the renamed occurrences."""

    def rename(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table in aliases:
            return column_node(aliases[node.table], node.name)
        return node

    return expression.copy().transform(rename)


def _splice_error(label: str, reason: str) -> UnsupportedViewError:
    return UnsupportedViewError(
        label,
        f"a CTE or subquery that joins tables can be joined to more tables, but not here: {reason}",
        _SEPARATE_MODEL_HINT,
    )


def _check_splice(part: _Part, join: exp.Join, conjuncts: tuple[exp.Expr, ...], following: list[exp.Join]) -> None:
    """Refuse splicing a joining CTE where the spliced chain would not equal the query: only an
    inner join to it is a join to its occurrences in turn (``a JOIN (b JOIN c)`` is ``(a JOIN b)
    JOIN c``; ``a LEFT JOIN (b JOIN c)`` is no chain of two joins); a RIGHT JOIN inside it would
    null-extend the tables before it too; the ON may not read a table it null-extends (that drops
    the null-extended rows); and a later RIGHT JOIN would null-extend the rows its filters keep."""
    kind = _join_kind(join)
    if kind is not JoinKind.INNER:
        side = "null-supplying" if kind is JoinKind.LEFT else "preserved"
        raise _splice_error(
            part.label,
            f"it is the {side} side of a {kind.upper()} JOIN, and an outer join to a join is no chain of joins",
        )
    if any(j.kind is JoinKind.RIGHT for j in part.joins):
        raise _splice_error(part.label, "it has a RIGHT JOIN inside, and it is not the first FROM item")
    for conjunct in conjuncts:
        read = sorted(references(conjunct) & part.null_extended)
        if read:
            raise UnsupportedViewError(
                describe(conjunct),
                f"this join condition reads {', '.join(read)}, which a LEFT JOIN inside {part.label} "
                "null-extends: it drops the null-extended rows and turns that LEFT JOIN into an inner join",
                f"Join {part.label} on columns of the tables it does not null-extend, or make its LEFT JOIN inner",
            )
    if any(_join_kind(j) is JoinKind.RIGHT for j in following[1:]):
        raise _splice_error(part.label, "a RIGHT JOIN after it would null-extend the rows its join conditions keep")


def _star(star: exp.Star, entries: Iterable[ScopeEntry], written: exp.Expr | None = None) -> list[Projection]:
    for key in ("replace", "rename", "ilike"):
        if star.args.get(key):
            raise UnsupportedViewError(
                describe(written or star), f"SELECT * {key.upper()} is not supported", "List the columns"
            )
    excluded = {c.name.casefold() for c in star.args.get("except_") or []}
    projections = [
        Projection(name, expression.copy(), written or star)
        for entry in entries
        for name, expression in entry.columns
        if name.casefold() not in excluded
    ]
    return projections


def _dedupe(expressions: Iterable[exp.Expr]) -> tuple[exp.Expr, ...]:
    unique: list[exp.Expr] = []
    for expression in expressions:
        if expression not in unique:
            unique.append(expression)
    return tuple(unique)


def _where(select: exp.Select) -> exp.Expr | None:
    where = select.args.get("where")
    return where.this if where is not None else None


def _qualifiers(item: exp.Expr) -> frozenset[tuple[str, ...]]:
    """The names that may qualify a FROM item's columns: its alias, or for an unaliased table
    its name with any prefix of schema and catalog (``orders``, ``shop.orders``); none for an
    unaliased subquery."""
    alias = alias_name(item)
    if alias is not None:
        return frozenset({(alias.casefold(),)})
    if not isinstance(item, exp.Table):
        return frozenset()
    parts = tuple(p.casefold() for p in _table_parts(item))
    return frozenset(parts[-width:] for width in range(1, len(parts) + 1))


def _shape_problem(body: exp.Expr) -> str | None:
    """Why a CTE/derived table body is not a projection and filter over one table (None if it is)."""
    if not isinstance(body, exp.Select):
        return "it is not a plain SELECT"
    if body.args.get("from_") is None:
        return "it reads no table"
    if body.args.get("group") is not None:
        return "it aggregates (GROUP BY)"
    if any(functions.contains_aggregate(e) for e in body.expressions):
        return "it aggregates"
    if body.args.get("joins"):
        return "it joins tables"
    return None


def _with_env(select: exp.Expr, env: Mapping[str, _Cte]) -> Mapping[str, _Cte]:
    """The CTEs visible in ``select``: the enclosing ones plus its own WITH, each CTE seeing the
    ones defined before it."""
    with_ = select.args.get("with_")
    if with_ is None:
        return env
    visible = dict(env)
    for cte in with_.expressions:
        name = cte.alias
        visible[name.casefold()] = _Cte(name.casefold(), cte.this, _alias_columns(cte), dict(visible))
    return visible


def _using_equalities(join: exp.Join, entries: list[ScopeEntry], position: int) -> dict[str, exp.Expr]:
    """``JOIN t USING (k, ...)`` as the equalities ``<the earlier FROM item's k> = t.k``, by column
    name (empty without USING). Inner and LEFT joins only: there an unqualified ``k`` is the
    earlier item's column, as Spark resolves it."""
    names = [u.name for u in join.args.get("using") or ()]
    if not names:
        return {}
    written = f"JOIN ... USING ({', '.join(names)})"
    if _join_kind(join) is JoinKind.RIGHT:
        raise UnsupportedViewError(
            written,
            "a RIGHT JOIN with USING is not supported (its USING columns are the right side's)",
            f"Write the condition with ON, e.g. ON a.{names[0]} = b.{names[0]}",
        )
    right = entries[position]
    equalities: dict[str, exp.Expr] = {}
    for name in names:
        earlier = [(entry, found) for entry in entries[:position] if (found := entry.unqualified(name)) is not None]
        if len(earlier) != 1:
            problem = "no table joined before it has" if not earlier else "several tables joined before it have"
            raise UnsupportedViewError(
                written,
                f"{problem} a column {name}",
                f"Write the condition with ON, naming the table you mean, e.g. ON a.{name} = {right.label}.{name}",
            )
        found = right.lookup(name)
        if found is None:
            raise UnsupportedViewError(written, f"{right.label} has no column {name}", "Check the column name")
        equalities[name] = exp.EQ(this=earlier[0][1][1].copy(), expression=found[1].copy())
    return equalities


def _join_kind(join: exp.Join) -> JoinKind:
    side = (join.args.get("side") or "").upper()
    if side == "LEFT":
        return JoinKind.LEFT
    if side == "RIGHT":
        return JoinKind.RIGHT
    return JoinKind.INNER
