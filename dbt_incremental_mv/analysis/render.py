"""Spark SQL for an analysed view: the defining query rebuilt from the definition's parts.

The query is always rebuilt as a sqlglot tree and generated with every identifier quoted, so the
text is deterministic and a substituted source (a time-travel read, a subquery over a change log)
goes in as a parsed node under the occurrence's alias, never as pasted text.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp
from sqlglot.errors import ErrorLevel, ParseError

from dbt_incremental_mv.analysis.hidden import RESERVE
from dbt_incremental_mv.analysis.model import HiddenPurpose, JoinStep, MasterOccurrence, OutputKind, ViewDefinition
from dbt_incremental_mv.analysis.parse import DIALECT
from dbt_incremental_mv.analysis.union import visible_sources

Source = str | exp.Expr
PER_PARTITION_MASTER = "_mv_master"  # the master's place in a PER_PARTITION view's template


def render_expression(expression: exp.Expr, *, pretty: bool = False) -> str:
    """Spark SQL for a node: identifiers quoted, comments dropped, and an error (not a silent
    approximation) when sqlglot cannot express the node in Spark SQL."""
    return expression.sql(
        dialect=DIALECT,
        identify=True,
        comments=False,
        pretty=pretty,
        unsupported_level=ErrorLevel.RAISE,
    )


def render_select(
    definition: ViewDefinition,
    sources: Mapping[str, Source] | None = None,
    include_hidden: bool = True,
    *,
    pretty: bool = False,
) -> str:
    """The defining query as Spark SQL, every identifier quoted, deterministic.

    ``sources`` replaces occurrences' table references, keyed by alias: SQL text such as
    ``"`shop`.`orders` VERSION AS OF 123"`` or ``"(select ... from log where ...)"`` (or a
    sqlglot Table/Subquery/Select), which keeps the occurrence's alias and must provide the
    master's columns. ``include_hidden=False`` selects the visible outputs only.
    """
    if definition.branches:
        return _render_union(definition, sources, include_hidden, pretty)
    rendered = _render_plain(definition, sources, include_hidden=include_hidden, pretty=pretty)
    if definition.having is None:
        return rendered
    # the groups that pass, filtered on the stored columns (hidden ones included)
    query = rendered if include_hidden else _render_plain(definition, sources, pretty=pretty)
    filtered = f"select * from (\n{query}\n) as `_mv_g`\nwhere {render_expression(definition.having)}"
    if include_hidden:
        return filtered
    outputs = ", ".join(render_expression(exp.column(o.name, quoted=True)) for o in definition.visible_outputs)
    return f"select {outputs} from (\n{filtered}\n)"


def _render_plain(
    definition: ViewDefinition,
    sources: Mapping[str, Source] | None = None,
    *,
    include_hidden: bool = True,
    pretty: bool = False,
) -> str:
    return render_expression(select_expression(definition, sources, include_hidden), pretty=pretty)


def _render_union(
    definition: ViewDefinition, sources: Mapping[str, Source] | None, include_hidden: bool, pretty: bool
) -> str:
    """Each branch's query laid out as the union's stored columns (NULL for the columns of
    other branches, typed by the union), combined with UNION ALL."""
    sources = known_sources(definition, sources)
    visible = tuple(o.name for o in definition.outputs)
    columns = definition.stored_columns if include_hidden else visible
    return "\nunion all\n".join(
        branch_rows(
            number,
            branch,
            render_select(
                branch,
                {a: s for a, s in sources.items() if a in branch.aliases},
                pretty=pretty,
            ),
            columns,
            visible,
        )
        for number, branch in enumerate(definition.branches, start=1)
    )


def branch_rows(
    number: int,
    branch: ViewDefinition,
    query: str,
    columns: tuple[str, ...],
    visible: tuple[str, ...],
    types: Mapping[str, str] | None = None,
) -> str:
    """The rows ``query`` returns (``branch``'s stored columns, branch ``number`` of a UNION ALL
    whose visible columns are ``visible``) laid out as ``columns``: the branch's own, each visible
    column from the branch column holding it (an aggregate branch's own column), NULL for the
    others (typed by the union they go into: the stored table's type, or the other branches').
    With the stored table's ``types`` (a refresh's rows), each visible column is cast to its type,
    as the union widens it, so the rows do not depend on which branches a refresh writes together."""
    own = set(branch.stored_columns)
    sources = visible_sources(branch, visible)
    stored_type = {c.casefold(): t for c, t in (types or {}).items()}
    listed = []
    for column in columns:
        quoted = render_expression(exp.to_identifier(column, quoted=True))
        source = sources.get(column)
        if source is None:
            listed.append(quoted if column in own else f"null as {quoted}")
            continue
        value = render_expression(exp.to_identifier(source, quoted=True))
        if column.casefold() in stored_type:
            value = f"cast({value} as {stored_type[column.casefold()]})"
        listed.append(value if value == quoted else f"{value} as {quoted}")
    return f"select {', '.join(listed)} from (\n{query}\n) as `_mv_b{number}`"


def select_expression(
    definition: ViewDefinition,
    sources: Mapping[str, Source] | None = None,
    include_hidden: bool = True,
    row_filter: exp.Expr | None = None,
) -> exp.Select:
    """The defining query as a fresh sqlglot Select, for callers that compose trees (nothing in it
    is shared with ``definition``); ``row_filter``: a condition over the occurrences' columns its
    rows must also meet (before grouping). A view with MIN/MAX reserves (and its hidden columns
    wanted) is a two-level query: see _with_reserves. A UNION ALL view has none: compose its
    branches'."""
    if definition.branches:
        raise TypeError("a UNION ALL view has no single SELECT: compose its branches'")
    sources = known_sources(definition, sources)
    if definition.partition_query is not None:
        return _partition_query(definition, sources, include_hidden, row_filter)
    if include_hidden and definition.reserves:
        return _with_reserves(definition, sources, row_filter)
    outputs = definition.outputs if include_hidden else definition.visible_outputs
    projections: list[exp.Expr] = [_aliased(o.expression, o.name) for o in outputs]
    if include_hidden:
        projections += [_aliased(h.expression, h.name) for h in definition.hidden_columns]
    if definition.ranking is not None:
        return _top_ranked(definition, sources, projections, row_filter)
    if definition.windowing is not None and definition.windowing.post_conjuncts:
        return _kept_after_windows(definition, sources, projections, row_filter)
    select = _rows(definition, sources, projections, row_filter)
    if definition.group_by:
        select.set("group", exp.Group(expressions=[e.copy() for e in definition.group_by]))
    return select


def _rows(
    definition: ViewDefinition,
    sources: Mapping[str, Source],
    projections: list[exp.Expr],
    row_filter: exp.Expr | None,
) -> exp.Select:
    """``projections`` of the rows of the query's FROM, joins and WHERE (and ``row_filter``)."""
    first = definition.occurrences[0]
    select = exp.Select(expressions=projections)
    select.set("from_", exp.From(this=_relation(first, sources.get(first.alias))))
    joins = [_join(step, definition.occurrence(step.alias), sources.get(step.alias)) for step in definition.joins]
    if joins:
        select.set("joins", joins)
    conjuncts = list(definition.where_conjuncts) + ([row_filter] if row_filter is not None else [])
    if conjuncts:
        select.set("where", exp.Where(this=conjunction(conjuncts)))
    return select


def _partition_query(
    definition: ViewDefinition,
    sources: Mapping[str, Source],
    include_hidden: bool,
    row_filter: exp.Expr | None,
) -> exp.Select:
    """A PER_PARTITION view's query: its template with the master's source in place (a
    ``row_filter`` filters the master's rows, before anything else: it must keep or drop whole
    partitions)."""
    partition_query = definition.partition_query
    assert partition_query is not None
    if row_filter is not None and len(definition.occurrences) > 1:
        raise TypeError("a row filter of a PER_PARTITION view over several tables has no one place")
    select = partition_query.query.copy()
    for table in [t for t in select.find_all(exp.Table) if t.name == PER_PARTITION_MASTER and not t.args.get("db")]:
        occurrence = definition.occurrence(table.alias)
        reader = table.parent_select
        table.replace(_relation(occurrence, sources.get(occurrence.alias)))
        if row_filter is not None and reader is not None:
            reader.where(row_filter.copy(), copy=False)
    if not include_hidden:
        hidden = {h.name for h in definition.hidden_columns}
        select.set("expressions", [p for p in select.expressions if p.alias_or_name not in hidden])
    return select


RANKED = "_mv_r"  # the ranked rows of a RANKED view
RANK = "_mv_rank"
KEEP = "_mv_keep"


def _top_ranked(
    definition: ViewDefinition,
    sources: Mapping[str, Source],
    projections: list[exp.Expr],
    row_filter: exp.Expr | None,
) -> exp.Select:
    """A RANKED view's query: its rows (``projections``, filtered) with their rank in the window
    (and whether they meet the filters on the ranked rows), those ranked within ``keep``. A
    ``row_filter`` is applied before the ranking: it must keep or drop whole partitions."""
    ranking = definition.ranking
    assert ranking is not None
    computed: list[exp.Expr] = [_aliased(ranking.window, RANK)]
    kept: exp.Expr = exp.LTE(
        this=exp.column(RANK, table=RANKED, quoted=True), expression=exp.Literal.number(ranking.keep)
    )
    if ranking.post_conjuncts:
        computed.append(_aliased(conjunction(ranking.post_conjuncts), KEEP))
        kept = exp.And(this=kept, expression=exp.column(KEEP, table=RANKED, quoted=True))
    return _rows_kept(definition, sources, projections, row_filter, computed, kept)


def _kept_after_windows(
    definition: ViewDefinition,
    sources: Mapping[str, Source],
    projections: list[exp.Expr],
    row_filter: exp.Expr | None,
) -> exp.Select:
    """A WINDOWED view's query with filters after its windows: its rows (``projections``, the
    windows among them) with whether they meet those filters, those that do. A ``row_filter``
    is applied before the windows: it must keep or drop whole partitions."""
    windowing = definition.windowing
    assert windowing is not None
    computed: list[exp.Expr] = [_aliased(conjunction(windowing.post_conjuncts), KEEP)]
    return _rows_kept(
        definition, sources, projections, row_filter, computed, exp.column(KEEP, table=RANKED, quoted=True)
    )


def _rows_kept(
    definition: ViewDefinition,
    sources: Mapping[str, Source],
    projections: list[exp.Expr],
    row_filter: exp.Expr | None,
    computed: list[exp.Expr],
    kept: exp.Expr,
) -> exp.Select:
    """``projections`` of the query's rows that meet ``kept``, a condition over the ``computed``
    columns beside them (windows: Spark filters on them one query up, as ``_mv_r``)."""
    rows = _rows(definition, sources, [*projections, *computed], row_filter)
    names = [exp.column(p.alias, table=RANKED, quoted=True) for p in projections if isinstance(p, exp.Alias)]
    select = exp.Select(expressions=names)
    select.set("from_", exp.From(this=exp.Subquery(this=rows, alias=_table_alias(RANKED))))
    select.set("where", exp.Where(this=kept))
    return select


def unranked_rows(definition: ViewDefinition, sources: Mapping[str, Source] | None = None) -> str:
    """A RANKED view's rows before the ranking (every stored column, filtered as the defining
    query filters them before ranking; a column selecting the rank is NULL): new rows a refresh
    ranks among the view's own (refresh/views/ranked_view.py)."""
    assert definition.ranking is not None
    sources = known_sources(definition, sources)
    projections: list[exp.Expr] = [
        _aliased(exp.Cast(this=exp.null(), to=exp.DataType.build("int")), o.name)
        if o.expression.find(exp.Window) is not None
        else _aliased(o.expression, o.name)
        for o in definition.outputs
    ]
    projections += [_aliased(h.expression, h.name) for h in definition.hidden_columns]
    return render_expression(_rows(definition, sources, projections, None))


ROWS = "_mv_w"  # the ranked rows a view with reserves groups


def _with_reserves(
    definition: ViewDefinition,
    sources: Mapping[str, Source],
    row_filter: exp.Expr | None,
) -> exp.Select:
    """The query of a view with MIN/MAX reserves: its rows (every column they use renamed
    ``_mv_c<i>``) ranked by each reserve's argument within their group, from the extreme
    (``dense_rank``: equal values share a rank), then grouped as written, each reserve being
    the values of ranks 1 to RESERVE with their counts. The window sorts each group's rows
    (memory-safe, where collecting a group's values would hold them all at once); the outputs'
    aggregates are computed over the same rows, with their own types."""
    used: dict[tuple[str, str], str] = {}
    parts = [o.expression for o in definition.outputs] + [h.expression for h in definition.hidden_columns]
    for node in (*parts, *definition.group_by):
        for column in node.find_all(exp.Column):
            used.setdefault((column.table, column.name), "")
    for index, key in enumerate(sorted(used)):
        used[key] = f"_mv_c{index}"

    def renamed(node: exp.Expr) -> exp.Expr:
        def swap(found: exp.Expr) -> exp.Expr:
            if isinstance(found, exp.Column) and (found.table, found.name) in used:
                return exp.column(used[(found.table, found.name)], table=ROWS, quoted=True)
            return found

        return node.copy().transform(swap)

    inner: list[exp.Expr] = [
        exp.Alias(
            this=exp.column(name, table=table, quoted=True) if table else exp.column(name, quoted=True),
            alias=exp.to_identifier(new, quoted=True),
        )
        for (table, name), new in sorted(used.items(), key=lambda item: item[1])
    ]
    ranks = []
    for index, reserve in enumerate(definition.reserves):
        kind = definition.output(reserve.outputs[0]).kind
        order = exp.Ordered(this=reserve.expression.copy(), desc=kind is OutputKind.MAX, nulls_first=False)
        window = exp.Window(
            this=exp.Anonymous(this="dense_rank", expressions=[]),
            partition_by=[e.copy() for e in definition.group_by],
            order=exp.Order(expressions=[order]),
        )
        ranks.append(f"_mv_rank{index}")
        inner.append(exp.Alias(this=window, alias=exp.to_identifier(ranks[-1], quoted=True)))
    rows = _rows(definition, sources, inner, row_filter)

    projections = [_aliased(renamed(o.expression), o.name) for o in definition.outputs]
    for hidden in definition.hidden_columns:
        if hidden.purpose is not HiddenPurpose.RESERVE:
            projections.append(_aliased(renamed(hidden.expression), hidden.name))
            continue
        rank = ranks[definition.reserves.index(hidden)]
        value = render_expression(renamed(hidden.expression))
        entries = ", ".join(
            f"named_struct('v', max(case when `{ROWS}`.`{rank}` = {i} then {value} end), "
            f"'n', count_if(`{ROWS}`.`{rank}` = {i}))"
            for i in range(1, RESERVE + 1)
        )
        reserve = exp.maybe_parse(f"filter(array({entries}), `_mv_e` -> `_mv_e`.`v` is not null)", dialect=DIALECT)
        projections.append(_aliased(reserve, hidden.name))
    select = exp.Select(expressions=projections)
    select.set("from_", exp.From(this=exp.Subquery(this=rows, alias=_table_alias(ROWS))))
    if definition.group_by:
        select.set("group", exp.Group(expressions=[renamed(e) for e in definition.group_by]))
    return select


def known_sources(definition: ViewDefinition, sources: Mapping[str, Source] | None) -> dict[str, Source]:
    """``sources`` as a dict; KeyError naming any alias that is not one of the definition's."""
    sources = dict(sources or {})
    unknown = sorted(set(sources) - set(definition.aliases))
    if unknown:
        raise KeyError(f"no occurrence with alias {', '.join(unknown)} (aliases: {', '.join(definition.aliases)})")
    return sources


def conjunction(conjuncts: tuple[exp.Expr, ...] | list[exp.Expr]) -> exp.Expr:
    """``c1 AND c2 AND ...`` over copies, each wrapped in parentheses when it is itself an OR."""
    parts = [_parenthesize_connector(c.copy()) for c in conjuncts]
    result = parts[0]
    for part in parts[1:]:
        result = exp.And(this=result, expression=part)
    return result


def _parenthesize_connector(node: exp.Expr) -> exp.Expr:
    return exp.Paren(this=node) if isinstance(node, exp.Or) else node


def _aliased(expression: exp.Expr, name: str) -> exp.Alias:
    return exp.Alias(this=expression.copy(), alias=exp.to_identifier(name, quoted=True))


def _table_alias(alias: str) -> exp.TableAlias:
    return exp.TableAlias(this=exp.to_identifier(alias, quoted=True))


def _relation(occurrence: MasterOccurrence, source: Source | None) -> exp.Expr:
    relation = master_table(occurrence.master.name) if source is None else parse_source(source)
    relation.set("alias", _table_alias(occurrence.alias))
    return relation


def _join(step: JoinStep, occurrence: MasterOccurrence, source: Source | None) -> exp.Join:
    join = exp.Join(this=_relation(occurrence, source))
    if step.kind == "inner" and step.condition is None:
        join.set("kind", "CROSS")
        return join
    if step.kind != "inner":
        join.set("side", str(step.kind).upper())
    if step.condition is not None:
        join.set("on", step.condition.copy())
    return join


def master_table(name: str) -> exp.Table:
    """``schema.table`` (as the caller names a master) as a Table node."""
    return exp.to_table(name, dialect=DIALECT)


def parse_source(source: Source) -> exp.Expr:
    """A substituted source as a relation node: a Table (possibly with VERSION AS OF ...) or a
    parenthesised Subquery. Any alias it carries is replaced by the occurrence's."""
    if isinstance(source, exp.Expression):
        node = source.copy()
    else:
        try:
            node = exp.maybe_parse(source, into=exp.From, prefix="FROM", dialect=DIALECT).this
        except ParseError as error:
            message = f"substituted source does not parse as a table or subquery: {source!r}: {error}"
            raise ValueError(message) from error
    while isinstance(node, exp.From):
        node = node.this
    if isinstance(node, exp.Query) and not isinstance(node, exp.Subquery):
        node = exp.Subquery(this=node)
    if not isinstance(node, (exp.Table, exp.Subquery)):
        raise ValueError(f"substituted source must be a table or a subquery, not {node.key}: {source!r}")
    return node
