"""The users' check that a stored view still equals its defining query (the generic test
``matches_defining_query``): a multiset comparison, as the plugin's own differential tests do.

The query compared with is the compiled SQL the view was built from (kept in its table
properties), recomputed on the masters as they are now: a view whose masters changed since its
last refresh differs until it is refreshed again, which is what the test is for (run it right
after ``dbt run``). Hidden bookkeeping columns (``_mv_*``) are left out; floating-point columns are
compared to 9 significant digits, since a running sum of doubles may differ from a recomputed one
in the last digits.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot.errors import SqlglotError

from dbt_incremental_mv.analysis import UnsupportedViewError
from dbt_incremental_mv.analysis.analyze import parsed_query
from dbt_incremental_mv.analysis.outputs import RESERVED_PREFIX
from dbt_incremental_mv.analysis.render import render_expression
from dbt_incremental_mv.sql_text import ident, relation

PROBLEM_COLUMN = "mv_problem"
ROWS_COLUMN = "mv_copies"  # how many times the row is on that side
EXCESS_COLUMN = "mv_rows"  # how many more times than on the other side
MISSING = "in the defining query, missing from the view"
EXTRA = "in the view, not in the defining query"
_FLOATING = ("float", "double", "real")


class NotAFastRefreshView(ValueError):
    """The relation has no stored definition: it was not built by fast_refresh."""


def compared_column(column: str, spark_type: str) -> str:
    """``column`` as the view and its query are compared: a floating-point one to 9 significant
    digits (a SUM of doubles differs in its last bits between two plans of one query)."""
    if spark_type.strip().lower() in _FLOATING:
        return f"format_string('%.9g', {ident(column)}) as {ident(column)}"
    return ident(column)


def visible_columns(columns: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The view's columns a user sees: not the plugin's hidden ``_mv_*`` bookkeeping."""
    return [(name, spark_type) for name, spark_type in columns if not name.lower().startswith(RESERVED_PREFIX)]


def computed_query(defining_sql: str) -> str:
    """The defining query as the view computes it (analysis.parsed_query): a collection the SQL
    leaves unordered ordered by value, a ``COUNT(DISTINCT x) OVER`` Spark cannot run as the size of
    the set it equals, a LISTAGG without separator written with Spark's (none); the SQL as written
    when it is not one query the analysis reads."""
    try:
        return render_expression(parsed_query(defining_sql))
    except (UnsupportedViewError, SqlglotError):
        return defining_sql


def mismatch_sql(view_relation: str, columns: Sequence[tuple[str, str]], defining_sql: str | None) -> str:
    """A query returning one row per distinct row whose count differs (none when the view is
    right): ``mv_problem`` says on which side it is in excess, ``mv_rows`` by how many copies. The
    two sides are counted per row and joined NULL-safely on every column, not compared by ``EXCEPT
    ALL``, which Spark 3.5 fails to plan over a correlated scalar subquery ("key not found")."""
    if not defining_sql or not defining_sql.strip():
        raise NotAFastRefreshView(
            f"{view_relation} has no stored definition: it was not built by the fast_refresh materialization "
            "(run dbt run first; matches_defining_query only applies to fast_refresh models)."
        )
    shown = visible_columns(columns)
    if not shown:
        raise NotAFastRefreshView(f"{view_relation} has no columns to compare (does it exist?)")
    select_list = ", ".join(compared_column(name, spark_type) for name, spark_type in shown)
    defining_sql = computed_query(defining_sql)
    names = ", ".join(ident(name) for name, _ in shown)
    counted = ident(ROWS_COLUMN)
    view_rows = f"select {select_list} from {relation(view_relation)}"
    query_rows = f"select {select_list} from (\n{defining_sql.strip().rstrip(';')}\n) as `_mv_definition`"
    problem = ident(PROBLEM_COLUMN)

    def excess(label: str, more: str, fewer: str) -> str:
        matched = " and ".join(f"m.{ident(name)} <=> f.{ident(name)}" for name, _ in shown)
        return (
            f"select '{label}' as {problem}, m.*, m.{counted} - coalesce(f.{counted}, 0) as {ident(EXCESS_COLUMN)}\n"
            f"from {more} as m left join {fewer} as f on {matched}\n"
            f"where m.{counted} > coalesce(f.{counted}, 0)"
        )

    query_counts = f"(select {names}, count(*) as {counted} from (\n{query_rows}\n) group by {names})"
    view_counts = f"(select {names}, count(*) as {counted} from (\n{view_rows}\n) group by {names})"
    return f"{excess(MISSING, query_counts, view_counts)}\nunion all\n{excess(EXTRA, view_counts, query_counts)}"
