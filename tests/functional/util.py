"""Helpers shared by the functional tests."""

import os
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

# the dbt command line of this interpreter's environment (for tests that run dbt in processes of its own)
DBT = str(Path(sys.executable).with_name("dbt"))
REPO = Path(__file__).resolve().parents[2]
# ... with the tests' fault injection installed (tests/faults.py; run with dbt_with_faults_env)
DBT_WITH_FAULTS = [sys.executable, "-m", "tests.dbt_with_faults"]


def dbt_with_faults_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a DBT_WITH_FAULTS process: the repository importable (its ``tests`` package)."""
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))}
# in the one-line failure of a refresh that lost (FastRefreshEngine.publish, dbt_incremental_mv.conflicts)
LOST_RACE = "committed while this one ran"


def rows(project, sql):
    return [tuple(row) for row in project.run_sql(sql, fetch="all")]


def data_files_of_last_commit(project, table):
    """The operation of ``table``'s current snapshot (its main branch) and the data files it added."""
    return rows(
        project,
        f"select operation, summary['added-data-files'] from {table}.snapshots "
        f"where snapshot_id = (select snapshot_id from {table}.refs where name = 'main')",
    )


def assert_same_multiset(actual, expected, what="view"):
    actual_counts, expected_counts = Counter(actual), Counter(expected)
    missing = expected_counts - actual_counts
    extra = actual_counts - expected_counts
    assert not missing and not extra, f"{what} differs from its defining query: missing {dict(missing)}, extra {dict(extra)}"


def assert_view_matches_query(project, view, query, columns="*"):
    """The stored view equals its defining query recomputed now, as multisets."""
    assert_same_multiset(rows(project, f"select {columns} from {view}"), rows(project, query), what=str(view))


def relation_exists(project, identifier):
    tables = rows(project, f"show tables in {project.test_schema}")
    return any(name == identifier for _, name, *_ in tables)


# --- the example project (integration_tests/) as dbt test-fixture files, and its views' queries ---

EXAMPLE_PROJECT = Path(__file__).resolve().parents[2] / "integration_tests"
_REF = re.compile(r"\{\{\s*ref\(\s*['\"](\w+)['\"]\s*\)\s*\}\}")
_CONFIG = re.compile(r"\{\{\s*config\(.*?\)\s*\}\}", re.DOTALL)


def render_refs(sql, schema):
    """A model's defining query: ``{{ config(...) }}`` dropped, ``{{ ref('x') }}`` -> ``schema.x``."""
    return _REF.sub(lambda m: f"{schema}.{m.group(1)}", _CONFIG.sub("", sql))


def example_project_files(kind):
    """The example project's files of one kind (``seeds``, ``models``, ``macros``) by file name,
    as dbt's test fixtures of that name take them."""
    folder = EXAMPLE_PROJECT / kind
    if not folder.is_dir():
        return {}
    return {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.suffix in (".csv", ".sql", ".yml")}


def query_columns(project, query):
    """The output column names of a query (``describe query``), backquoted for a select list."""
    return ["`" + name.replace("`", "``") + "`" for name, *_ in rows(project, f"describe query {query}")]


def assert_views_match_queries(project, models):
    """Every ``<name>.sql`` model in ``models`` equals its defining query recomputed now (compared
    on the query's columns: the view's table may carry hidden bookkeeping columns too)."""
    for file_name, sql in models.items():
        if file_name.endswith(".sql"):
            view = f"{project.test_schema}.{file_name[:-4]}"
            query = render_refs(sql, project.test_schema)
            assert_view_matches_query(project, view, query, columns=", ".join(query_columns(project, query)))


def capture_sources(keys: dict[str, str], schema: str = '"{{ target.schema }}"') -> str:
    """sources.yml declaring masters ``shop.<name>`` (``keys``: name -> key column) and a
    capture-managed change log ``mlog_<name>`` for each, all in ``schema``."""
    masters = "".join(f"      - name: {name}\n" for name in keys)
    logs = "".join(
        f"      - name: mlog_{name}\n        meta: {{mv_log: {{master: shop.{name}, key: [{key}], capture: true}}}}\n"
        for name, key in keys.items()
    )
    return (
        f"version: 2\nsources:\n  - name: shop\n    schema: {schema}\n    tables:\n{masters}"
        f"  - name: mv_logs\n    schema: {schema}\n    tables:\n{logs}"
    )


@pytest.fixture(scope="class")
def force_as_a_rule():
    """refresh_method='force' as Oracle's rule, fast whenever possible, for tests of its fallback:
    a calibration (DBT_INCREMENTAL_MV_CALIBRATION) that prices a complete refresh out."""
    from dbt_incremental_mv.refresh.cost import CALIBRATION_ENV

    previous = os.environ.get(CALIBRATION_ENV)
    os.environ[CALIBRATION_ENV] = str(Path(__file__).with_name("fast_whenever_possible.json"))
    yield
    if previous is None:
        os.environ.pop(CALIBRATION_ENV, None)
    else:
        os.environ[CALIBRATION_ENV] = previous
