"""View analysis: which fast_refresh models can be maintained incrementally, and how.

``analyze_view(sql, masters)`` parses a model's compiled Spark SQL with sqlglot, resolves it
to occurrences of master tables, classifies it (JOIN, OUTER_JOIN, AGGREGATE, or a UNION_ALL of
branches of those), decides which hidden columns the stored table needs, and renders the
normalized defining query with substitutable sources for the refresh engine. What cannot be
maintained is refused with an UnsupportedViewError that names the construct, says why, and says
what to do.

Pure Python: imports only the standard library and sqlglot.
"""

from dbt_incremental_mv.analysis.analyze import analyze_view
from dbt_incremental_mv.analysis.errors import UnsupportedViewError
from dbt_incremental_mv.analysis.hidden import ROW_COUNT_COLUMN, key_column_name
from dbt_incremental_mv.analysis.model import (
    EquiPair,
    HiddenColumn,
    HiddenPurpose,
    JoinKind,
    JoinStep,
    MasterOccurrence,
    MasterTable,
    OutputColumn,
    OutputKind,
    ViewClass,
    ViewDefinition,
)
from dbt_incremental_mv.analysis.render import parse_source, render_expression, render_select, select_expression

__all__ = [
    "ROW_COUNT_COLUMN",
    "EquiPair",
    "HiddenColumn",
    "HiddenPurpose",
    "JoinKind",
    "JoinStep",
    "MasterOccurrence",
    "MasterTable",
    "OutputColumn",
    "OutputKind",
    "UnsupportedViewError",
    "ViewClass",
    "ViewDefinition",
    "analyze_view",
    "key_column_name",
    "parse_source",
    "render_expression",
    "render_select",
    "select_expression",
]
