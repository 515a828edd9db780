#!/usr/bin/env python3
"""How much of real public dbt code the view analysis accepts, and what blocks the rest.

Input: a corpus directory as scripts/corpus_render.py writes it: ``<project>/<model>.sql``
(dbt's compiled SQL of each model) and ``<project>/corpus.json`` (where the project came from,
the dialect its SQL is written in, every model's compile status, and the relations it knows with
their YAML-documented columns). Output: a markdown report.

For each compiled model:

1. **Transpile** to Spark SQL with sqlglot: parse in the project's dialect (``corpus.json``
   ``dialect``: duckdb for the projects whose SQL is all macros or duckdb, snowflake for projects
   hand-written for Snowflake; the macros in every project were rendered by dbt-duckdb), drop the
   catalog from every table name (dbt-duckdb writes ``"corpus"."schema"."table"``; the analysis
   keys masters by ``schema.table``), write Spark SQL. A parse error, or a construct sqlglot says
   it cannot write in Spark (``unsupported_level=RAISE``), counts as not transpiled. Snowflake
   built-ins sqlglot passes through unchanged although Spark has none of that name are written as
   their Spark equivalent (SPARK_EQUIVALENTS: ``TRY_TO_TIMESTAMP_NTZ(x)`` as a try-cast to
   ``TIMESTAMP_NTZ``, which sqlglot writes as Spark's CAST), as a user moving the model to Spark would.
2. **Infer the masters** (we have no warehouse, so no catalog; this is an approximation). For every
   table the Spark SQL reads (``schema.table``, lowercase) the columns are, in this order and
   without duplicates (case-insensitive):

   a. the output names of that relation's own compiled SQL when it is a model of the corpus and
      its outermost SELECT names its columns (sqlglot ``named_selects``; ``*`` adds nothing);
   b. the ``columns:`` the project's YAML documents for that source or model;
   c. every column the query references that resolves to the table: a column qualified by the
      table's alias; an unqualified column in a scope whose only source is the table; an
      unqualified column in a scope of several sources goes to the source whose known columns
      (a, b, or a CTE's/derived table's explicit outputs) have it, else to the first table source
      of that scope; a column read from a CTE or derived table that does not name it but selects
      ``*`` (or ``alias.*``) is followed into it, recursively, the same way; through a UNION
      into every branch.

   Types: the YAML ``data_type`` when it maps plainly to a Spark type (int/bigint/numeric/
   float/double/boolean/date/timestamp/string families), else by name: ``is_*``/``has_*``
   boolean, ``*_at``/``*_timestamp``/``*_time`` timestamp, ``*_date``/``date`` date, else
   ``string``. Key: a column named ``id``; else ``<table singular>_id`` (the table name without a
   ``<prefix>__`` and without ``stg_``/``int_``/``fct_``/``dim_``/``base_``/``src_``/``raw_``
   prefixes, trailing ``ies`` -> ``y``, trailing ``s`` dropped; e.g. ``stg_orders`` ->
   ``order_id``); else the first ``*_id`` or ``*_key`` column the query references; else the
   first column. A relation with no inferred column at all gets none (a ``select *`` of it then
   selects nothing, which the analysis reports).
3. **Analyse**: ``analyze_view(spark_sql, masters, clock)``: accepted (counted by ``view_class``), or
   refused with an UnsupportedViewError, classified into a construct category by its message
   (CATEGORIES below, matched against the error's construct and reason, not its hint; first match
   wins). Any other exception is an analysis crash, reported
   separately with its message (a defect of the analysis or of this script). Each model gets at
   most --timeout seconds.

Refusals of the "unknown table / column" category are mostly artifacts of the inferred masters
(a column the query never names, e.g. one only a ``select *`` of an upstream relation brings in,
or ambiguity this inference created) and are counted separately from the real ones; so are
duplicate-name refusals of models where ``dbt_utils.star`` over a model that did not exist at
compile time left its ``*`` placeholder (the real model lists the columns).

Pure Python (sqlglot and this repository's analysis package), deterministic (sorted inputs, no
clock except the report date). Run from the repository root with its venv:

    cd /work/main && PYTHONPATH=. nice -n 19 .venv/bin/python scripts/corpus_acceptance.py \\
        --corpus /work/corpus/rendered --out tests/results/corpus_acceptance.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import signal
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, ParseError, UnsupportedError
from sqlglot.optimizer.scope import Scope, build_scope

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's package, not an installed copy

from dbt_incremental_mv.analysis import MasterTable, UnsupportedViewError, analyze_view  # noqa: E402
from dbt_incremental_mv.analysis.clock import Clock, clock_move, sql_reads_clock  # noqa: E402
from dbt_incremental_mv.analysis.states import split_into_states  # noqa: E402

# A model that reads the clock is analysed at a time (as a refresh does), and again a day later:
# accepted when only filters of one table's rows differ (fast refreshed while no row crosses their
# boundary); the clock read elsewhere makes every refresh after the time moved a recompute.
BEFORE, AFTER = Clock.of("2026-12-01 09:00:00"), Clock.of("2026-12-02 10:00:00")
CLOCK_ELSEWHERE = "the clock is read outside filters of one table's rows"

# (category, regex on str(UnsupportedViewError)); first match wins. ARTIFACT is the inferred-masters one.
ARTIFACT = "unknown table / column (inferred masters)"
NAMES = "output names (duplicate, unnamed expression)"
# dbt_utils.star over a relation that does not exist compiles to `*` with this comment: the
# duplicate names it brings are an artifact of compiling without a warehouse.
STAR_PLACEHOLDER = "This star is only output during"
STAR_ARTIFACT = "duplicate names from a dbt_utils.star placeholder `*` (compile artifact)"
# the inference gives every table with a column a key: a keyless master is one with no column inferred
KEYLESS = "master without key (no column inferred: artifact)"
ARTIFACTS = (ARTIFACT, STAR_ARTIFACT, KEYLESS)
CATEGORIES: list[tuple[str, str]] = [
    ("query reads no table (constant rows, e.g. LIMIT 0 stubs)", r"the query reads no table"),
    ("LIMIT / TABLESAMPLE", r"LIMIT keeps|TABLESAMPLE"),
    ("ORDER BY", r"ORDER BY has no meaning"),
    ("DISTINCT (where GROUP BY is not substituted)", r"DISTINCT is not supported"),
    ("stacked windows/groupings/joins with no common partition column",
     r"share no (PARTITION BY )?column|not joined on a column equal|outer query does not read it|"
     r"no unique column to break"),
    ("window function", r"\bwindows?\b"),
    ("current_date/time read outside filters of one table", CLOCK_ELSEWHERE),
    ("random / session dependent (non-deterministic)", r"non-deterministic functions"),
    ("CTE/subquery that aggregates, joined or aggregated again",
     r"aggregating the result of an aggregating CTE|may filter, project and join tables, but .*aggregat"),
    ("CTE/subquery that joins, used where its join cannot be spliced (outer side, ...)",
     r"a CTE or subquery that joins tables can be joined to more tables, but not here"),
    ("CTE/subquery joined to other tables, other shape (DISTINCT, LIMIT, UNION, ...)",
     r"a CTE or subquery that is joined to other tables may filter"),
    ("UNION ALL under aggregate/join (not outermost)", r"UNION ALL is fast refreshed as the outermost query"),
    ("UNION ALL branch incompatibility", r"UNION ALL branch|the UNION ALL needs|union widens"),
    ("UNION / INTERSECT / EXCEPT (set semantics)", r"set operations other than UNION ALL"),
    ("FULL OUTER JOIN", r"FULL OUTER JOIN|full outer join"),
    ("subquery in SELECT/WHERE/ON (IN/EXISTS/scalar)", r"subqueries in SELECT, WHERE or ON"),
    ("LATERAL VIEW / explode / table functions / VALUES",
     r"generator functions|LATERAL|table-valued functions|inline VALUES|lateral"),
    ("unknown / user-defined function", r"unknown or user-defined functions"),
    ("aggregate not maintainable (order-dependent, FILTER, several args, ...)",
     r"this aggregate cannot be maintained|depends on the order Spark reads|FILTER is maintained|values are joined in the order|"
     r"aggregates over several arguments|nested aggregates|order of a collected array"),
    ("outer join: filter/condition on null-supplying side, no equality",
     r"null-supplying side|null-extends|an outer join needs at least one equality|"
     r"drops the null-extended rows"),
    ("join type / join shape (CROSS, SEMI/ANTI, parenthesised, USING)",
     r"joins are not supported|this join type|parenthesised joins|USING|left-to-right chain|"
     r"join .* modifiers"),
    ("GROUP BY / HAVING shape (GROUPING SETS, unselected group key, ...)",
     r"GROUP BY|GROUPING SETS|ROLLUP|CUBE|HAVING|neither aggregated nor in GROUP BY|aggregates are not allowed|"
     r"acts like HAVING|aggregates without GROUP BY"),
    (NAMES,
     r"stable name|more than one output column|more than one column named|distinct name|reserved for the plugin"),
    ("SELECT * form (over USING, aliased, EXCEPT/REPLACE)", r"SELECT \*|a star"),
    ("SQL does not parse in Spark / cannot be written back", r"does not parse|cannot write it back"),
    ("recursive CTE", r"recursive"),
    (ARTIFACT,
     r"not a master table known|unknown column|has no column |ambiguous column|no table or alias named|"
     r"not a column of the table|column list names"),
    (KEYLESS, r"needs a declared unique key"),
]
OTHER = "other"

SPARK_TYPES = [
    (r"^(tiny|small|big)?int(eger)?\d*$|^int64$|^long$", "bigint"),
    (r"^(numeric|decimal|number)(\(.*\))?$|^float\d*$|^double( precision)?$|^real$", "double"),
    (r"^bool(ean)?$", "boolean"),
    (r"^date$", "date"),
    (r"^timestamp.*$|^datetime$", "timestamp"),
    (r"^(var)?char.*$|^string$|^text$", "string"),
]
PREFIXES = ("stg_", "int_", "fct_", "fact_", "dim_", "base_", "src_", "raw_")


# Snowflake built-ins sqlglot leaves as they are when writing Spark, which has no function of that
# name: the Spark expression a user moving the model to Spark writes instead (one argument each)
SPARK_EQUIVALENTS = {
    # parse a string as a timestamp without time zone, NULL when it is none
    "try_to_timestamp_ntz": lambda value: exp.TryCast(this=value, to=exp.DataType.build("timestamp_ntz")),
}


class AnalysisTimeout(Exception):
    pass


# -- transpiling --------------------------------------------------------------------------------


def transpile(sql: str, dialect: str) -> tuple[str | None, str | None]:
    """(Spark SQL, None) or (None, why not)."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except ParseError as error:
        return None, f"parse error ({dialect}): {str(error).splitlines()[0][:160]}"
    except Exception as error:  # sqlglot raises others (TokenError, ...) on odd input
        return None, f"{type(error).__name__} ({dialect}): {str(error).splitlines()[0][:160]}"
    if len(statements) != 1:
        return None, f"{len(statements)} statements"
    tree = statements[0]
    for table in tree.find_all(exp.Table):
        table.set("catalog", None)
    for call in list(tree.find_all(exp.Anonymous)):
        equivalent = SPARK_EQUIVALENTS.get(str(call.this).lower())
        if equivalent is not None and len(call.expressions) == 1:
            call.replace(equivalent(call.expressions[0]))
    try:
        return tree.sql(dialect="spark", unsupported_level=ErrorLevel.RAISE), None
    except UnsupportedError as error:
        return None, f"sqlglot cannot write it in Spark: {str(error).splitlines()[0][:160]}"
    except Exception as error:
        return None, f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"


def table_key(table: exp.Table) -> str | None:
    if not table.name or not table.db:
        return None
    return f"{table.db}.{table.name}".lower()


def outer_names(sql: str, dialect: str) -> list[str]:
    """The named output columns of a model's compiled SQL (empty when it cannot tell)."""
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except Exception:
        return []
    while isinstance(tree, exp.SetOperation):
        tree = tree.this
    if not isinstance(tree, exp.Select):
        return []
    return [n for n in tree.named_selects if n and n != "*"]


# -- inferring masters ----------------------------------------------------------------------------


@dataclass
class Inference:
    known: dict[str, list[str]]  # relation -> columns known before looking at the query (a, b)
    referenced: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, key: str, name: str) -> None:
        names = self.referenced[key]
        if name.lower() not in {n.lower() for n in names}:
            names.append(name)

    def has(self, key: str, name: str) -> bool:
        wanted = name.lower()
        return any(n.lower() == wanted for n in [*self.known.get(key, []), *self.referenced.get(key, [])])


def _explicit_outputs(scope: Scope) -> set[str] | None:
    """Lowercase output names of a derived scope; None when it selects a star (cannot tell)."""
    node = scope.expression
    while isinstance(node, exp.SetOperation):
        node = node.this
    if not isinstance(node, exp.Select):
        return set()
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
           for e in node.expressions):
        return None
    return {n.lower() for n in node.named_selects}


def _sources(scope: Scope) -> list[tuple[str, object]]:
    """(alias, exp.Table or Scope) in FROM/JOIN order."""
    out = []
    for alias, (_node, source) in scope.selected_sources.items():
        if isinstance(source, (exp.Table, Scope)):
            out.append((alias, source))
    return out


def _resolve(inf: Inference, scope: Scope, name: str, qualifier: str | None, seen: set) -> None:
    marker = (id(scope), name.lower(), qualifier)
    if marker in seen:
        return
    seen.add(marker)
    sources = _sources(scope)
    if not sources:
        return
    if qualifier:
        chosen = [s for a, s in sources if a.lower() == qualifier.lower()]
        if not chosen:
            return
        target = chosen[0]
    elif len(sources) == 1:
        target = sources[0][1]
    else:
        target = None
        for _alias, source in sources:
            if isinstance(source, exp.Table):
                key = table_key(source)
                if key and inf.has(key, name):
                    target = source
                    break
            else:
                outputs = _explicit_outputs(source)
                if outputs is not None and name.lower() in outputs:
                    target = source
                    break
        if target is None:
            tables = [s for _a, s in sources if isinstance(s, exp.Table) and table_key(s)]
            starred = [s for _a, s in sources if isinstance(s, Scope) and _explicit_outputs(s) is None]
            target = tables[0] if tables else (starred[0] if starred else None)
        if target is None:
            return
    if isinstance(target, exp.Table):
        key = table_key(target)
        if key:
            inf.add(key, name)
        return
    _demand(inf, target, name, seen)


def _demand(inf: Inference, scope: Scope, name: str, seen: set) -> None:
    """A column read from a derived scope: if it does not name it, follow its stars."""
    if isinstance(scope.expression, exp.SetOperation):
        for branch in scope.set_operation_scopes:
            _demand(inf, branch, name, seen)
        return
    select = scope.expression
    if not isinstance(select, exp.Select):
        return
    if name.lower() in {n.lower() for n in select.named_selects if n != "*"}:
        return
    for item in select.expressions:
        if isinstance(item, exp.Star):
            _resolve(inf, scope, name, None, seen)
        elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            _resolve(inf, scope, name, item.table or None, seen)


def infer_masters(spark_sql: str, inf: Inference, yaml_types: dict[str, dict[str, str]]) -> dict[str, MasterTable]:
    tree = sqlglot.parse_one(spark_sql, read="spark")
    keys: list[str] = []
    for table in tree.find_all(exp.Table):
        key = table_key(table)
        if key and key not in keys:
            keys.append(key)
    root = build_scope(tree)
    seen: set = set()
    if root is not None:
        for scope in root.traverse():
            for column in scope.columns:
                if not isinstance(column.this, exp.Identifier) or (not column.table and _select_alias(column)):
                    continue
                _resolve(inf, scope, column.name, column.table or None, seen)
    masters = {}
    for key in keys:
        names: list[str] = []
        for name in inf.known.get(key, []) + inf.referenced.get(key, []):
            if name.lower() not in {n.lower() for n in names}:
                names.append(name)
        columns = tuple((n, spark_type(n, yaml_types.get(key, {}).get(n.lower()))) for n in names)
        masters[key] = MasterTable(key, columns, infer_key(key, names, inf.referenced.get(key, [])))
    return masters


def _select_alias(column: exp.Column) -> bool:
    """An unqualified name in GROUP BY, HAVING or ORDER BY that names one of its SELECT's
    projections (``group by received_at_date`` for ``cast(received_at as date) as
    received_at_date``): Spark reads it as that projection unless a table has such a column, so it
    is no evidence of a master column."""
    clause = column.find_ancestor(exp.Group, exp.Having, exp.Order, exp.Select)
    select = clause.parent if isinstance(clause, (exp.Group, exp.Having, exp.Order)) else None
    if not isinstance(select, exp.Select):
        return False
    aliases = {p.alias.lower() for p in select.expressions if isinstance(p, exp.Alias)}
    return column.name.lower() in aliases


def spark_type(name: str, declared: str | None) -> str:
    if declared:
        lowered = declared.strip().lower()
        for pattern, spark in SPARK_TYPES:
            if re.match(pattern, lowered):
                return spark
    n = name.lower()
    if n.startswith(("is_", "has_")):
        return "boolean"
    if n.endswith(("_at", "_timestamp", "_time")):
        return "timestamp"
    if n.endswith("_date") or n == "date":
        return "date"
    return "string"


def singular(table: str) -> str:
    name = table.split("__")[-1]
    for prefix in PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
    if name.endswith("ies"):
        return name[:-3] + "y"
    if name.endswith("s") and not name.endswith("ss"):
        return name[:-1]
    return name


def infer_key(key: str, names: list[str], referenced: list[str]) -> tuple[str, ...]:
    if not names:
        return ()
    by_lower = {n.lower(): n for n in names}
    for candidate in ("id", f"{singular(key.split('.')[-1])}_id"):
        if candidate in by_lower:
            return (by_lower[candidate],)
    for name in referenced:
        if name.lower().endswith(("_id", "_key")):
            return (name,)
    return (names[0],)


# -- classifying ----------------------------------------------------------------------------------


def categorize(message: str, star_placeholder: bool = False) -> str:
    for category, pattern in CATEGORIES:
        if re.search(pattern, message):
            if star_placeholder and category == NAMES:
                return STAR_ARTIFACT
            return category
    return OTHER


@dataclass
class Outcome:
    project: str
    model: str
    status: str  # compile_error, transpile_error, inference_error, accepted, refused, crash
    detail: str = ""
    view_class: str = ""
    category: str = ""
    construct: str = ""
    masters: int = 0  # distinct master tables of an accepted view
    split: str = ""  # a model maintained in steps: the states it splits into (analysis/states.py)


def _alarm(signum, frame):
    raise AnalysisTimeout()


def analyse_project(directory: Path, timeout: int) -> tuple[dict, list[Outcome]]:
    info = json.loads((directory / "corpus.json").read_text())
    dialect = info["dialect"]
    known_base: dict[str, list[str]] = {}
    yaml_types: dict[str, dict[str, str]] = {}
    for key, relation in sorted(info["relations"].items()):
        known_base[key] = [c["name"] for c in relation["columns"]]
        yaml_types[key] = {c["name"].lower(): c["data_type"] for c in relation["columns"] if c.get("data_type")}
    for model in info["models"]:  # (a): the outputs of upstream models, first
        if model["status"] == "compiled" and model.get("relation"):
            outputs = outer_names((directory / model["file"]).read_text(), dialect)
            yaml = known_base.get(model["relation"], [])
            known_base[model["relation"]] = outputs + [c for c in yaml if c.lower() not in {o.lower() for o in outputs}]
    outcomes = []
    for model in sorted(info["models"], key=lambda m: m["name"]):
        name = model["name"]
        if model["status"] != "compiled":
            outcomes.append(Outcome(info["project"], name, "compile_error", model.get("message", "")))
            continue
        compiled_sql = (directory / model["file"]).read_text()
        star_placeholder = STAR_PLACEHOLDER in compiled_sql
        spark_sql, why = transpile(compiled_sql, dialect)
        if spark_sql is None:
            outcomes.append(Outcome(info["project"], name, "transpile_error", why or ""))
            continue
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(timeout)
        try:
            inference = Inference({k: list(v) for k, v in known_base.items()})
            try:
                masters = infer_masters(spark_sql, inference, yaml_types)
            except AnalysisTimeout:
                raise
            except Exception as error:  # this script's inference, not the analysis
                outcomes.append(Outcome(info["project"], name, "inference_error", f"{type(error).__name__}: {error}"))
                continue
            definition = analyze_view(spark_sql, masters, BEFORE)
            if sql_reads_clock(spark_sql):
                move = clock_move(definition, analyze_view(spark_sql, masters, AFTER))
                if move.elsewhere is not None:
                    raise UnsupportedViewError(
                        "the clock", f"{CLOCK_ELSEWHERE} (in {move.elsewhere})", "a refresh recomputes it"
                    )
            view_class = getattr(definition.view_class, "value", str(definition.view_class))
            parts = (definition, *getattr(definition, "branches", ()))
            tables = len({o.master.name for d in parts for o in getattr(d, "occurrences", ())})
            outcomes.append(Outcome(info["project"], name, "accepted", view_class=view_class, masters=tables))
        except UnsupportedViewError as error:
            message = str(error)
            category = categorize(f"{error.construct}: {error.reason}", star_placeholder)
            found = None
            if category not in ARTIFACTS and not sql_reads_clock(spark_sql):
                found = split_into_states(spark_sql, masters)
            if found is not None:  # maintained in steps (refresh/units.py), as the materialization does
                states = ", ".join(f"{s.name} ({s.view_class.value})" for s in found.states)
                outcomes.append(Outcome(info["project"], name, "accepted", f"states: {states}; then {found.view_class.value}",
                                        view_class="in_steps", split=states,
                                        masters=len(masters)))
            else:
                outcomes.append(Outcome(info["project"], name, "refused", message, category=category,
                                        construct=error.construct))
        except AnalysisTimeout:
            outcomes.append(Outcome(info["project"], name, "crash", f"analysis took over {timeout}s"))
        except RecursionError:
            outcomes.append(Outcome(info["project"], name, "crash", "RecursionError"))
        except Exception as error:  # a crash: report it, keep going
            outcomes.append(Outcome(info["project"], name, "crash", f"{type(error).__name__}: {str(error)[:300]}"))
        finally:
            signal.alarm(0)
    return info, outcomes


# -- report ---------------------------------------------------------------------------------------


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _cell(text: str, limit: int = 220) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def report(projects: list[tuple[dict, list[Outcome]]], corpus: Path) -> str:
    all_outcomes = [o for _, outs in projects for o in outs]
    classes = sorted({o.view_class for o in all_outcomes if o.status == "accepted"})
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "dbt_incremental_mv"],
                           capture_output=True, text=True).stdout.strip()
    lines = [
        "# Corpus acceptance: how much public dbt code the view analysis accepts",
        "",
        f"Date: {datetime.date.today().isoformat()}. Analysis commit: `{commit}`"
        + (" (with uncommitted changes under dbt_incremental_mv/)" if dirty else "")
        + f". sqlglot {sqlglot.__version__}. Corpus: `{corpus}`.",
        "",
        "Generated by `scripts/corpus_acceptance.py` (read its docstring for the method). Rerun:",
        "",
        "```sh",
        "# 1. corpus (needs the snapshots under /work/.mirror, see the script; dbt in /work/corpus/venv)",
        "nice -n 19 python3 scripts/corpus_render.py",
        "# 2. this report",
        "PYTHONPATH=. nice -n 19 .venv/bin/python scripts/corpus_acceptance.py \\",
        "    --corpus /work/corpus/rendered --out tests/results/corpus_acceptance.md",
        "```",
        "",
        "**Approximations.** There is no warehouse: the models were compiled (`dbt compile`, dbt-duckdb, no",
        "data), transpiled to Spark SQL by sqlglot, and the masters' columns, types and keys are *inferred*",
        "(columns: upstream model outputs, YAML `columns:`, and what the query itself references; type",
        "`string` unless obvious; key `id` / `<table>_id` / first referenced `*_id`/`*_key` / first column).",
        "So a refusal that names an unknown column or table is usually an artifact of that inference,",
        "and is counted apart; an acceptance means the SQL *shape* is maintainable, assuming the inferred",
        "key really is unique. Models are counted whatever their materialization (including ephemeral",
        "and staging views one would not fast-refresh); macros that introspect the warehouse",
        "(`get_columns_in_relation`, `dbt_utils.star`, ...) see a catalog where every source is an empty",
        "table with its YAML-documented columns (and, for the fivetran packages, their `staging/tmp` views",
        "were built over those); other models do not exist, so a macro that introspects a model",
        "(`dbt_utils.star(ref(...))`) sees no columns, and a model whose introspection query fails is not compiled.",
        "",
        "## Projects",
        "",
        "| project | repository @ commit | dialect | models | compiled | transpiled | accepted | share of compiled |"
        + "".join(f" {c} |" for c in classes) + " refused | of which artifacts | crashes |",
        "|---|---|---|---:|---:|---:|---:|---:|" + "---:|" * len(classes) + "---:|---:|---:|",
    ]

    def row(label: str, source: str, dialect: str, outs: list[Outcome]) -> str:
        count = Counter(o.status for o in outs)
        compiled = len(outs) - count["compile_error"]
        transpiled = compiled - count["transpile_error"] - count["inference_error"]
        by_class = Counter(o.view_class for o in outs if o.status == "accepted")
        artifacts = sum(o.status == "refused" and o.category in ARTIFACTS for o in outs)
        return (f"| {label} | {source} | {dialect} | {len(outs)} | {compiled} | {transpiled} | {count['accepted']} | "
                f"{_pct(count['accepted'], compiled)} |" + "".join(f" {by_class[c]} |" for c in classes)
                + f" {count['refused']} | {artifacts} | {count['crash']} |")

    for info, outs in projects:
        source = f"{info['repository']}{'/' + info['subdir'] if info['subdir'] else ''} @ `{info['commit'][:10]}`"
        lines.append(row(info["project"], source, info["dialect"], outs))
    lines.append(row("**all**", "", "", all_outcomes))
    lines += ["", "Packages each project was compiled with (snapshot @ ref (commit)):", ""]
    for info, _outs in projects:
        packages = ", ".join(f"{k}: {v}" for k, v in sorted(info.get("packages", {}).items())) or "none"
        lines.append(f"- {info['project']}: {packages}")
    count = Counter(o.status for o in all_outcomes)
    compiled = len(all_outcomes) - count["compile_error"]
    transpiled = compiled - count["transpile_error"] - count["inference_error"]
    refused = [o for o in all_outcomes if o.status == "refused"]
    artifacts = [o for o in refused if o.category in ARTIFACTS]
    real = len(refused) - len(artifacts)
    splits = [o for o in all_outcomes if o.status == "accepted" and o.split]
    lines += [
        "",
        "## Overall",
        "",
        f"- models: {len(all_outcomes)}; compiled: {compiled}; transpiled to Spark: {transpiled}",
        f"- **accepted: {count['accepted']} of {transpiled} transpiled ({_pct(count['accepted'], transpiled)})**; "
        + ", ".join(f"{c}: {n}" for c, n in sorted(Counter(o.view_class for o in all_outcomes
                                                              if o.status == "accepted").items())),
        f"- of the accepted, reading one master table: {sum(o.status == 'accepted' and o.masters == 1 for o in all_outcomes)} "
        "(mostly staging models: a projection/filter/rename of one source); reading two or more: "
        f"{sum(o.status == 'accepted' and o.masters > 1 for o in all_outcomes)} (UNION ALL views counted by the "
        "masters of all branches)",
        f"- refused: {len(refused)} ({real} for a construct, {len(artifacts)} artifacts of having no warehouse: an "
        "unknown table/column of the inferred masters, or a `dbt_utils.star` placeholder)",
        f"- analysis crashes (an exception other than UnsupportedViewError): {count['crash']}",
        f"- excluding the artifacts, accepted {count['accepted']} of {count['accepted'] + real} "
        f"({_pct(count['accepted'], count['accepted'] + real)})",
        f"- of the accepted, {len(splits)} are maintained in steps (refused as one view, split into internal states "
        "each accepted as a view of its own, keyed by what its shape makes unique, and the query over them: "
        "`analysis/states.py`, `refresh/units.py`; models reading the clock are not split): "
        + ", ".join(f"{o.project}/{o.model} [{o.split}]" for o in splits),
        "",
        "## Refusals by construct",
        "",
        "The category of the first construct the analysis names (it stops at the first); a model can hold",
        "more than one blocker.",
        "",
        "| category | models | share of refused | projects | example construct (model) |",
        "|---|---:|---:|---|---|",
    ]
    by_category: dict[str, list[Outcome]] = defaultdict(list)
    for o in refused:
        by_category[o.category].append(o)
    for category, outs in sorted(by_category.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        example = outs[0]
        lines.append(f"| {category} | {len(outs)} | {_pct(len(outs), len(refused))} | "
                     f"{len({o.project for o in outs})} | `{_cell(example.construct, 90)}` ({example.project}/{example.model}) |")
    others = Counter(o.detail for o in by_category.get(OTHER, []))
    lines += ["", f"### Top messages of '{OTHER}'", ""]
    if others:
        lines += ["| models | message |", "|---:|---|"]
        lines += [f"| {n} | {_cell(m, 400)} |" for m, n in others.most_common(5)]
    else:
        lines.append("None: every refusal fell in a named category.")
    lines += ["", "### Most frequent refusal messages (all categories)", "", "| models | category | message |",
              "|---:|---|---|"]
    generic = Counter((o.category, re.sub(r"cannot fast refresh: .*?: ", "", o.detail, count=1)) for o in refused)
    lines += [f"| {n} | {c} | {_cell(m, 260)} |" for (c, m), n in generic.most_common(15)]
    lines += ["", "## Not compiled, not transpiled, crashes", ""]
    for status, title in (("compile_error", "Not compiled (dbt compile failed)"),
                          ("transpile_error", "Not transpiled (sqlglot)"),
                          ("inference_error", "Masters not inferred (this script failed; counted as not transpiled)"),
                          ("crash", "Analysis crashes")):
        outs = [o for o in all_outcomes if o.status == status]
        lines.append(f"**{title}: {len(outs)}.**")
        if outs:
            reasons = Counter(re.sub(r"\s+", " ", o.detail)[:200] for o in outs)
            lines += ["", "| models | first example | reason |", "|---:|---|---|"]
            for reason, n in reasons.most_common(8):
                first = next(o for o in outs if re.sub(r"\s+", " ", o.detail)[:200] == reason)
                lines.append(f"| {n} | {first.project}/{first.model} | {_cell(reason, 200)} |")
        lines.append("")
    lines += ["## Every model", "", "<details><summary>model, outcome, detail</summary>", "",
              "| project | model | outcome | class / category | detail |", "|---|---|---|---|---|"]
    for o in all_outcomes:
        what = o.view_class if o.status == "accepted" else o.category
        lines.append(f"| {o.project} | {o.model} | {o.status} | {what} | {_cell(o.detail, 200)} |")
    lines += ["", "</details>", ""]
    return "\n".join(lines)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("/work/corpus/rendered"))
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "results" / "corpus_acceptance.md")
    parser.add_argument("--timeout", type=int, default=60, help="seconds of analysis per model")
    parser.add_argument("--json", type=Path, help="also write every model's outcome as JSON")
    args = parser.parse_args(list(argv) if argv is not None else None)
    sys.setrecursionlimit(10000)
    projects = []
    for directory in sorted(p.parent for p in args.corpus.glob("*/corpus.json")):
        info, outcomes = analyse_project(directory, args.timeout)
        accepted = sum(o.status == "accepted" for o in outcomes)
        print(f"{info['project']}: {accepted}/{len(outcomes)} accepted", flush=True)
        projects.append((info, outcomes))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report(projects, args.corpus))
    if args.json:
        args.json.write_text(json.dumps([o.__dict__ for _, outs in projects for o in outs], indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
