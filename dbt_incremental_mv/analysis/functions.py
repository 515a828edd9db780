"""What the analysis knows about Spark functions, by sqlglot node type or, for functions sqlglot
parses as ``exp.Anonymous``, by lowercase name.

The lists answer three questions: may a function appear in a maintained view at all (it must
give the same answer for the same row on every refresh), is it an aggregate the refresh can
maintain from deltas, and is it a generator that changes the number of rows.
"""

from __future__ import annotations

from sqlglot import exp


def _types(*names: str) -> tuple[type[exp.Expr], ...]:
    """sqlglot node classes by name, skipping names this sqlglot version does not define."""
    return tuple(getattr(exp, name) for name in names if hasattr(exp, name))


MAINTAINABLE_AGGREGATES: tuple[type[exp.Expr], ...] = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
"""COUNT/SUM/AVG combine from deltas (with the hidden counts); MIN/MAX are recomputed per group
when a deletion removes the current extreme."""

RECOMPUTED_AGGREGATES: tuple[type[exp.Expr], ...] = _types(
    "ApproxDistinct",
    "Stddev",
    "StddevPop",
    "StddevSamp",
    "Variance",
    "VariancePop",
    "Median",
    "Quantile",
    "Corr",
    "CovarPop",
    "CovarSamp",
    "Kurtosis",
    "Skewness",
    "BitwiseAndAgg",
    "BitwiseOrAgg",
    "BitwiseXorAgg",
)
"""Deterministic aggregates that no delta maintains: their value for a group is a function of
its rows as a multiset (not of their order), so a group the changes touch is recomputed from the
masters (OutputKind.RECOMPUTED). So are the DISTINCT forms of COUNT/SUM/AVG/MIN/MAX, and
COLLECT_LIST/COLLECT_SET inside ARRAY_SORT/SORT_ARRAY (ORDERED_COLLECTIONS)."""

COLLECTIONS: tuple[type[exp.Expr], ...] = _types("ArrayAgg", "ArrayUniqueAgg")
"""COLLECT_LIST / COLLECT_SET (ARRAY_AGG): their elements' order is the order Spark read the
rows in, so only a sorted collection is deterministic."""

SORTED_ARRAYS: tuple[type[exp.Expr], ...] = _types("ArraySort", "SortArray")

CONCATENATIONS: tuple[type[exp.Expr], ...] = _types("GroupConcat")
"""LISTAGG / STRING_AGG (Spark 4): without WITHIN GROUP (ORDER BY ...) the values are joined in the
order Spark read the rows in; with it, the analysis appends the value itself to the ORDER BY
(analyze.as_maintained_aggregates), so values tied on it are joined in one order every time and
the group's text is a function of its rows: recomputed per changed group."""

NOT_RECOMPUTABLE_ALTERNATIVES: dict[type[exp.Expr], str] = {
    t: hint
    for name, hint in (
        ("ApproxQuantile", "Use percentile(), which is exact and recomputed per changed group"),
        ("ArgMax", "Rows tied on the ordering value make it pick any row: rank the rows (row_number() = 1) instead"),
        ("ArgMin", "Rows tied on the ordering value make it pick any row: rank the rows (row_number() = 1) instead"),
        ("First", "It picks whichever row Spark reads first: use min() or max(), or rank the rows"),
        ("Last", "It picks whichever row Spark reads last: use min() or max(), or rank the rows"),
        ("AnyValue", "It picks whichever row Spark reads first: use min() or max()"),
        ("Mode", "Values tied for the most frequent make it pick any: compute the counts and rank them"),
    )
    if (t := getattr(exp, name, None)) is not None
}
"""Aggregates whose answer depends on the order Spark reads the rows in: refused, with what to use."""

NONDETERMINISTIC_TYPES: tuple[type[exp.Expr], ...] = _types(
    "Rand",
    "Randn",
    "Randstr",
    "Uniform",
    "Uuid",
    "Shuffle",
    "Localtime",
    "Localtimestamp",
    "SessionUser",
)
"""Random or clock/session dependent. Every ``exp.Current*`` node (CURRENT_DATE,
CURRENT_TIMESTAMP, CURRENT_USER, CURRENT_DATABASE, ...) is refused as well."""

NONDETERMINISTIC_NAMES: frozenset[str] = frozenset(
    {
        "now",
        "rand",
        "random",
        "randn",
        "uuid",
        "shuffle",
        "monotonically_increasing_id",
        "spark_partition_id",
        "input_file_name",
        "input_file_block_start",
        "input_file_block_length",
        "current_timezone",
        "user",
        "version",
        "aes_encrypt",
    }
)

NONDETERMINISTIC_BARE_WORDS: frozenset[str] = frozenset(
    {
        "current_date",
        "current_timestamp",
        "localtimestamp",
        "current_user",
        "user",
        "session_user",
        "current_catalog",
        "current_database",
        "current_schema",
        "current_timezone",
    }
)
"""Spark accepts these without parentheses; sqlglot may read some of them as a column name."""

GENERATOR_TYPES: tuple[type[exp.Expr], ...] = _types(
    "Explode",
    "ExplodeOuter",
    "_ExplodeOuter",
    "Posexplode",
    "PosexplodeOuter",
    "Inline",
    "Stack",
    "Unnest",
    "ExplodingGenerateSeries",
)

GENERATOR_NAMES: frozenset[str] = frozenset({"json_tuple", "inline_outer", "explode", "posexplode", "stack"})

WINDOW_ONLY_TYPES: tuple[type[exp.Expr], ...] = _types(
    "RowNumber",
    "Rank",
    "DenseRank",
    "Ntile",
    "Lag",
    "Lead",
    "CumeDist",
    "PercentRank",
    "NthValue",
    "FirstValue",
    "LastValue",
)
"""Functions that only exist over a window; a window is refused wherever it appears."""

UNSUPPORTED_AGGREGATE_NAMES: frozenset[str] = frozenset(
    {
        "mean",
        "std",
        "try_sum",
        "try_avg",
        "some",
        "every",
        "product",
        "histogram_numeric",
        "count_min_sketch",
        "bloom_filter_agg",
        "hll_sketch_agg",
        "hll_union_agg",
        "approx_top_k",
    }
)
"""Spark aggregates sqlglot does not model: refused as aggregates rather than as unknown."""

AGGREGATE_ALTERNATIVES: dict[str, str] = {
    "mean": "use avg(), which is maintained incrementally",
    "try_sum": "use sum(), which is maintained incrementally",
    "try_avg": "use avg(), which is maintained incrementally",
}

DETERMINISTIC_BUILTIN_NAMES: frozenset[str] = frozenset(
    {
        "array_repeat",
        "assert_true",  # dbt-spark's own dateadd/datediff macros emit it
        "array_union",
        "arrays_overlap",
        "bigint",
        "bin",
        "binary",
        "bround",
        "btrim",
        "cardinality",
        "conv",
        "crc32",
        "date_part",
        "datepart",
        "decimal",
        "e",
        "find_in_set",
        "format_number",
        "forall",
        "from_csv",
        "hash",
        "hypot",
        "isnotnull",
        "isnull",
        "json_array_length",
        "make_date",
        "make_dt_interval",
        "make_timestamp_ntz",
        "make_ym_interval",
        "map_concat",
        "map_entries",
        "map_filter",
        "map_values",
        "map_zip_with",
        "mask",
        "nullifzero",
        "octet_length",
        "pmod",
        "positive",
        "smallint",
        "timestamp_micros",
        "timestamp_millis",
        "timestamp_seconds",
        "tinyint",
        "to_csv",
        "to_timestamp_ltz",
        "to_timestamp_ntz",
        "transform_keys",
        "transform_values",
        "try_to_number",
        "try_to_timestamp",
        "unix_micros",
        "unix_millis",
        "unix_seconds",
        "url_decode",
        "url_encode",
        "weekday",
        "xxhash64",
        "zeroifnull",
        "zip_with",
    }
)
"""Deterministic Spark built-ins that sqlglot parses as ``exp.Anonymous``. Any other anonymous
function is refused: it may be a user-defined function, whose determinism is unknown."""


def is_nondeterministic(node: exp.Expr) -> bool:
    if isinstance(node, NONDETERMINISTIC_TYPES) or type(node).__name__.startswith("Current"):
        return True
    return isinstance(node, exp.Anonymous) and node.name.lower() in NONDETERMINISTIC_NAMES


def is_generator(node: exp.Expr) -> bool:
    if isinstance(node, GENERATOR_TYPES):
        return True
    return isinstance(node, exp.Anonymous) and node.name.lower() in GENERATOR_NAMES


def is_aggregate(node: exp.Expr) -> bool:
    """An aggregate call of any kind (maintainable or not)."""
    if isinstance(node, exp.AggFunc):
        return True
    if isinstance(node, (exp.Any, exp.All)) and not isinstance(node.this, exp.Query):
        # Spark's any(x)/every(x) aggregates; not ANY (subquery), nor the quantifier of
        # `x LIKE ANY ('a%', 'b%')` (a predicate's right operand)
        return not (isinstance(node.parent, exp.Predicate) and node.arg_key == "expression")
    return isinstance(node, exp.Anonymous) and node.name.lower() in UNSUPPORTED_AGGREGATE_NAMES


def is_delta_aggregate(node: exp.Expr) -> bool:
    """COUNT/SUM/AVG/MIN/MAX of one value, without DISTINCT: maintained from the changes' deltas."""
    return isinstance(node, MAINTAINABLE_AGGREGATES) and not isinstance(node.this, exp.Distinct)


def is_recomputed_aggregate(node: exp.Expr) -> bool:
    """An aggregate maintained by recomputing the groups a change touches (RECOMPUTED_AGGREGATES,
    a DISTINCT COUNT/SUM/AVG/MIN/MAX, a sorted COLLECT_LIST/COLLECT_SET, an ordered LISTAGG)."""
    if isinstance(node, tuple(NOT_RECOMPUTABLE_ALTERNATIVES)):  # PERCENTILE_APPROX is a kind of PERCENTILE
        return False
    if isinstance(node, MAINTAINABLE_AGGREGATES):
        return isinstance(node.this, exp.Distinct)
    if isinstance(node, COLLECTIONS):
        parent = node.parent
        while isinstance(parent, exp.Paren):
            parent = parent.parent
        return isinstance(parent, SORTED_ARRAYS)
    if isinstance(node, CONCATENATIONS):
        return isinstance(node.this, exp.Order)
    return isinstance(node, RECOMPUTED_AGGREGATES)


def concatenated_value(node: exp.Expr) -> exp.Expr | None:
    """The value an ordered LISTAGG joins (None: not one, or ``LISTAGG(DISTINCT x)``, which Spark
    orders by the value itself)."""
    if not isinstance(node, CONCATENATIONS) or not isinstance(node.this, exp.Order):
        return None
    value = node.this.this
    return None if isinstance(value, exp.Distinct) else value


def is_maintainable_aggregate(node: exp.Expr) -> bool:
    return is_delta_aggregate(node) or is_recomputed_aggregate(node)


def contains_aggregate(node: exp.Expr) -> bool:
    """Whether ``node`` aggregates rows (an aggregate over a window, ``SUM(x) OVER (...)``,
    does not: it is computed per row)."""
    return any(is_aggregate(n) and not is_windowed(n) for n in node.walk())


def is_windowed(node: exp.Expr) -> bool:
    """Whether ``node`` is the function of a window (``IGNORE NULLS`` and the like between)."""
    parent = node.parent
    while isinstance(parent, (exp.IgnoreNulls, exp.RespectNulls)):
        parent = parent.parent
    return isinstance(parent, exp.Window)
