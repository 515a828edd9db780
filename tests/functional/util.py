"""Helpers shared by the functional tests."""

from collections import Counter


def rows(project, sql):
    return [tuple(row) for row in project.run_sql(sql, fetch="all")]


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
