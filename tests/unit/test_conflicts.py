"""Iceberg refusing a concurrent commit is told apart from other errors, in one line."""

import pytest

from dbt_incremental_mv.conflicts import LOST_RACE, concurrent_commit_error, lost_race

THRIFT_MERGE = (
    "Database Error\n  org.apache.hive.service.cli.HiveSQLException: Error running query: "
    "org.apache.iceberg.exceptions.ValidationException: Found conflicting files that can contain records "
    "matching true: [/w/shop/v/data/00000-1.parquet]\n\tat org.apache.spark.sql.Dataset.<init>(Dataset.scala:220)"
)
SESSION_COMMIT = "org.apache.iceberg.exceptions.CommitFailedException: Table metadata refresh is required"


@pytest.mark.parametrize("text", [THRIFT_MERGE, SESSION_COMMIT])
def test_a_refused_concurrent_commit_becomes_one_line_that_says_so(text):
    message = concurrent_commit_error(text)
    assert message is not None and "\n" not in message
    assert LOST_RACE in message and "rerun" in message
    assert "Iceberg: " in message and message.split("Iceberg: ", 1)[1] in text


@pytest.mark.parametrize("text", [
    "[TABLE_OR_VIEW_NOT_FOUND] The table or view `shop`.`orders` cannot be found.",
    "org.apache.iceberg.exceptions.ValidationException: Cannot find field 'x' in struct",
    "[DIVIDE_BY_ZERO] Division by zero.",
])
def test_other_errors_are_left_alone(text):
    assert concurrent_commit_error(text) is None
    assert not lost_race(RuntimeError(text))


def test_lost_race_recognises_reported_refusals_and_failed_fast_forwards():
    assert lost_race(RuntimeError(concurrent_commit_error(SESSION_COMMIT)))
    assert lost_race(RuntimeError(THRIFT_MERGE))
    assert lost_race(RuntimeError("Cannot fast-forward: main is not an ancestor of mv_capture_1"))
