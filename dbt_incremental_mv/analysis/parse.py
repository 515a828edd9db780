"""From the model's compiled SQL to exactly one query tree (sqlglot, Spark dialect)."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from dbt_incremental_mv.analysis.errors import UnsupportedViewError, describe

DIALECT = "spark"


def parse_statement(sql: str) -> exp.Query:
    """The single query of ``sql``: a SELECT, or a set operation that later checks refuse by name.

    A parse failure carries sqlglot's message; several statements, or a statement that is not a
    query (INSERT, CREATE, ...), are refused: a model's SQL is one SELECT.
    """
    if not sql or not sql.strip():
        raise UnsupportedViewError("empty SQL", "the model has no SQL to analyse", "Write a SELECT statement")
    try:
        statements = [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except (ParseError, TokenError) as error:
        raise UnsupportedViewError(
            _error_location(error),
            f"the SQL does not parse: {_first_message(error)}",
            "Check the model's compiled SQL (target/compiled)",
        ) from error
    if not statements:
        raise UnsupportedViewError("empty SQL", "the model has no SQL to analyse", "Write a SELECT statement")
    if len(statements) > 1:
        raise UnsupportedViewError(
            "multiple statements",
            f"the model holds {len(statements)} statements; a view is defined by one query",
            "Keep one SELECT in the model; move other statements to hooks",
        )
    statement = unwrap_parentheses(statements[0])
    if not isinstance(statement, exp.Query) or isinstance(statement, exp.Subquery):
        raise UnsupportedViewError(
            _statement_name(statement),
            "only a SELECT query can define a fast_refresh model",
            "Make the model a single SELECT",
        )
    return statement


def with_ctes(query: exp.Query, shared: exp.With | None) -> exp.Query:
    """``query`` seeing the CTEs of ``shared`` (an enclosing WITH) before its own: a copy with one
    WITH holding both; ``query`` itself when there is none to add."""
    if shared is None:
        return query
    merged = query.copy()
    own = merged.args.get("with_")
    ctes = [c.copy() for c in shared.expressions] + (list(own.expressions) if own is not None else [])
    merged.set("with_", exp.With(expressions=ctes, recursive=shared.args.get("recursive")))
    return merged


def unwrap_parentheses(statement: exp.Expr) -> exp.Expr:
    """``(select ...)`` as a whole statement is the select itself (when nothing else is attached)."""
    while isinstance(statement, exp.Subquery) and set(k for k, v in statement.args.items() if v) == {"this"}:
        statement = statement.this
    return statement


def _statement_name(statement: exp.Expr) -> str:
    if isinstance(statement, exp.Command):
        return str(statement.this).upper()
    key = statement.key.upper()
    return key if key not in ("ANONYMOUS", "COLUMN", "LITERAL") else describe(statement)


def _first_message(error: Exception) -> str:
    details = getattr(error, "errors", None)
    if details:
        first = details[0]
        description = first.get("description") or str(error)
        if first.get("line"):
            return f"{description} (line {first['line']}, column {first.get('col')})"
        return description
    return str(error).splitlines()[0]


def _error_location(error: Exception) -> str:
    details = getattr(error, "errors", None)
    if details and details[0].get("highlight"):
        return f"SQL near '{details[0]['highlight']}'"
    return "SQL"
